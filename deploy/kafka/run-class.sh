#!/usr/bin/env bash
# Run any Kafka tool class from the resolved jars, like Kafka's kafka-run-class.sh:
#
#   deploy/kafka/run-class.sh org.apache.kafka.tools.TopicCommand \
#       --bootstrap-server 127.0.0.1:9092 --list
#   deploy/kafka/run-class.sh org.apache.kafka.tools.ConsoleProducer ...
#   deploy/kafka/run-class.sh kafka.tools.StorageTool random-uuid
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
[ $# -ge 1 ] || die "usage: $0 CLASS [ARGS...]"
ensure_kafka_libs
exec "${KAFKA_TOOL_CMD[@]}" "$@"
