"""Settings: where membench keeps its runs and which backends (DSNs) it talks to.

`MEMBENCH_HOME` (default `./.membench`) holds `runs/` and the embedded warehouse. Every command
accepts `--bus` and `--warehouse` DSNs that override the defaults derived from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    home: Path
    bus: str  # "file://<runs dir>" (embedded) or "kafka://host:port"
    warehouse: str  # "chdb:///path" (embedded) or "http(s)://host:8123"

    @property
    def runs_dir(self) -> Path:
        if self.bus.startswith("file://"):
            return Path(self.bus[len("file://"):])
        return self.home / "runs"


def load_settings(bus: str | None = None, warehouse: str | None = None) -> Settings:
    home = Path(os.environ.get("MEMBENCH_HOME", ".membench")).absolute()
    return Settings(
        home=home,
        bus=bus or os.environ.get("MEMBENCH_BUS") or f"file://{home / 'runs'}",
        warehouse=warehouse or os.environ.get("MEMBENCH_WAREHOUSE") or f"chdb://{home / 'warehouse'}",
    )
