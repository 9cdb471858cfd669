"""The audit of a run set (docs/design.md §9): replay from a log file, the warehouse or a Kafka topic
(`replayer` and its sources, checks and comparison; `parallel_replay` for `--jobs N`), the log
root's record and its check (`log_root_record`, `root_check`), the log's blocks (`logscan`), every
run's head on disk (`run_heads`), and the derived tables rebuilt from the raw table (`rederive`)."""
