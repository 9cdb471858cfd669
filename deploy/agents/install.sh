#!/usr/bin/env bash
# Install the real agent CLIs that `--agent codex` and `--agent claude-code` run, from npm, into a
# prefix that sandboxes mount read-only (deploy/agents/.work/prefix, or $MEMBENCH_AGENTS_PREFIX).
# Node comes from Debian (apt) when it is missing; npm keeps its own cache (~/.npm), so a second
# run with the same versions is quick. Versions are pinned here and printed by `membench doctor`.
#   deploy/agents/install.sh            # both CLIs
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PREFIX="${MEMBENCH_AGENTS_PREFIX:-$HERE/.work/prefix}"
CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"

if ! command -v npm >/dev/null 2>&1; then
  echo "agents/install: installing nodejs and npm (apt)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi

mkdir -p "$PREFIX"
STAMP="$PREFIX/.versions"
WANT="codex=$CODEX_VERSION claude-code=$CLAUDE_CODE_VERSION"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
   && [ -x "$PREFIX/bin/codex" ] && [ -x "$PREFIX/bin/claude" ]; then
  echo "agents/install: ready ($WANT in $PREFIX)" >&2
  exit 0
fi
echo "agents/install: npm install $WANT into $PREFIX" >&2
npm install -g --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
  "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2
chmod -R a+rX "$PREFIX"
echo "$WANT" > "$STAMP"
echo "agents/install: ready ($WANT in $PREFIX)" >&2
