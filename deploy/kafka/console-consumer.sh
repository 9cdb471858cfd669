#!/usr/bin/env bash
# Kafka's own console consumer (org.apache.kafka.tools.consumer.ConsoleConsumer)
# from the jars resolved by deploy/kafka/start.sh -- a non-membench client for
# reading a topic. Takes the usual kafka-console-consumer.sh arguments, e.g.
#
#   deploy/kafka/console-consumer.sh --topic T --from-beginning --max-messages 100 \
#       --timeout-ms 20000 --property print.key=true
#
# --bootstrap-server defaults to 127.0.0.1:9092 (or $KAFKA_BOOTSTRAP_SERVERS)
# when not given. Tool logging: WARN and above on stderr.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
ensure_kafka_libs
args=("$@")
has_bootstrap=0
for a in "$@"; do
    case "$a" in --bootstrap-server|--bootstrap-server=*) has_bootstrap=1 ;; esac
done
if [ "$has_bootstrap" = 0 ]; then
    args=(--bootstrap-server "${KAFKA_BOOTSTRAP_SERVERS:-127.0.0.1:9092}" "${args[@]}")
fi
exec "${KAFKA_TOOL_CMD[@]}" org.apache.kafka.tools.consumer.ConsoleConsumer "${args[@]}"
