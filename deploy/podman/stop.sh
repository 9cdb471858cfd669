#!/usr/bin/env bash
# Stop the podman API service started by deploy/podman/setup.sh (SIGTERM,
# wait up to 10 s, then SIGKILL). Safe when it is not running. Leaves the
# image, containers.conf and podman's storage alone.
set -euo pipefail
SOCK="${PODMAN_SOCKET:-/run/podman/podman.sock}"
PIDFILE="$(dirname "$SOCK")/membench-service.pid"
log() { printf '[podman-stop] %s\n' "$*" >&2; }
pid="$(cat "$PIDFILE" 2>/dev/null || true)"
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null \
    || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'system service'; then
    rm -f "$PIDFILE"
    log "podman service is not running"
    exit 0
fi
log "stopping podman service (pid $pid)"
kill -TERM "$pid" 2>/dev/null || true
for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$pid" 2>/dev/null; then
    log "still running after 10s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
fi
rm -f "$PIDFILE"
log "podman service stopped"
