#!/usr/bin/env bash
# Install the MCP memory servers the conditions MCP-KG and MCP-BASIC start (docs/memory-systems.md,
# "MCP memory servers"), pinned, into a prefix (deploy/mcp-memory/.work/prefix, or
# $MEMBENCH_MCP_PREFIX):
#   kg/            @modelcontextprotocol/server-memory from npm (Node from Debian when it is missing)
#   basic-memory/  a virtualenv with basic-memory from PyPI. It needs Python 3.12 or later: the
#                  interpreter is $MEMBENCH_MCP_PYTHON, else the first python3.13 / python3.12 that
#                  runs (PATH, then pyenv's versions). Without one it is left out, saying so, and
#                  MCP-BASIC reports itself unavailable.
# A second run with the same versions only checks the stamps.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX="${MEMBENCH_MCP_PREFIX:-$HERE/.work/prefix}"
KG_VERSION="${MCP_KG_VERSION:-2026.8.31}"
BASIC_MEMORY_VERSION="${MCP_BASIC_MEMORY_VERSION:-0.24.1}"
UV="${UV:-${MEMBENCH_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/membench-tools}/bin/uv}"
mkdir -p "$PREFIX"

if ! command -v npm >/dev/null 2>&1; then
  echo "mcp-memory/install: installing nodejs and npm (apt)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
KG_MAIN="$PREFIX/kg/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
if [ "$(cat "$PREFIX/kg/.version" 2>/dev/null)" != "$KG_VERSION" ] || [ ! -f "$KG_MAIN" ]; then
  echo "mcp-memory/install: npm install @modelcontextprotocol/server-memory@$KG_VERSION into $PREFIX/kg" >&2
  mkdir -p "$PREFIX/kg"
  npm install --prefix "$PREFIX/kg" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-memory@$KG_VERSION" >&2
  echo "$KG_VERSION" > "$PREFIX/kg/.version"
fi

python312() {
  local candidate
  for candidate in "${MEMBENCH_MCP_PYTHON:-}" python3.13 python3.12 \
      $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.1[2-9]*/bin/python3 2>/dev/null); do
    [ -n "$candidate" ] || continue
    if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then
      "$candidate" -c 'import sys; print(sys.executable)'
      return 0
    fi
  done
  return 1
}
BM="$PREFIX/basic-memory"
if [ "$(cat "$BM/.version" 2>/dev/null)" != "$BASIC_MEMORY_VERSION" ] || [ ! -x "$BM/bin/basic-memory" ]; then
  if PY312="$(python312)"; then
    echo "mcp-memory/install: basic-memory $BASIC_MEMORY_VERSION into $BM (Python $("$PY312" -V 2>&1 | cut -d' ' -f2))" >&2
    rm -rf "$BM"
    if [ -x "$UV" ]; then
      "$UV" venv -q --python "$PY312" "$BM"
      "$UV" pip install -q --compile-bytecode --python "$BM/bin/python" "basic-memory==$BASIC_MEMORY_VERSION"
    else
      "$PY312" -m venv "$BM"
      "$BM/bin/python" -m pip install -q "basic-memory==$BASIC_MEMORY_VERSION"
    fi
    echo "$BASIC_MEMORY_VERSION" > "$BM/.version"
    rm -f "$PREFIX/MCP-BASIC.unavailable"
  else
    echo "mcp-memory/install: no Python 3.12 or later here (basic-memory requires it): MCP-BASIC is left out" >&2
    echo "blocked: basic-memory $BASIC_MEMORY_VERSION requires Python 3.12 or later and the installer found none (set MEMBENCH_MCP_PYTHON and run deploy/mcp-memory/install.sh)" > "$PREFIX/MCP-BASIC.unavailable"
  fi
fi
chmod -R a+rX "$PREFIX"
echo "mcp-memory/install: ready (server-memory $KG_VERSION, basic-memory $(cat "$BM/.version" 2>/dev/null || echo 'not installed') in $PREFIX)" >&2
