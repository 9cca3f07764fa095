#!/usr/bin/env bash
# Set up a virtual environment with the viewer, load a realistic demo session into a demo
# SQLite ledger of its own (.demo/ledger.db, made afresh each run; your own default ledger is
# never touched), and open the viewer on http://127.0.0.1:8501 (another port: --port 8600)
# while a simulated agent keeps writing live calls into it (Ctrl-C stops both).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Install only when the project's dependencies changed since the last install.
stamp=.venv/.intentrace-demo-install
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/intentrace ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[viewer]'
  echo "$want" > "$stamp"
fi
mkdir -p .demo
rm -f .demo/ledger.db .demo/ledger.db-wal .demo/ledger.db-shm
ledger="sqlite:///$PWD/.demo/ledger.db"
echo "Demo ledger: $ledger"
exec .venv/bin/intentrace demo --ledger "$ledger" --view --live "$@"
