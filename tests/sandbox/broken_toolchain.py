"""A scoring environment without pytest, made for real with bubblewrap: the real backend, with the
virtual environment's site-packages covered by an empty directory in every sandbox it starts, and
the harness mounted from a copy without the fast oracle runner's `pytest` (`pytest_standin.py`) —
what a main install without pytest (or a half-removed one) looks like to either oracle runner.
Nothing of it is a file an agent could write: it is the sandbox's own mount table. The production
server needs only the standard library and the rest of the harness, so it still starts."""

from __future__ import annotations

import dataclasses
import shutil
import sysconfig
import tempfile
import threading
from pathlib import Path

from membench.sandbox.scoring import HARNESS

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
# what the oracle's harness says when pytest is missing: the pytest runner, the fast runner
NO_PYTEST = ("No module named 'pytest'", "No module named 'membench_harness.pytest_standin'")


def says_pytest_is_missing(text: str) -> bool:
    return any(message in text for message in NO_PYTEST)


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
        self._harness = Path(tempfile.mkdtemp(prefix="membench-no-standin-")) / "membench_harness"
        shutil.copytree(HARNESS, self._harness,
                        ignore=shutil.ignore_patterns("pytest_standin.py", "pytest_standin.*.pyc"))
        for path in (self._harness.parent, *self._harness.rglob("*"), self._harness):
            path.chmod(0o755 if path.is_dir() else 0o644)

    def _hides(self, spec) -> bool:
        if self.only_with is not None:
            return (Path(spec.workspace) / self.only_with).exists()
        return self.broken.is_set()

    def run(self, argv, spec, stop=None):
        if self._hides(spec):
            mounts = {**spec.ro_mounts, str(SITE_PACKAGES): self._empty}
            if "/harness/membench_harness" in mounts:
                mounts["/harness/membench_harness"] = self._harness
            spec = dataclasses.replace(spec, ro_mounts=mounts)
        return self.inner.run(argv, spec, stop=stop)

    def check(self):
        return self.inner.check()

    def probe(self):
        # the backend's own self-check runs outside `run`; a toolchain broken from the start is
        # caught by the pre-flight's scored trap instead, which runs through `run` above
        return self.inner.probe()
