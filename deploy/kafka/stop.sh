#!/usr/bin/env bash
# Stop the single broker started by deploy/kafka/start.sh: SIGTERM, wait up to
# KAFKA_STOP_TIMEOUT (45) seconds for a clean shutdown, then SIGKILL.
# Safe to run when nothing is running. Data in .work/single/data is kept
# (use start.sh --fresh to begin with an empty broker).
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
DIR="$KAFKA_WORK_DIR/single"
[ -d "$DIR" ] || { log "broker single is not running"; exit 0; }
exec 9>"$DIR/.lock"
flock 9
stop_pidfile single "$DIR/kafka.pid"
