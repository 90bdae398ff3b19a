"""Shared fixtures: the real MMMG instruction data and synthetic media builders."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]

# The suite sees the same environment on every machine, whatever the shell that started it set.
# Done here, at import, because typer reads its variables when it is first imported and rich pins a
# console's width to COLUMNS when the console is made (the CLI makes its consoles at import):
# * terminal settings: colour forced on (FORCE_COLOR, TTY_COMPATIBLE; typer also forces a terminal
#   under GITHUB_ACTIONS or PY_COLORS, which _TYPER_FORCE_DISABLE_TERMINAL turns off) puts escape
#   codes into the output the CLI tests read, and a fixed width changes where lines wrap;
# * the developer's scoring settings (a judge, models, reference sets, device...): tests set the
#   ones they need.  Only the locations of the test data and of the model cache are kept.
for _name in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS", "LINES", "TERMINAL_WIDTH"):
    os.environ.pop(_name, None)
os.environ["_TYPER_FORCE_DISABLE_TERMINAL"] = "1"
for _name in [n for n in os.environ if n.startswith("MMVERIFY_") and n not in ("MMVERIFY_MMMG_DIR", "MMVERIFY_CACHE_DIR")]:
    del os.environ[_name]
# Outputs and judge replies cached by an earlier run (or an older version) must not answer this
# one: without a cache folder of the developer's choosing, the suite gets a fresh one.
if not os.environ.get("MMVERIFY_CACHE_DIR"):
    os.environ["MMVERIFY_CACHE_DIR"] = tempfile.mkdtemp(prefix="mmverify-test-cache-")

    def _remove_test_cache(folder: str = os.environ["MMVERIFY_CACHE_DIR"], owner: int = os.getpid()) -> None:
        if os.getpid() == owner:  # not from a forked worker that exits before the suite does
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(_remove_test_cache)


def mmmg_root() -> Path:
    """The MMMG data folder: ``$MMVERIFY_MMMG_DIR``, else ``shared/mmmg`` next to the repository."""
    return Path(os.environ.get("MMVERIFY_MMMG_DIR", REPO.parent / "shared" / "mmmg"))


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def mmmg_data(relative: str, *, directory: bool = False) -> Path:
    """A file (or folder) of the MMMG data; every test that reads the data finds it through here.

    Missing data skips the test on a developer's machine, but fails it when ``CI`` is ``true``: there
    the data is part of the environment, and a suite that passes by skipping has tested nothing.
    """
    path = mmmg_root() / relative
    if not (path.is_dir() if directory else path.is_file()):
        message = f"MMMG data not found at {path} (set MMVERIFY_MMMG_DIR to the MMMG data folder)"
        if running_in_ci():
            pytest.fail(f"{message}; CI=true requires it", pytrace=False)
        pytest.skip(message)
    return path


MMMG_REQUIRED = ("seed_instruction", "references/dataset.csv")


def _require_mmmg_data_in_ci() -> None:
    """With ``CI=true`` the run stops at once, with one clear message, when the MMMG data is missing
    (rather than passing with every data test skipped)."""
    if running_in_ci():
        missing = [str(mmmg_root() / part) for part in MMMG_REQUIRED if not (mmmg_root() / part).exists()]
        if missing:
            pytest.exit(f"CI=true but the MMMG data is missing: {', '.join(missing)} (set MMVERIFY_MMMG_DIR)", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def mmmg_instructions() -> Path:
    """``shared/mmmg/seed_instruction``: MMMG's published instruction files."""
    return mmmg_data("seed_instruction", directory=True)


@pytest.fixture(scope="session")
def esc50_metadata() -> Path:
    """``shared/mmmg/references/dataset.csv``: the published ESC-50 metadata (``meta/esc50.csv``)."""
    return mmmg_data("references/dataset.csv")


def scene(height: int = 200, width: int = 200, seed: int = 0) -> np.ndarray:
    """A textured, photo-like uint8 image (deterministic)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([np.sin(x / 9.0 + seed), np.cos(y / 7.0 - seed), np.sin((x + y) / 11.0)], axis=-1)
    return np.clip((base + rng.normal(0, 0.3, (height, width, 3)) + 1.2) * 100, 0, 255).astype(np.uint8)


def save_png(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
    return path


def raw_png(width: int, height: int, bit_depth: int, color_type: int, pixel_rows: bytes) -> bytes:
    """A PNG written chunk by chunk, for what Pillow will not write (16-bit colour, a header whose
    size the pixels do not back); ``pixel_rows`` are the scanlines, each led by its filter byte."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(pixel_rows)) + chunk(b"IEND", b"")


def write_manifest(path: Path, lines: list[Any]) -> Path:
    """Write manifest lines; dicts are JSON-encoded, strings written verbatim."""
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


def espeak(text: str, path: Path, *, voice: str = "en-us", words_per_minute: int = 160, pitch: int = 50) -> tuple[np.ndarray, int]:
    """Real synthetic speech from espeak-ng (skips the test when it is not installed)."""
    import shutil
    import subprocess

    import soundfile as sf

    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (scripts/setup.sh installs it)")
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(words_per_minute), "-p", str(pitch), "-w", str(path), text],
        check=True,
        capture_output=True,
    )
    audio, rate = sf.read(path, dtype="float32")
    return audio, rate


def click_track(bpm: float, seconds: float, sample_rate: int = 22050, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A metronome: short decaying 1 kHz clicks at ``bpm``; returns (audio, true beat times)."""
    n = int(seconds * sample_rate)
    audio = np.zeros(n, dtype=np.float32)
    beats = np.arange(offset, seconds, 60.0 / bpm)
    t = np.arange(int(0.03 * sample_rate)) / sample_rate
    click = (np.sin(2 * np.pi * 1000 * t) * np.exp(-t * 150)).astype(np.float32)
    for beat in beats:
        start = int(round(beat * sample_rate))
        end = min(n, start + len(click))
        audio[start:end] += click[: end - start]
    return audio, beats


@pytest.fixture(autouse=True)
def _environment_restored_after_each_test():
    """APIs under test install scoring contexts (as ``mmverify score`` and ``Reward`` do), and tests
    configure models through the environment; after every test forget the installed context and
    restore the environment, so no test sees another's settings, and drop the process-wide model
    hub that was configured from them."""
    from mmverify.core.settings import installed_context, set_installed_context

    saved = dict(os.environ)
    yield
    environment_changed = dict(os.environ) != saved
    if environment_changed:
        os.environ.clear()
        os.environ.update(saved)
    from mmverify.models import hub

    if environment_changed or installed_context() is not None or hub._PARKED:
        set_installed_context(None)
        hub.drop_hubs()


SLOW_TEST_TIMEOUT_S = 1800  # a slow test starts processes that import torch: minutes on a loaded 2-core machine


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``slow`` test gets a hang guard of its own (pyproject's 300 s is for the rest): such tests
    spawn workers, model processes and Ray clusters, which a busy 2-core machine may take minutes
    to start, and a guard is there to catch hangs, not slowness."""
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))


def pytest_sessionstart(session: pytest.Session) -> None:
    _require_mmmg_data_in_ci()
    _refuse_a_resource_fork_file()
    _imports_are_required_in_ci()


def _imports_are_required_in_ci() -> None:
    """With ``CI=true`` a package a test asks for with ``pytest.importorskip`` fails the test
    instead of skipping it: CI installs every extra the tests import, so a broken install would
    otherwise pass as skipped tests."""
    if not running_in_ci() or getattr(pytest.importorskip, "required_in_ci", False):
        return
    skip_if_missing = pytest.importorskip

    def required(modname: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return skip_if_missing(modname, *args, **kwargs)
        except pytest.skip.Exception as skipped:
            pytest.fail(f"{skipped.msg} (CI=true: the set-up installs it)", pytrace=False)

    required.required_in_ci = True  # type: ignore[attr-defined]
    pytest.importorskip = required  # type: ignore[assignment]


def _refuse_a_resource_fork_file() -> None:
    """libsndfile reads a file named ``._`` in the working folder as the resource fork of every
    clip it decodes from memory or a descriptor (it writes one there for an SD2 stream), and then
    refuses MP3 ("bad data offset"): say so before tests fail for a reason they cannot show."""
    if Path("._").exists():
        raise pytest.UsageError(
            f"remove {Path('._').resolve()}: libsndfile takes it for a resource fork and refuses MP3 clips"
        )
