"""Cache folders: the ones mmverify creates are owner-only; existing ones keep their permissions."""

from __future__ import annotations

import logging
import stat

from mmverify.core import settings as settings_module
from mmverify.core.settings import private_dir
from mmverify.models.cache import OutputCache


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_folder_it_creates_is_owner_only_whatever_the_umask(tmp_path):
    import os

    old = os.umask(0o002)
    try:
        private_dir(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert mode(tmp_path / "a" / "b") == 0o700


def test_an_existing_shared_folder_keeps_its_permissions(tmp_path, caplog):
    shared = tmp_path / "team-cache"
    shared.mkdir()
    shared.chmod(0o2770)  # group-shared, setgid: new files take the team's group
    OutputCache(shared / "outputs.sqlite").put_text("k", "x", "v")
    assert mode(shared) == 0o2770
    assert private_dir(shared) == shared and mode(shared) == 0o2770
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_world_writable_folder_is_used_and_named_in_one_warning(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(settings_module, "_WARNED_OPEN_DIRS", set())
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with caplog.at_level(logging.WARNING):
        private_dir(open_folder)
        private_dir(open_folder)
    assert mode(open_folder) == 0o777
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(open_folder) in warnings[0] and "every user" in warnings[0]
