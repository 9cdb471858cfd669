#!/usr/bin/env bash
# Start or stop every service the integration tests talk to: the Kafka broker (deploy/kafka),
# the three-broker cluster used by the broker-loss test, and podman's Docker-compatible API
# (deploy/podman). The embedded warehouse (chDB) and bubblewrap need no service.
#   deploy/services.sh start|stop
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${1:-start}" in
  start)
    bash "$HERE/kafka/start.sh"
    bash "$HERE/podman/setup.sh"
    ;;
  stop)
    bash "$HERE/kafka/cluster.sh" stop || true
    bash "$HERE/kafka/stop.sh" || true
    bash "$HERE/podman/stop.sh" || true
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
