#!/usr/bin/env bash
# Set up a virtual environment with every test dependency, then lint, type-check and test.
# Works on a fresh machine with Python 3.11+ (the browser tests use Debian's chromium:
# `apt-get install -y chromium`; .ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Install only when pyproject.toml changed since the last install into this .venv (a stamp holds
# its hash). The test tools are the `dev` dependency group (PEP 735): pip reads groups from 25.1;
# the `frameworks` extra brings the agent frameworks tests/frameworks drives.
stamp=.venv/.intentrace-installed
want=$(.venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest(), sys.version)')
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade 'pip>=25.1' >/dev/null
  .venv/bin/python -m pip install -q -e '.[all,taps,frameworks]' --group dev >/dev/null
  printf '%s\n' "$want" >"$stamp"
fi
# The Phoenix server of the `phoenix` tests (tests/backends): arize-phoenix pins older versions
# of packages the suite needs (anthropic, google-genai), so it gets a venv of its own; the tests
# only run its `phoenix serve` command.
[ -x .venv-phoenix/bin/python ] || "$PY" -m venv .venv-phoenix
[ -x .venv-phoenix/bin/phoenix ] || .venv-phoenix/bin/python -m pip install -q 'arize-phoenix>=20,<21'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/pyright
.venv/bin/python -m pytest "$@"
