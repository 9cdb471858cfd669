"""The distributed wiring over Kafka, one job per module:

- `kafka_run`: `membench run --bus kafka://…` runs a grid here and publishes its events;
- `enqueue`: `membench run … --enqueue` puts a grid's units on the units topic;
- `runner`: `membench runner`, a process of the `runner` consumer group that claims and runs them;
- `topic_reads`: what these read back from the topics (a run's head, unit statuses, the whole
  trajectory for replay);
- `progress`: `membench runner --progress`, every grid's unit counts from the unit-status topic.
"""
