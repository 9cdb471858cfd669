#!/usr/bin/env bash
# Create membench's Python environment (.venv at the repository root), install the system
# packages it needs (bubblewrap) and the real agent CLIs (deploy/agents/install.sh: Codex and
# Claude Code from npm; MEMBENCH_SKIP_AGENTS=1 leaves them out) and the MCP memory servers
# (deploy/mcp-memory/install.sh; MEMBENCH_SKIP_MCP_MEMORY=1 leaves them out). Safe to run again: it only adds
# what is missing.
#   deploy/setup-env.sh          # what `membench run` needs
#   deploy/setup-env.sh --dev    # plus what only the tests need: pytest-xdist and playwright (.[dev]),
#                                # Chromium for the viewer's browser tests, Arize Phoenix for the
#                                # OTLP export test
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DEV=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    *) echo "usage: deploy/setup-env.sh [--dev]" >&2; exit 2 ;;
  esac
done

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# Debian's Chromium: the browser the viewer's tests drive (membench view); never a downloaded build
if [ "$DEV" = 1 ]; then command -v chromium >/dev/null 2>&1 || need_apt+=(chromium); fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "setup-env: installing ${need_apt[*]} (apt)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# PYTHON: the interpreter .venv is built on (default: python3 on PATH).
PYTHON="${PYTHON:-python3}"
# Python packages are installed by uv (a pinned release from PyPI, kept in a tools virtualenv under
# the user's cache): it downloads in parallel and installs from its own cache (~/.cache/uv), which
# makes a clean clone's set-up a matter of seconds once the cache is warm; pip took minutes.
UV_VERSION="${UV_VERSION:-0.13.9}"
TOOLS="${MEMBENCH_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/membench-tools}"
UV="$TOOLS/bin/uv"
if [ ! -x "$UV" ] || [ "$("$UV" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  echo "setup-env: installing uv $UV_VERSION into $TOOLS" >&2
  "$PYTHON" -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -q "uv==$UV_VERSION"
fi

# Arize Phoenix, the OTLP receiver `membench export otel` is tested against, in a virtualenv of its
# own: its client package registers a pytest plugin that would load the whole server into every
# test run of .venv. Its install is mostly download time, so it runs beside the main one.
PHOENIX_VERSION="${PHOENIX_VERSION:-20.26.1}"
phoenix_pid=""
if [ "$DEV" = 1 ] && { [ ! -x .venv-phoenix/bin/phoenix ] || [ "$(cat .venv-phoenix/.version 2>/dev/null)" != "$PHOENIX_VERSION" ]; }; then
  echo "setup-env: installing arize-phoenix $PHOENIX_VERSION into .venv-phoenix" >&2
  (
    "$UV" venv -q --python "$PYTHON" .venv-phoenix
    "$UV" pip install -q --python .venv-phoenix/bin/python "arize-phoenix==$PHOENIX_VERSION"
    echo "$PHOENIX_VERSION" > .venv-phoenix/.version
  ) &
  phoenix_pid=$!
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup-env: creating .venv with $($PYTHON --version)" >&2
  "$UV" venv -q --seed --python "$PYTHON" .venv  # --seed: pip too, for a user's own installs
fi
# Byte code compiled once, here: the sandboxed interpreters (oracles, production servers) run with
# -B on a read-only .venv, and with PYTHONDONTWRITEBYTECODE set no process caches it at all, so each
# one compiled pytest, membench and their imports from source again (a 2-unit smoke run on a fresh
# .venv: 10.5 s of CPU instead of 6.2 s; the whole suite: docs/benchmarks.md, "Test suite").
# --compile-bytecode covers site-packages; compileall, membench's own packages (an editable
# install: they stay in the checkout; a stale .pyc is only ignored, never run).
if [ "$DEV" = 1 ]; then
  "$UV" pip install -q --compile-bytecode --python .venv/bin/python -e '.[dev]'
else
  "$UV" pip install -q --compile-bytecode --python .venv/bin/python -e .
fi
.venv/bin/python - <<'PY'
import compileall, sys
ok = compileall.compile_dir("membench", quiet=1, workers=0)  # the one import name holds every room
sys.exit(0 if ok else "setup-env: compiling membench's packages failed (above)")
PY
if [ "${MEMBENCH_SKIP_AGENTS:-0}" != "1" ]; then
  bash deploy/agents/install.sh
fi
# the MCP memory servers (MCP-KG, MCP-BASIC); MEMBENCH_SKIP_MCP_MEMORY=1 leaves them out
if [ "${MEMBENCH_SKIP_MCP_MEMORY:-0}" != "1" ]; then
  UV="$UV" bash deploy/mcp-memory/install.sh
fi
if [ -n "$phoenix_pid" ] && ! wait "$phoenix_pid"; then
  echo "setup-env: installing arize-phoenix $PHOENIX_VERSION failed" >&2
  exit 1
fi
echo "setup-env: ready ($(.venv/bin/membench --version))" >&2
