#!/usr/bin/env bash
# Set up a virtual environment with the viewer, load a realistic demo session into the
# embedded SQLite ledger, and open the viewer on http://127.0.0.1:8501.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[viewer]'
exec .venv/bin/intentrace demo --view "$@"
