#!/usr/bin/env bash
# Create membench's Python environment (.venv at the repository root), install the system
# packages its sandbox needs (bubblewrap) and the real agent CLIs (deploy/agents/install.sh:
# Codex and Claude Code from npm; MEMBENCH_SKIP_AGENTS=1 leaves them out). Safe to run again: it
# only adds what is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
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
if [ "${MEMBENCH_SKIP_AGENTS:-0}" != "1" ]; then
  bash deploy/agents/install.sh
fi
echo "setup-env: ready ($(.venv/bin/membench --version))" >&2
