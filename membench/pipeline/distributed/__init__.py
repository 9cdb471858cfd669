"""The distributed wiring over Kafka, one job per module:

- `publication`: `KafkaPublication`, the steps of a run set published from this process (unit
  statuses read, complete units skipped, attempts numbered and marked started, units completed,
  the closing message), shared by `kafka_run` and the transfer study (`membench.pipeline.transfer_run`);
- `kafka_run`: `membench run --bus kafka://…` runs a grid here and publishes its events;
- `enqueue`: `membench run … --enqueue` puts a grid's units on the units topic;
- `group_member`: `membench runner`, a process of the `runner` consumer group that claims and runs them;
- `unit_claims`: a runner's claim on a unit's status, and a losing claim's restatement;
- `topic_reads`: what these read back from the topics (a run's head, unit statuses; replay reads
  the whole trajectory with `membench.audit.kafka_source`);
- `progress`: `membench runner --progress`, every grid's unit counts from the unit-status topic.
"""
