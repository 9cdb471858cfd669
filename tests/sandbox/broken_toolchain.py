"""A scoring environment whose interpreter lacks pytest, made for real with bubblewrap: the real
backend, with the virtual environment's site-packages covered by an empty directory in every
sandbox it starts — what a main install without pytest (or a half-removed one) looks like to the
oracle's harness. Nothing of it is a file an agent could write: it is the sandbox's own mount table.
The harness and the production server need only the standard library, so they still start."""

from __future__ import annotations

import dataclasses
import sysconfig
import tempfile
import threading
from pathlib import Path

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


class PytestlessToolchain:
    """The real backend INNER, with site-packages hidden in its sandboxes while `broken` is set (from
    the start, or once a test sets it), or only for a workspace holding `only_with` — what a
    patch that starves the oracle's harness would look like to the runner (a control)."""

    def __init__(self, inner, broken: bool = True, only_with: str | None = None):
        self.inner, self.name, self.only_with = inner, inner.name, only_with
        self.broken = threading.Event()
        if broken:
            self.broken.set()
        self._empty = Path(tempfile.mkdtemp(prefix="membench-no-site-packages-"))
        self._empty.chmod(0o755)  # traversable by the sandbox's uid

    def _hides(self, spec) -> bool:
        if self.only_with is not None:
            return (Path(spec.workspace) / self.only_with).exists()
        return self.broken.is_set()

    def run(self, argv, spec, stop=None):
        if self._hides(spec):
            spec = dataclasses.replace(spec, ro_mounts={**spec.ro_mounts, str(SITE_PACKAGES): self._empty})
        return self.inner.run(argv, spec, stop=stop)

    def check(self):
        return self.inner.check()

    def probe(self):
        # the backend's own self-check runs outside `run`; a toolchain broken from the start is
        # caught by the pre-flight's scored trap instead, which runs through `run` above
        return self.inner.probe()
