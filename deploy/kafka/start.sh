#!/usr/bin/env bash
# Start ONE real Apache Kafka 4.x broker (KRaft, combined broker+controller, no
# ZooKeeper) on 127.0.0.1:9092, in the background.
#
#   deploy/kafka/start.sh           start (idempotent: a running broker is reused)
#   deploy/kafka/start.sh --fresh   stop it if running, wipe its data, start anew
#
# First run resolves the jars from Maven Central into deploy/kafka/.work/libs.
# Data, logs and the pid file live in deploy/kafka/.work/single/.
# On success prints KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 on stdout.
# Env: KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093), KAFKA_HEAP_OPTS,
#      KAFKA_AUTO_CREATE_TOPICS (true), KAFKA_NUM_PARTITIONS (4), KAFKA_START_TIMEOUT (120).
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

fresh=0
for arg in "$@"; do
    case "$arg" in
        --fresh) fresh=1 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) die "unknown argument: $arg (try --help)" ;;
    esac
done

NAME=single
PORT="${KAFKA_PORT:-9092}"
CPORT="${KAFKA_CONTROLLER_PORT:-9093}"
DIR="$KAFKA_WORK_DIR/$NAME"
PIDFILE="$DIR/kafka.pid"
LOGDIR="$DIR/logs"
DATA="$DIR/data"
PROPS="$DIR/server.properties"

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9   # one start/stop at a time

if [ "$fresh" = 1 ]; then
    stop_pidfile "$NAME" "$PIDFILE"
    rm -rf "$DATA" "$DIR/cluster.id"
fi

if pid="$(pid_alive "$PIDFILE")"; then
    log "broker already running (pid $pid); checking it answers"
    wait_ready "$NAME" "$PIDFILE" "$LOGDIR" "$PORT"
    echo "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$PORT"
    exit 0
fi
rm -f "$PIDFILE"
for p in "$PORT" "$CPORT"; do
    port_open 127.0.0.1 "$p" && die "port 127.0.0.1:$p is already in use by a process that deploy/kafka/start.sh did not start"
done

t0=$SECONDS
ensure_kafka_libs
write_server_properties "$PROPS" 1 "$PORT" "$CPORT" "1@127.0.0.1:$CPORT" "$DATA" 1
[ -s "$DIR/cluster.id" ] || new_cluster_id >"$DIR/cluster.id"
format_storage "$PROPS" "$(cat "$DIR/cluster.id")"
launch_broker "$NAME" "$PROPS" "$PIDFILE" "$LOGDIR"
log "Kafka $(kafka_version) starting (pid $(cat "$PIDFILE")), logs in $LOGDIR"
wait_ready "$NAME" "$PIDFILE" "$LOGDIR" "$PORT"
log "broker ready on 127.0.0.1:$PORT after $((SECONDS - t0))s"
echo "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$PORT"
