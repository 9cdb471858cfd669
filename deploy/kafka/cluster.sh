#!/usr/bin/env bash
# THREE real Kafka 4.x brokers on this machine, each a combined KRaft
# broker+controller, sharing one controller quorum of the three.
#
#   deploy/kafka/cluster.sh start [--fresh]   start all three (idempotent); --fresh wipes data first
#   deploy/kafka/cluster.sh stop              stop all three, one by one (SIGTERM, wait, SIGKILL)
#   deploy/kafka/cluster.sh stop-broker N     stop broker N (1..3), e.g. for a broker-loss test
#   deploy/kafka/cluster.sh start-broker N    start broker N again (idempotent)
#   deploy/kafka/cluster.sh status            which brokers run
#   deploy/kafka/cluster.sh bootstrap         print the bootstrap string
#
# broker N: client port 1909(1+N) -> 19092 19093 19094,
#           controller port 1919(1+N) -> 19192 19193 19194, node.id N.
# Topics default to replication factor 3 and min.insync.replicas 2, so
# acks=all keeps working with one broker down.
# On start prints KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094
# Data, logs, pid files: deploy/kafka/.work/cluster/broker-N/.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

N_BROKERS=3
BASE_PORT="${KAFKA_CLUSTER_BASE_PORT:-19091}"
BASE_CPORT="${KAFKA_CLUSTER_BASE_CONTROLLER_PORT:-19191}"
CDIR="$KAFKA_WORK_DIR/cluster"

bport() { echo $((BASE_PORT + $1)); }
cport() { echo $((BASE_CPORT + $1)); }
bdir() { echo "$CDIR/broker-$1"; }
pidfile() { echo "$(bdir "$1")/kafka.pid"; }

bootstrap() {
    local i s=""
    for i in $(seq 1 $N_BROKERS); do s="${s:+$s,}127.0.0.1:$(bport "$i")"; done
    echo "$s"
}
voters() {
    local i s=""
    for i in $(seq 1 $N_BROKERS); do s="${s:+$s,}$i@127.0.0.1:$(cport "$i")"; done
    echo "$s"
}

check_n() {
    [[ "${1:-}" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le $N_BROKERS ] \
        || die "broker number must be 1..$N_BROKERS, got '${1:-}'"
}

# launch broker N unless it runs; prints nothing; sets LAUNCHED when it did
launch() {
    local n="$1" d pid
    d="$(bdir "$n")"
    mkdir -p "$d"
    if pid="$(pid_alive "$(pidfile "$n")")"; then
        log "broker $n already running (pid $pid)"
        return 0
    fi
    rm -f "$(pidfile "$n")"
    for p in "$(bport "$n")" "$(cport "$n")"; do
        port_open 127.0.0.1 "$p" && die "port 127.0.0.1:$p (broker $n) is in use by a process cluster.sh did not start"
    done
    write_server_properties "$d/server.properties" "$n" "$(bport "$n")" "$(cport "$n")" \
        "$(voters)" "$d/data" 3
    format_storage "$d/server.properties" "$(cat "$CDIR/cluster.id")"
    launch_broker "cluster-$n" "$d/server.properties" "$(pidfile "$n")" "$d/logs"
    log "broker $n starting (pid $(cat "$(pidfile "$n")")) on 127.0.0.1:$(bport "$n"), logs in $d/logs"
}

prepare() {
    mkdir -p "$CDIR"
    ensure_kafka_libs
    [ -s "$CDIR/cluster.id" ] || new_cluster_id >"$CDIR/cluster.id"
}

running_count() {
    local i c=0
    for i in $(seq 1 $N_BROKERS); do
        pid_alive "$(pidfile "$i")" >/dev/null && c=$((c + 1))
    done
    echo "$c"
}

# Stop broker N. A KRaft broker's clean shutdown needs a controller quorum
# (2 of 3 voters); the last one standing has none and would wait minutes for
# it, so it gets only KAFKA_LAST_BROKER_STOP_TIMEOUT seconds before SIGKILL
# (Kafka recovers its logs at the next start).
stop_one() {
    local n="$1" grace="$KAFKA_STOP_TIMEOUT"
    if [ "$(running_count)" -le 1 ]; then grace="${KAFKA_LAST_BROKER_STOP_TIMEOUT:-10}"; fi
    stop_pidfile "cluster-$n" "$(pidfile "$n")" "$grace"
}

# one at a time, so that each but the last still has a quorum while it stops
stop_all() {
    local i
    for i in $(seq 1 $N_BROKERS); do stop_one "$i"; done
}

cmd="${1:-}"
[ -n "$cmd" ] || { sed -n '2,20p' "$0"; exit 2; }
shift || true
mkdir -p "$CDIR"
exec 9>"$CDIR/.lock"
flock 9

case "$cmd" in
    start)
        if [ "${1:-}" = "--fresh" ]; then
            stop_all
            rm -rf "$CDIR"/broker-* "$CDIR/cluster.id"
        elif [ -n "${1:-}" ]; then
            die "unknown argument: $1"
        fi
        t0=$SECONDS
        prepare
        # launch all before waiting: a lone voter cannot form the quorum
        for i in $(seq 1 $N_BROKERS); do launch "$i"; done
        for i in $(seq 1 $N_BROKERS); do
            wait_ready "cluster-$i" "$(pidfile "$i")" "$(bdir "$i")/logs" "$(bport "$i")"
        done
        log "Kafka $(kafka_version) cluster of $N_BROKERS ready after $((SECONDS - t0))s"
        echo "KAFKA_BOOTSTRAP_SERVERS=$(bootstrap)"
        ;;
    stop)
        stop_all
        ;;
    start-broker)
        check_n "${1:-}"
        prepare
        launch "$1"
        wait_ready "cluster-$1" "$(pidfile "$1")" "$(bdir "$1")/logs" "$(bport "$1")"
        log "broker $1 ready on 127.0.0.1:$(bport "$1")"
        ;;
    stop-broker)
        check_n "${1:-}"
        stop_one "$1"
        ;;
    status)
        for i in $(seq 1 $N_BROKERS); do
            if pid="$(pid_alive "$(pidfile "$i")")"; then
                echo "broker $i: running (pid $pid) 127.0.0.1:$(bport "$i")"
            else
                echo "broker $i: stopped 127.0.0.1:$(bport "$i")"
            fi
        done
        ;;
    bootstrap)
        bootstrap
        ;;
    *)
        die "unknown command '$cmd' (start|stop|start-broker N|stop-broker N|status|bootstrap)"
        ;;
esac
