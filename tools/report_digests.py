"""Digests of the reports a membench checkout builds from fixed run sets: the check that a change
to the read side (processors, queries, report sections) changed no report byte.

For each run set of MEMBENCH_HOME (or those named), in place: `membench rederive RUN_SET` (the
derived tables as this checkout's processors fold the raw log), then `membench report RUN_SET
--output DIR`, then the SHA-256 of the report.json, report.md and report.html written. The raw logs
are the same on both sides, so run it once with the old checkout first on the module path, once
with the new, and compare (the membench commands run in a neutral directory, so PYTHONPATH decides;
the checkout they import is said on stderr):

    PYTHONPATH=OLD python tools/report_digests.py --out old.json
    python tools/report_digests.py --out new.json --compare old.json     # exit 1 on a difference

A report embeds no version or digest of the checkout that builds it (the code digests it shows are
the runs', read from their RunStarted events). One figure is left out of the comparison: how many
derived events the report's replay re-derived and compared (`verification.derived` and
`verification.compared`, and the same two numbers in the "log: verified (…)" line of report.md
and report.html) — a new derived kind adds rows there by design, and every other byte is compared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = ("report.json", "report.md", "report.html")
_DERIVED_COUNTS = re.compile(rb"\d+ derived events re-derived, \d+ compared")


def comparable(name: str, data: bytes) -> bytes:
    """The report file without the count of derived events its replay compared (module doc)."""
    if name == "report.json":
        report = json.loads(data)
        for key in ("derived", "compared"):
            (report.get("verification") or {}).pop(key, None)
        return json.dumps(report, sort_keys=True).encode()
    return _DERIVED_COUNTS.sub(b"N derived events re-derived, N compared", data)


# `python -m` puts its working directory first on the module path: run from a checkout, the
# subprocesses would import that checkout's membench whatever PYTHONPATH names
_NEUTRAL = tempfile.gettempdir()


def membench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "membench", *args], capture_output=True, text=True, env=os.environ,
                          cwd=_NEUTRAL)


def imported_checkout() -> str:
    """Where the subprocesses import membench from: said on stderr, so a comparison shows it ran the
    old checkout on one side and the new on the other."""
    return subprocess.run([sys.executable, "-c", "import membench, pathlib; print(pathlib.Path("
                           "membench.__file__).resolve().parents[1])"], capture_output=True, text=True,
                          env=os.environ, cwd=_NEUTRAL, check=True).stdout.strip()


def digests(run_sets: list[str], keep: Path | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run_set in run_sets:
            for step in (["rederive", run_set], ["report", run_set, "--output", str(Path(tmp) / run_set)]):
                proc = membench(*step)
                if proc.returncode != 0:
                    raise SystemExit(f"membench {' '.join(step)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
            out[run_set] = {}
            for name in FILES:
                data = (Path(tmp) / run_set / name).read_bytes()
                out[run_set][name] = hashlib.sha256(comparable(name, data)).hexdigest()
                if keep is not None:
                    (keep / run_set).mkdir(parents=True, exist_ok=True)
                    (keep / run_set / name).write_bytes(data)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_sets", nargs="*", help="run sets (default: every run set under MEMBENCH_HOME/runs)")
    parser.add_argument("--out", type=Path, required=True, help="write the digests here (JSON)")
    parser.add_argument("--keep", type=Path, default=None, help="also copy the reports into this directory")
    parser.add_argument("--compare", type=Path, default=None, help="digests of the old checkout: exit 1 on a difference")
    args = parser.parse_args(argv)
    home = Path(os.environ.get("MEMBENCH_HOME", Path.home() / ".membench"))
    run_sets = args.run_sets or sorted(p.name for p in (home / "runs").iterdir() if (p / "log_root.json").exists())
    print(f"membench imported from {imported_checkout()}", file=sys.stderr)
    got = digests(run_sets, args.keep)
    args.out.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.compare is None:
        return 0
    old = json.loads(args.compare.read_text(encoding="utf-8"))
    differ = [f"{rs}/{name}" for rs in sorted(set(old) | set(got)) for name in FILES
              if old.get(rs, {}).get(name) != got.get(rs, {}).get(name)]
    for what in differ:
        print(f"differs: {what}")
    print(f"{len(run_sets) * len(FILES) - len(differ)} identical, {len(differ)} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
