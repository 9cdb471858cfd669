"""Storage: the ClickHouse warehouse (chDB embedded or a server) — connection and lock (`client`),
the tables (`tables`), the sinks that write the append-only trajectory log and the derived tables
exactly once (`sink`, `kafka_sink`), and the queries others read through (`queries`, typed by the
protocols in `protocol`). Statistics live in `membench/analytics/`, reports in `membench/reports/`."""
