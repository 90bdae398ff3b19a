"""SIGUSR1 prints every thread's stack and the process goes on (:mod:`mmverify.core.stacks`)."""

from __future__ import annotations

import faulthandler
import importlib
import io
import os
import signal
import threading
import tomllib
from pathlib import Path

import pytest

import mmverify.cli
import mmverify.core.stacks
from mmverify.core.stacks import dump_stacks_on_sigusr1
from tests.waiting import wait_until

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 here")


def _park(ready: threading.Event, stop: threading.Event) -> None:
    ready.set()
    stop.wait()


def test_every_thread_is_dumped_and_the_process_goes_on(tmp_path: Path):
    ready, stop = threading.Event(), threading.Event()
    helper = threading.Thread(target=_park, args=(ready, stop), daemon=True)
    helper.start()
    ready.wait()
    with open(tmp_path / "stacks.txt", "w") as stream:
        assert dump_stacks_on_sigusr1(stream)
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            dump = wait_until(lambda: "_park" in (text := (tmp_path / "stacks.txt").read_text()) and text)
        finally:
            faulthandler.unregister(signal.SIGUSR1)
            stop.set()
    assert "test_every_thread_is_dumped_and_the_process_goes_on" in dump  # the signalled thread
    assert dump.count("(most recent call first):") >= 2  # and the parked one


def test_a_stream_without_a_descriptor_installs_nothing():
    assert not dump_stacks_on_sigusr1(io.StringIO())


def test_the_installed_mmverify_command_installs_the_handler(monkeypatch):
    """The console script names the entry point that installs it, not the bare command app."""
    target = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["scripts"]["mmverify"]
    installed, ran = [], []
    monkeypatch.setattr(mmverify.core.stacks, "dump_stacks_on_sigusr1", lambda *args: installed.append(True) or True)
    monkeypatch.setattr(mmverify.cli, "app", lambda: ran.append(True))
    module, _, name = target.partition(":")
    getattr(importlib.import_module(module), name)()
    assert installed and ran
