"""Judge roles for relative and absolute position questions: their own configuration, falling back
to ``spatial`` and then ``default`` setting by setting."""

from __future__ import annotations

import pytest

from mmverify.core.registry import UnknownIdError
from mmverify.models.judge_config import (
    ROLES,
    apply_cli_options,
    config_from_env,
    judge_identities,
    parse_role_spec,
    role_chain,
)

BASE = {"MMVERIFY_VLM_BASE_URL": "http://127.0.0.1:8000/v1", "MMVERIFY_VLM_MODEL": "qwen-vl", "MMVERIFY_VLM_CACHE": "off"}
GEMINI = "https://generativelanguage.googleapis.com/v1beta/openai"


def test_the_position_roles_and_their_fallbacks():
    assert {"spatial_relative", "spatial_absolute"} <= set(ROLES)
    assert role_chain("spatial_relative") == ("spatial_relative", "spatial", "default")
    assert role_chain("spatial_absolute") == ("spatial_absolute", "spatial", "default")
    assert role_chain("ocr_second") == ("ocr_second", "default") and role_chain("default") == ("default",)
    with pytest.raises(UnknownIdError, match="spatial_relative"):
        role_chain("spatial_relativ")


def test_unconfigured_position_roles_use_the_default_judge():
    default = config_from_env("default", BASE)
    assert config_from_env("spatial_relative", BASE) == config_from_env("spatial_absolute", BASE) == default
    assert config_from_env("spatial_relative", {}) is None


def test_spatial_configures_both_position_roles_until_they_are_set_themselves():
    env = BASE | {"MMVERIFY_VLM_SPATIAL_MODEL": "gemini-2.5-pro", "MMVERIFY_VLM_SPATIAL_BASE_URL": GEMINI,
                  "MMVERIFY_VLM_SPATIAL_API_KEY_ENV": "GEMINI_API_KEY"}  # fmt: skip
    relative, absolute = config_from_env("spatial_relative", env), config_from_env("spatial_absolute", env)
    assert relative == absolute == config_from_env("spatial", env)
    assert (absolute.model, absolute.base_url, absolute.api_key_env) == ("gemini-2.5-pro", GEMINI, "GEMINI_API_KEY")

    env |= {"MMVERIFY_VLM_SPATIAL_RELATIVE_MODEL": "gpt-4o", "MMVERIFY_VLM_SPATIAL_RELATIVE_BASE_URL": "https://api.openai.com/v1",
            "MMVERIFY_VLM_SPATIAL_RELATIVE_API_KEY_ENV": "OPENAI_API_KEY"}  # fmt: skip
    relative = config_from_env("spatial_relative", env)
    assert (relative.model, relative.base_url, relative.api_key_env) == ("gpt-4o", "https://api.openai.com/v1", "OPENAI_API_KEY")
    assert config_from_env("spatial_absolute", env).model == "gemini-2.5-pro"  # unchanged


def test_each_setting_comes_from_the_nearest_role_that_sets_it():
    env = BASE | {"MMVERIFY_VLM_SPATIAL_BASE_URL": GEMINI, "MMVERIFY_VLM_SPATIAL_ABSOLUTE_MODEL": "gemini-2.5-pro"}
    absolute = config_from_env("spatial_absolute", env)
    assert (absolute.model, absolute.base_url) == ("gemini-2.5-pro", GEMINI)
    relative = config_from_env("spatial_relative", env)
    assert (relative.model, relative.base_url) == ("qwen-vl", GEMINI)


def test_the_cli_sets_a_position_role():
    env: dict[str, str] = {}
    apply_cli_options(roles=["spatial_relative=gpt-4o@https://api.openai.com/v1", "spatial_absolute=gemini-2.5-pro"], environ=env)
    assert env == {
        "MMVERIFY_VLM_SPATIAL_RELATIVE_MODEL": "gpt-4o",
        "MMVERIFY_VLM_SPATIAL_RELATIVE_BASE_URL": "https://api.openai.com/v1",
        "MMVERIFY_VLM_SPATIAL_ABSOLUTE_MODEL": "gemini-2.5-pro",
    }
    assert parse_role_spec("spatial_absolute=m@http://h/v1") == ("spatial_absolute", "m", "http://h/v1")
    with pytest.raises(UnknownIdError):
        parse_role_spec("spatial_left=m")


def test_identities_name_the_resolved_judge_per_role():
    env = BASE | {"MMVERIFY_VLM_SPATIAL_RELATIVE_MODEL": "gpt-4o"}
    assert judge_identities(("spatial_relative", "spatial_absolute"), env) == {
        "spatial_relative": "gpt-4o@http://127.0.0.1:8000/v1",
        "spatial_absolute": "qwen-vl@http://127.0.0.1:8000/v1",
    }
