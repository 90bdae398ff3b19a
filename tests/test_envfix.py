"""Tests for mmverify.envfix."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mmverify import envfix

_real_find_spec = importlib.util.find_spec


def _installed(name: str) -> bool:
    # find_spec, not import: torchvision/torchaudio may not import before apply().
    return _real_find_spec(name) is not None


def _fake_specs(monkeypatch: pytest.MonkeyPatch, packages: dict[str, Path | None]) -> None:
    """Make find_spec report ``packages`` (None: absent; a path: a package there)."""

    def find_spec(name: str, package: str | None = None):
        if name not in packages:
            return _real_find_spec(name, package)
        where = packages[name]
        if where is None:
            return None
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(where)]
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def _no_subprocess(*args: object, **kwargs: object) -> None:
    raise AssertionError("no probe expected")


def _fake_torchaudio(tmp_path: Path) -> tuple[Path, list[Path]]:
    pkg = tmp_path / "torchaudio"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "lib" / "__init__.py").write_text("")
    libs = [pkg / "lib" / "_torchaudio.abi3.so", pkg / "lib" / "libtorchaudio.abi3.so"]
    for lib in libs:
        lib.write_bytes(b"not an ELF file")
    return pkg, libs


def test_import_does_not_import_torch() -> None:
    code = "import sys, mmverify.envfix; print('torch' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_noop_when_packages_absent(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fake_specs(monkeypatch, {"torch": None, "torchvision": None, "torchaudio": None})
    monkeypatch.setattr(envfix.subprocess, "run", _no_subprocess)
    for _ in range(2):
        assert envfix.apply() == {"torchaudio_removed": [], "torchvision_stubs": False}
    assert envfix.main() == 0
    assert capsys.readouterr().out.strip() == "envfix: nothing to do"


def test_torchaudio_left_alone_without_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg, libs = _fake_torchaudio(tmp_path)
    _fake_specs(monkeypatch, {"torch": None, "torchaudio": pkg})
    monkeypatch.setattr(envfix.subprocess, "run", _no_subprocess)
    assert envfix.patch_torchaudio_install() == []
    assert all(lib.exists() for lib in libs)


def test_torchaudio_libs_that_load_are_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg, libs = _fake_torchaudio(tmp_path)
    _fake_specs(monkeypatch, {"torch": tmp_path / "torch", "torchaudio": pkg})
    monkeypatch.setattr(envfix, "_libs_load", lambda paths: True)
    assert envfix.patch_torchaudio_install() == []
    assert all(lib.exists() for lib in libs)


def test_torchaudio_unloadable_libs_removed_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg, libs = _fake_torchaudio(tmp_path)
    _fake_specs(monkeypatch, {"torch": tmp_path / "torch", "torchaudio": pkg})
    monkeypatch.setattr(envfix, "_libs_load", lambda paths: False)
    assert envfix.patch_torchaudio_install() == sorted(str(lib) for lib in libs)
    assert not any(lib.exists() for lib in libs)
    assert (pkg / "lib" / "__init__.py").exists()
    assert envfix.patch_torchaudio_install() == []


@pytest.mark.parametrize("name", ["_C", "_C_stable"])
def test_torchvision_extension_is_found_under_either_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    """torchvision 0.29 renamed ``_C`` to ``_C_stable``: missing it would register stubs that the
    real extension, loading later, collides with (the process aborts)."""
    pkg = tmp_path / "torchvision"
    pkg.mkdir()
    _fake_specs(monkeypatch, {"torchvision": pkg})
    assert envfix._torchvision_ext() is None
    ext = pkg / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[-1]}"
    ext.write_bytes(b"")
    assert envfix._torchvision_ext() == ext


@pytest.mark.skipif(not _installed("torch"), reason="torch not installed")
def test_probe_rejects_broken_library(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not an ELF file")
    assert envfix._libs_load([bogus]) is False


@pytest.mark.skipif(not _installed("torch"), reason="torch not installed")
def test_nms_matches_reference() -> None:
    import torch

    gen = torch.Generator().manual_seed(0)
    xy = torch.rand(200, 2, generator=gen) * 100
    wh = torch.rand(200, 2, generator=gen) * 30 + 1
    boxes = torch.cat([xy, xy + wh], dim=1)
    scores = torch.rand(200, generator=gen)

    def area(r: torch.Tensor) -> float:
        return float((r[2] - r[0]) * (r[3] - r[1]))

    def iou(a: torch.Tensor, b: torch.Tensor) -> float:
        w = max(0.0, float(min(a[2], b[2]) - max(a[0], b[0])))
        h = max(0.0, float(min(a[3], b[3]) - max(a[1], b[1])))
        inter = w * h
        return inter / (area(a) + area(b) - inter)

    keep: list[int] = []
    for i in sorted(range(200), key=lambda k: -float(scores[k])):
        if all(iou(boxes[i], boxes[j]) <= 0.5 for j in keep):
            keep.append(i)
    assert envfix._nms(boxes, scores, 0.5).tolist() == keep
    assert envfix._nms(boxes[:0], scores[:0], 0.5).tolist() == []


@pytest.mark.skipif(
    not (_installed("torch") and _installed("torchvision") and _installed("torchaudio")),
    reason="torch, torchvision and torchaudio not all installed",
)
def test_apply_makes_torchvision_and_torchaudio_importable() -> None:
    # A fresh interpreter: the fix must precede the first torchvision import.
    code = textwrap.dedent(
        """
        import importlib.util
        import mmverify.envfix as e
        e.apply()
        again = e.apply()
        assert again == {"torchaudio_removed": [], "torchvision_stubs": False}, again
        import torch, torchvision, torchaudio
        from torchvision import transforms
        assert hasattr(torch.ops.torchvision, "nms")
        out = torchaudio.functional.resample(torch.randn(1, 16000), 16000, 8000)
        assert out.shape == (1, 8000), out.shape
        if importlib.util.find_spec("transformers") is not None:
            import transformers.audio_utils
        print("ok")
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
