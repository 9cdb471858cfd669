"""Pure folds over a run's ordered events -> derived events. No I/O, no clock.

`RunSetProcessor` routes a stream of events from many runs to per-run folds; the same object
runs in-process (embedded bus), in faust-streaming workers (Kafka) and in replay.
"""

from membench.processors.run_set_processor import RunSetProcessor, derive_all

__all__ = ["RunSetProcessor", "derive_all"]
