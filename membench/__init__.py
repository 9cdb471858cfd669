"""membench: the CLI, settings and the wiring of the embedded pipeline."""

__version__ = "0.1.0"
