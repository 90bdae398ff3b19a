"""Which judge answers each role: configuration from the environment and the CLI.

Which judge answers which question is chosen by *role*: ``default``, ``spatial`` (with
``spatial_relative`` and ``spatial_absolute`` under it), ``ocr``, ``ocr_second`` (the second reader
of Chinese text) and ``llm`` (text-only questions).  Each role falls back to its parent, and
ultimately to ``default``, for whatever it does not configure.  Configuration is read from these
settings of the scoring context in force (:mod:`mmverify.pipelines.context`): set as environment
variables, or by ``mmverify score --vlm-*`` into the context, which worker processes receive:

==================================  ===========================================================
``MMVERIFY_VLM_BASE_URL``           endpoint, e.g. ``http://127.0.0.1:8000/v1``
``MMVERIFY_VLM_MODEL``              model name there, or ``transformers:<path or hub id>`` to run
                                    a Qwen2.5-VL-class model in this process
``MMVERIFY_VLM_API_KEY_ENV``        name of the variable holding the API key (``OPENAI_API_KEY``)
``MMVERIFY_VLM_<ROLE>_BASE_URL``    per-role endpoint (ROLE in upper case, e.g. ``OCR_SECOND``)
``MMVERIFY_VLM_<ROLE>_MODEL``       per-role model
``MMVERIFY_VLM_<ROLE>_API_KEY_ENV`` per-role key variable
``MMVERIFY_VLM_CONCURRENCY``        requests in flight per endpoint and process (8)
``MMVERIFY_VLM_TIMEOUT``            seconds per request (120)
``MMVERIFY_VLM_MAX_RETRIES``        retries after the first attempt (4)
``MMVERIFY_VLM_BACKOFF``            first back-off delay in seconds, doubling per retry (1)
``MMVERIFY_VLM_CACHE``              reply cache file, or ``off`` (``<cache dir>/judge.sqlite``)
==================================  ===========================================================

Kept apart from the HTTP client so planning can read the configuration (the judge identity is part
of every judged row's key) without importing the client; :func:`~mmverify.models.judge.build_judge`
turns a :class:`JudgeConfig` into a judge.  Imports no other judge module but the usage counters'
naming, so none of them can import it back."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, MutableMapping, Sequence

from ..core.registry import UnknownIdError
from ..core.settings import default_cache_dir, is_true, scoring_settings, setting
from .judge_endpoint import check_base_url, without_credentials
from .judge_usage import judge_identity

ROLES: tuple[str, ...] = ("default", "spatial", "spatial_relative", "spatial_absolute", "ocr", "ocr_second", "llm")
# a role inherits every setting it does not configure from its parent, and ultimately from
# "default": relative and absolute position questions can go to different judges (one judge
# family is better at each), and both follow "spatial" when only that is configured
ROLE_PARENTS: Mapping[str, str] = {"spatial_relative": "spatial", "spatial_absolute": "spatial"}
ENV_PREFIX = "MMVERIFY_VLM_"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
LOCAL_PREFIX = "transformers:"
NOT_CONFIGURED = (
    "no judge configured: pass --vlm-base-url and --vlm-model to `mmverify score` "
    "(or set MMVERIFY_VLM_BASE_URL and MMVERIFY_VLM_MODEL); "
    "e.g. --vlm-base-url http://127.0.0.1:8000/v1 --vlm-model Qwen/Qwen2.5-VL-7B-Instruct for a local vLLM server"
)


def offline_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """``MMVERIFY_OFFLINE`` of ``environ`` (default: the settings in force)."""
    # only --offline / MMVERIFY_OFFLINE: HF_HUB_OFFLINE guards hub downloads, while a judge endpoint
    # is something the user named explicitly
    return is_true(setting("MMVERIFY_OFFLINE") if environ is None else environ.get("MMVERIFY_OFFLINE"))


def _env_number(environ: Mapping[str, str], name: str, default: float, cast: Callable[[str], Any]) -> Any:
    raw = environ.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name}={raw!r} is not a valid number") from None
    if not math.isfinite(value):  # "inf" and "nan" parse as floats; no request can wait for them
        raise ValueError(f"{ENV_PREFIX}{name}={raw!r} is not a finite number")
    return value


@dataclass(frozen=True)
class JudgeConfig:
    """A resolved judge; equal configs share one judge instance (connection pool, bound)."""

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 1.0
    cache: str | None = None
    offline: bool = False

    @property
    def is_local(self) -> bool:
        return self.model.startswith(LOCAL_PREFIX)


def check_role(role: str) -> str:
    if role not in ROLES:
        raise UnknownIdError("judge role", role, list(ROLES))
    return role


def role_chain(role: str) -> tuple[str, ...]:
    """``role`` and the roles it falls back to, nearest first, ending with ``"default"``."""
    chain = [check_role(role)]
    while chain[-1] != "default":
        chain.append(ROLE_PARENTS.get(chain[-1], "default"))
    return tuple(chain)


def env_name(role: str, suffix: str) -> str:
    """The environment variable holding ``suffix`` (MODEL, BASE_URL, ...) for ``role``."""
    return ENV_PREFIX + suffix if role == "default" else f"{ENV_PREFIX}{role.upper()}_{suffix}"


def config_from_env(role: str = "default", environ: Mapping[str, str] | None = None) -> JudgeConfig | None:
    """The judge for ``role`` in ``environ`` (default: the settings in force), or None if
    unconfigured.  Each setting comes from the nearest role in :func:`role_chain` that sets it
    (``spatial_relative`` -> ``spatial`` -> ``default``)."""
    env = scoring_settings() if environ is None else environ
    chain = role_chain(role)

    def pick(suffix: str) -> str | None:
        for name in chain:
            value = env.get(env_name(name, suffix), "").strip()
            if value:
                return value
        return None

    model, base_url = pick("MODEL"), pick("BASE_URL")
    if not model or not (base_url or model.startswith(LOCAL_PREFIX)):
        return None
    cache_setting = env.get(ENV_PREFIX + "CACHE", "").strip()
    if cache_setting.lower() in {"off", "none", "0", "false"}:
        cache = None
    else:
        cache = str(Path(cache_setting).expanduser()) if cache_setting else str(default_cache_dir(env) / "judge.sqlite")
    return JudgeConfig(
        model=model,
        base_url=None if model.startswith(LOCAL_PREFIX) else base_url,
        api_key_env=pick("API_KEY_ENV") or DEFAULT_API_KEY_ENV,
        concurrency=_env_number(env, "CONCURRENCY", 8, int),
        timeout=_env_number(env, "TIMEOUT", 120.0, float),
        max_retries=_env_number(env, "MAX_RETRIES", 4, int),
        backoff=_env_number(env, "BACKOFF", 1.0, float),
        cache=cache,
        offline=offline_from_env(env),
    )


def parse_role_spec(spec: str) -> tuple[str, str, str | None]:
    """``"ocr_second=Qwen/Qwen2.5-VL-72B-Instruct@http://host:8001/v1"`` -> (role, model, url)."""
    role, sep, rest = spec.partition("=")
    role, rest = role.strip(), rest.strip()
    if not sep or not role or not rest:
        raise ValueError(f"--vlm-role must look like ROLE=MODEL[@URL], got {spec!r}")
    check_role(role)
    model, _, url = rest.partition("@")
    if not model.strip():
        raise ValueError(f"--vlm-role {spec!r} names no model")
    return role, model.strip(), url.strip() or None


def apply_cli_options(
    *,
    base_url: str | None = None,
    model: str | None = None,
    roles: Sequence[str] = (),
    concurrency: int | None = None,
    api_key_env: str | None = None,
    environ: MutableMapping[str, str],
) -> None:
    """Validate ``score``'s judge options and store them as settings in ``environ`` (a scoring
    context's variables)."""
    env = environ
    if concurrency is not None and concurrency < 1:
        raise ValueError("--vlm-concurrency must be >= 1")
    parsed = [parse_role_spec(spec) for spec in roles]  # validate everything before changing anything
    if base_url:
        check_base_url(base_url)
    for role, _model, url in parsed:
        if url:
            check_base_url(url, f"the URL of --vlm-role {role}")
    if base_url:
        env[ENV_PREFIX + "BASE_URL"] = base_url
    if model:
        env[ENV_PREFIX + "MODEL"] = model
    if api_key_env:
        env[ENV_PREFIX + "API_KEY_ENV"] = api_key_env
    if concurrency is not None:
        env[ENV_PREFIX + "CONCURRENCY"] = str(concurrency)
    for role, role_model, url in parsed:
        env[env_name(role, "MODEL")] = role_model
        if url:
            env[env_name(role, "BASE_URL")] = url


def judge_identities(roles: Sequence[str], environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """``{role: "model@endpoint"}`` as configured (None where unconfigured), without building a client.

    Tasks put this in their result key, so changing the judge rescores instead of reusing rows.
    """
    identities: dict[str, str | None] = {}
    for role in roles:
        config = config_from_env(role, environ)
        identities[role] = None if config is None else f"{config.model}@{without_credentials(config.base_url or 'local')}"
    return identities


def usage_identities(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{role: identity}`` of every configured role, as the judges' usage counters name them
    (:func:`~mmverify.models.judge_usage.judge_identity`)."""
    identities = {}
    for role in ROLES:
        config = config_from_env(role, environ)
        if config is not None:
            identities[role] = judge_identity(config.model, without_credentials(config.base_url) if config.base_url else None)
    return identities


def shared_model(first: Any, second: Any) -> str | None:
    """The model two judges both read with, or None when they differ: the same judge, or equal
    ``model_id``s (an endpoint judge's model name; an in-process judge's checkpoint digest and
    device type).  A task that compares two judges' readings refuses such a pair, and
    ``mmverify doctor`` says so, by this one test."""
    if second is first:  # one configuration: nothing to read (an in-process judge's id hashes its checkpoint)
        return str(getattr(first, "model_id", None) or type(first).__name__)
    first_id, second_id = getattr(first, "model_id", None), getattr(second, "model_id", None)
    return str(first_id) if first_id is not None and first_id == second_id else None
