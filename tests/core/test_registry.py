import pytest

from mmverify.core.registry import Registry, UnknownIdError


def test_lazy_entries_import_on_first_use():
    registry: Registry = Registry("verifier")
    registry.register("json:dumps", "json:dumps")
    assert "json:dumps" in registry
    import json

    assert registry.get("json:dumps") is json.dumps


def test_unknown_id_suggests_close_matches():
    registry: Registry = Registry("task", default_namespace="task")
    registry.register("i_format_border", "json:dumps")
    registry.register("i_format_background", "json:loads")
    with pytest.raises(UnknownIdError) as info:
        registry.get("i_format_bordr")
    assert "Did you mean 'task:i_format_border'" in str(info.value) or "i_format_border" in info.value.suggestions
    with pytest.raises(UnknownIdError) as info:
        registry.get("zzz")
    assert "Did you mean" not in str(info.value)


def test_bare_ids_take_the_default_namespace_and_duplicates_are_refused():
    registry: Registry = Registry("task", default_namespace="task")
    registry.register("a", lambda: 1)
    assert registry.get("task:a") == registry.get("a") == 1
    with pytest.raises(ValueError):
        registry.register("task:a", lambda: 2)
    plain: Registry = Registry("verifier")
    with pytest.raises(ValueError, match="namespaced"):
        plain.register("no_namespace", lambda: 1)
    with pytest.raises(ValueError, match="module:attr"):
        plain.register("x:y", "not_a_target")
