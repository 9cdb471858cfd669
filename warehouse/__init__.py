"""The ClickHouse warehouse: the append-only trajectory log, derived tables, analytics, reports."""
