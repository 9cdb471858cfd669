"""The wiring of the rooms into a run (docs/design.md §1, §2): the embedded pipeline (log,
processors and sink in one process), the Kafka processor engines (confluent-kafka, faust) and the
route both read (`processor_route`), the grid and transfer runs that end with the report and the
log root, the clean stop of a grid, and the distributed runners (`distributed/`). `settings` is
what each of them is handed: MEMBENCH_HOME and the bus and warehouse DSNs."""
