#!/usr/bin/env bash
# Set up a virtual environment with every test dependency, then lint, type-check and test.
# Works on a fresh machine with Python 3.11+ (the browser tests use Debian's chromium:
# `apt-get install -y chromium`; .ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/pyright
.venv/bin/python -m pytest "$@"
