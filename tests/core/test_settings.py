"""Reading the MMVERIFY_* settings of an environment."""

from __future__ import annotations

from collections.abc import Mapping

from mmverify.core.settings import environment_settings


class _Vanishing(Mapping):
    """An environment in which a variable is unset by another thread between the listing of its
    names and the reading of its value."""

    def __init__(self) -> None:
        self._data = {"MMVERIFY_DEVICE": "cpu", "MMVERIFY_GONE": "x", "HOME": "/root"}

    def __iter__(self):
        names = list(self._data)
        self._data.pop("MMVERIFY_GONE")
        return iter(names)

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, name: str) -> str:
        return self._data[name]


def test_a_variable_unset_while_the_settings_are_read_is_left_out():
    assert environment_settings(_Vanishing()) == {"MMVERIFY_DEVICE": "cpu"}


def test_only_settings_are_read():
    assert environment_settings({"MMVERIFY_MODELS": "a", "MMVERIFY_SERVER_TOKEN": "secret", "PATH": "/bin"}) == {"MMVERIFY_MODELS": "a"}
