#!/usr/bin/env bash
# The full test suite, slow tests included (what CI runs). Fast loop: .venv/bin/python -m pytest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec .venv/bin/python -m pytest -m "slow or not slow" -q "$@"
