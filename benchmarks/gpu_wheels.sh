#!/usr/bin/env bash
# Fetch, here, the wheels that benchmarks/gpu_run.sh needs on the GPU machine: its Python 3.12
# image has torch and transformers but not these, and it cannot download.  They land in .whl/
# (git-ignored), which the device call carries.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  soundfile==0.14.0 cffi==2.1.1 pycparser==3.12 soxr==1.1.0 jiwer==4.0.0 rapidfuzz==3.14.6 more-itertools==11.2.1 \
  open-clip-torch==3.3.0 ftfy==6.3.1 wcwidth==0.9.4 py-spy==0.4.3 \
  pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pytest-timeout==2.4.0 \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# dreamsim 0.2.1 is published as a source archive only: build its (pure-Python) wheel here
python3 -m pip wheel -q --no-deps -w .whl dreamsim==0.2.1 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
ls .whl
