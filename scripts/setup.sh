#!/usr/bin/env bash
# Set up everything from scratch: Debian packages for test media, .venv with pinned CPU torch,
# mmverify (editable) with the dev and model extras, and the torchvision/torchaudio repairs.
# Safe to rerun; every step is a no-op when already done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}

# 1. System packages the tests use to synthesise speech, inspect audio, render SVG (cairo) and
#    open HTML reports in a headless browser (chromium).
packages=(espeak-ng sox libcairo2 chromium)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "warning: install these system packages for the full test suite: ${missing[*]}" >&2
  fi
fi

# 2. The virtual environment, torch first so nothing else can choose another build.
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --constraint constraints.txt)
quiet_pip() {  # this machine kind's pip configuration warns about every mirror folder it lacks
  "${pip[@]}" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
quiet_pip "torch==2.13.0"
quiet_pip --editable ".[dev,models,ray,serve,vlm]" torchvision torchaudio
quiet_pip --no-deps "openai-whisper==20250625"  # its triton dependency is CUDA-only

# 3. Make the registry's CUDA builds of torchvision/torchaudio importable (no-op on proper builds).
.venv/bin/python -m mmverify.envfix
# 4. Compile librosa's numba kernels once, here: two test processes compiling the same kernel at
#    once can corrupt numba's on-disk cache (a later beat-tracking call then crashes).
.venv/bin/python -c "import numpy as np, librosa; librosa.beat.beat_track(y=np.random.default_rng(0).standard_normal(44100).astype(np.float32), sr=22050)" >/dev/null
echo "set-up complete: .venv/bin/mmverify is ready"
