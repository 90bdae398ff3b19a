"""folder_lock: one holder at a time across open file descriptions (as across processes), tried in
steps so a timeout raised in the waiting thread lands, and unlocked where flock is refused."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from mmverify.core import locks
from mmverify.core.locks import folder_lock

SAFETY_S = 60.0


def held_elsewhere(folder: Path) -> bool:
    """Whether another open file description holds the lock: a try of our own is refused."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)


def test_the_lock_is_held_inside_and_released_after(tmp_path):
    with folder_lock(tmp_path):
        assert held_elsewhere(tmp_path)
    assert not held_elsewhere(tmp_path)


def test_a_second_holder_waits_for_the_first(tmp_path, monkeypatch):
    refused, order = threading.Event(), []

    def pause(seconds: float) -> None:
        assert 0 < seconds <= locks.POLL_S
        refused.set()
        time.sleep(seconds)

    monkeypatch.setattr(locks, "_pause", pause)

    def second() -> None:
        with folder_lock(tmp_path):
            order.append("second")

    with folder_lock(tmp_path):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert refused.wait(SAFETY_S)  # it tried, found the lock held, and paused
        order.append("first")
    waiter.join(SAFETY_S)
    assert order == ["first", "second"]


class Timeout(Exception):
    pass


def descriptors_of(folder: Path) -> int:
    """This process's open descriptors on ``folder`` (other threads' files do not count)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}") == str(folder)
        except OSError:  # closed meanwhile
            pass
    return count


def test_a_timeout_between_tries_leaves_nothing_open(tmp_path, monkeypatch):
    def pause(seconds: float) -> None:  # as a deadline's timeout, raised in the waiting thread
        raise Timeout()

    monkeypatch.setattr(locks, "_pause", pause)
    with folder_lock(tmp_path):
        with pytest.raises(Timeout):
            with folder_lock(tmp_path):
                pytest.fail("the body ran without the lock")
        assert descriptors_of(tmp_path) == 1  # only the holder's
    assert descriptors_of(tmp_path) == 0 and not held_elsewhere(tmp_path)


def test_a_file_system_that_refuses_flock_runs_the_body_unlocked(tmp_path, monkeypatch):
    def refuse(descriptor: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    ran = []
    with folder_lock(tmp_path):
        ran.append(True)
    assert ran == [True]


def test_a_folder_that_cannot_be_opened_runs_the_body_unlocked(tmp_path):
    ran = []
    with folder_lock(tmp_path / "missing"):
        ran.append(True)
    assert ran == [True]
