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
# The agent frameworks of tests/frameworks_compat (CrewAI, Semantic Kernel, AutoGen AgentChat,
# Google ADK)
# would downgrade packages the main venv needs (mcp, openai, protobuf): they get a venv of their
# own, with intentrace's core and langfuse extra, installed when pyproject.toml or
# tests/frameworks_compat/{requirements,constraints}.txt changed (a stamp holds their hash).
[ -x .venv-compat/bin/python ] || "$PY" -m venv .venv-compat
compat_stamp=.venv-compat/.intentrace-installed
compat_want=$(.venv-compat/bin/python -c 'import hashlib, sys; print(hashlib.sha256(b"".join(open(p, "rb").read() for p in sys.argv[1:])).hexdigest(), sys.version)' pyproject.toml tests/frameworks_compat/requirements.txt tests/frameworks_compat/constraints.txt)
if [ "$(cat "$compat_stamp" 2>/dev/null)" != "$compat_want" ]; then
  .venv-compat/bin/python -m pip install -q --upgrade 'pip>=25.1' >/dev/null
  .venv-compat/bin/python -m pip install -q -e '.[langfuse]' -r tests/frameworks_compat/requirements.txt >/dev/null
  printf '%s\n' "$compat_want" >"$compat_stamp"
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/pyright
.venv/bin/pyright -p tests/frameworks_compat
.venv/bin/python -m pytest "$@"
.venv-compat/bin/python -m pytest tests/frameworks_compat
