"""A configured reference set is one object per folder and layout, found without resolving its
path again for every item."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mmverify.references import sets


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch):
    sets.clear_memo()

    def apply(**roots: str) -> None:
        monkeypatch.setenv(sets.ENV_VAR, ",".join(f"{name}={root}" for name, root in roots.items()))

    yield apply
    sets.clear_memo()


def test_a_set_is_resolved_once_and_two_spellings_of_one_folder_share_it(tmp_path: Path, configure, monkeypatch):
    folder = tmp_path / "ESC-50"
    folder.mkdir()
    os.symlink(folder, tmp_path / "link")
    resolved: list[Path] = []
    real = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **k: resolved.append(self) or real(self, *a, **k))

    configure(esc50=str(folder))
    first = sets.reference_set("esc50")
    assert all(sets.reference_set("esc50") is first for _ in range(5)) and len(resolved) == 1
    configure(esc50=str(tmp_path / "link"))  # another spelling: resolved once, the same set
    assert sets.reference_set("esc50") is first and len(resolved) == 2

    other = tmp_path / "other"
    other.mkdir()
    configure(esc50=str(other))
    assert sets.reference_set("esc50") is not first and sets.reference_set("esc50").root == other


def test_a_relative_root_names_the_folder_under_the_working_folder_of_each_call(tmp_path: Path, configure, monkeypatch):
    for parent in ("a", "b"):
        (tmp_path / parent / "refs").mkdir(parents=True)
    configure(esc50="refs")
    monkeypatch.chdir(tmp_path / "a")
    under_a = sets.reference_set("esc50")
    monkeypatch.chdir(tmp_path / "b")
    under_b = sets.reference_set("esc50")
    assert under_a is not under_b
    monkeypatch.chdir(tmp_path / "a")
    assert sets.reference_set("esc50") is under_a
    assert under_a.root == tmp_path / "a" / "refs" and under_b.root == tmp_path / "b" / "refs"  # not "refs" wherever


def test_clear_memo_forgets_both_lookups(tmp_path: Path, configure):
    configure(esc50=str(tmp_path))
    first = sets.reference_set("esc50")
    sets.clear_memo()
    assert sets.reference_set("esc50") is not first
