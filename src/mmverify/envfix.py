"""Repairs for torchvision/torchaudio wheels whose compiled parts cannot load.

The registry's torchvision and torchaudio wheels are CUDA builds: their
extension libraries link ``libc10_cuda.so``/``libtorch_cuda.so``, which a
CPU-only torch does not ship. Both packages then fail at import:

* torchvision tolerates a missing ``_C`` extension, but its import still calls
  ``torch.library.register_fake("torchvision::nms")`` (and ``qnms``), which
  raises because the op schemas were never defined.
  :func:`install_torchvision_op_stubs` defines them from Python.
* torchaudio raises when an extension library is present but fails to load,
  yet runs in pure-Python mode when the libraries are absent.
  :func:`patch_torchaudio_install` deletes libraries that cannot load.

Both are no-ops on proper builds. This module imports nothing heavy at import
time; torch is imported only inside the functions that need it.
Run ``python -m mmverify.envfix`` to apply both and print what was done.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["apply", "install_torchvision_op_stubs", "main", "patch_torchaudio_install"]

# Schemas of the ops torchvision's import registers fake kernels for
# unconditionally (torchvision/_meta_registrations.py); every other op is
# guarded by ``torchvision.extension._has_ops()``.
_TORCHVISION_OP_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}

# Registrations made through torch.library vanish when their Library object
# is garbage-collected, so it is kept here for the life of the process.
_torchvision_lib: Any = None

# Loads each library given on the command line the way torchaudio does
# (torch.ops.load_library after importing torch). Exit 0: all load;
# 1: one fails; 2: torch itself is unusable, so nothing can be judged.
_PROBE = """
import sys
try:
    import torch
except Exception:
    sys.exit(2)
for path in sys.argv[1:]:
    try:
        torch.ops.load_library(path)
    except OSError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
"""


def _package_dir(name: str) -> Path | None:
    """Directory of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _torchaudio_libs() -> list[Path]:
    """Compiled libraries torchaudio would try to load (see torchaudio/_extension)."""
    pkg = _package_dir("torchaudio")
    if pkg is None:
        return []
    lib_dir = pkg / "lib"
    return sorted(p for pattern in ("*.so", "*.pyd") for p in lib_dir.glob(pattern) if p.is_file())


def _libs_load(libs: list[Path]) -> bool:
    """Whether ``libs`` load next to torch; probed in a child process so that a
    successful load registers nothing in this one."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *map(str, libs)],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    # Only a definite load failure (1) condemns the libraries.
    return proc.returncode != 1


def patch_torchaudio_install() -> list[str]:
    """Delete torchaudio's extension libraries if they cannot load here.

    torchaudio then runs in pure-Python mode (``functional``, ``transforms``
    such as resample and MelSpectrogram keep working). Returns the removed
    paths; ``[]`` when torchaudio or torch is absent, when there is nothing to
    remove, or when the libraries load fine. All libraries go together, since
    torchaudio requires ``libtorchaudio`` whenever ``_torchaudio`` loads.
    """
    libs = _torchaudio_libs()
    if not libs or _package_dir("torch") is None or _libs_load(libs):
        return []
    for lib in libs:
        lib.unlink()
    return [str(lib) for lib in libs]


# The extension's name: ``_C`` up to torchvision 0.28, ``_C_stable`` (built on torch's stable ABI)
# from 0.29.  Stubs registered beside a real extension that loads later abort the process.
_TORCHVISION_EXTENSIONS = ("_C", "_C_stable")


def _torchvision_ext() -> Path | None:
    """Path of torchvision's compiled ops extension, located as torchvision does."""
    pkg = _package_dir("torchvision")
    if pkg is None:
        return None
    for name in _TORCHVISION_EXTENSIONS:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = pkg / f"{name}{suffix}"
            if path.is_file():
                return path
    return None


def _nms(dets: Any, scores: Any, iou_threshold: float) -> Any:
    """Greedy non-maximum suppression in plain torch, matching torchvision's
    CPU kernel: keep boxes in decreasing score order, dropping any box whose
    IoU with an already kept box exceeds ``iou_threshold``."""
    import torch

    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    if not dets.is_floating_point():  # qnms passes integer representations
        dets = dets.to(torch.float64)
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = torch.sort(scores, stable=True, descending=True).indices
    suppressed = torch.zeros(dets.size(0), dtype=torch.bool, device=dets.device)
    keep: list[int] = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        inter = w * h
        suppressed |= inter / (areas[i] + areas - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.long, device=dets.device)


def install_torchvision_op_stubs() -> bool:
    """Define the torchvision ops its import needs when its extension cannot load.

    Must run before ``import torchvision``; does not import torchvision.
    ``nms``/``qnms`` get a pure-torch CPU kernel (callable as
    ``torch.ops.torchvision.nms``; ``torchvision.ops.nms`` still refuses to
    run because torchvision sees that its extension is missing). Returns True
    when this call registered the stubs; False when torch or torchvision is
    absent, the ops already exist, or torchvision's own extension loads.
    """
    global _torchvision_lib
    if _package_dir("torch") is None or _package_dir("torchvision") is None:
        return False
    try:
        import torch
    except (ImportError, OSError):  # a torch whose own libraries cannot load
        return False
    if _torchvision_lib is not None or hasattr(torch.ops.torchvision, "nms"):
        return False
    ext = _torchvision_ext()
    if ext is not None:
        try:
            # Exactly what torchvision's import does; if it works the real ops
            # are registered and the later load inside torchvision is a no-op.
            torch.ops.load_library(str(ext))
            return False
        except OSError:
            pass
    lib = torch.library.Library("torchvision", "DEF")
    for name, schema in _TORCHVISION_OP_SCHEMAS.items():
        lib.define(schema)
        lib.impl(name, _nms, "CPU")
    _torchvision_lib = lib
    return True


def apply() -> dict[str, Any]:
    """Run both repairs; safe to call repeatedly."""
    return {
        "torchaudio_removed": patch_torchaudio_install(),
        "torchvision_stubs": install_torchvision_op_stubs(),
    }


def main() -> int:
    """Entry point of ``python -m mmverify.envfix``: apply and report."""
    result = apply()
    for path in result["torchaudio_removed"]:
        print(f"torchaudio: removed unloadable extension library {path}")
    if result["torchvision_stubs"]:
        ops = ", ".join(_TORCHVISION_OP_SCHEMAS)
        # Registrations are per process: importers must call the function too.
        print(f"torchvision: extension cannot load; registered stub ops {ops} in this process")
    if not result["torchaudio_removed"] and not result["torchvision_stubs"]:
        print("envfix: nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
