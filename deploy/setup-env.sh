#!/usr/bin/env bash
# Create membench's Python environment (.venv at the repository root), install the system
# packages its sandbox and tests need (bubblewrap; chromium for the viewer's browser tests) and
# the real agent CLIs (deploy/agents/install.sh: Codex and Claude Code from npm;
# MEMBENCH_SKIP_AGENTS=1 leaves them out). Safe to run again: it only adds what is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# Debian's Chromium: the browser the viewer's tests drive (membench view); never a downloaded build
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "setup-env: installing ${need_apt[*]} (apt)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup-env: creating .venv with $($PYTHON --version)" >&2
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
# Arize Phoenix, the OTLP receiver `membench export otel` is tested against, in a virtualenv of its
# own: its client package registers a pytest plugin that would load the whole server into every
# test run of .venv.
PHOENIX_VERSION="${PHOENIX_VERSION:-20.26.1}"
if [ ! -x .venv-phoenix/bin/phoenix ] || [ "$(cat .venv-phoenix/.version 2>/dev/null)" != "$PHOENIX_VERSION" ]; then
  echo "setup-env: installing arize-phoenix $PHOENIX_VERSION into .venv-phoenix" >&2
  "$PYTHON" -m venv .venv-phoenix
  .venv-phoenix/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv-phoenix/bin/python -m pip install -q "arize-phoenix==$PHOENIX_VERSION"
  echo "$PHOENIX_VERSION" > .venv-phoenix/.version
fi
if [ "${MEMBENCH_SKIP_AGENTS:-0}" != "1" ]; then
  bash deploy/agents/install.sh
fi
echo "setup-env: ready ($(.venv/bin/membench --version))" >&2
