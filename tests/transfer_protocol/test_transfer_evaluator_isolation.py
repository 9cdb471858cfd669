"""Case results a transfer submission cannot forge: the frozen submission runs in a
production sandbox, the hidden evaluator's case runner in another that alone holds the cases file
and the results, reaching the submission only through the harness's proxies — on both backends
(real bubblewrap, real podman), as tests/sandbox/test_oracle_isolation.py does for pack oracles.

Each attack is a submission that does not know the answer (a secret only the cases file holds) and
tries to pass anyway. None may pass the secret's case (nor the case behind it); the honest control
must pass every case, so a harness that passes nothing cannot look secure; and the controls at the
end show two of the attacks do forge a pass when the submission shares the case runner's sandbox or
process, as it did before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.transfer_protocol.evaluator import EVALUATOR_ISOLATION, freeze_submission, run_evaluator
from membench.sandbox.base import SandboxSpec
from membench.sandbox.workspace import write_tree
from membench.formats.transfer_format import load_evaluator

pytestmark = pytest.mark.integration

SECRET = "SECRET-5d0c8e13"
MANIFEST = {"taskId": "vault", "dimensions": {"A": {"title": "keys", "weight": 1}},
            "cases": [{"id": "C-01", "dimension": "A", "weight": 1, "prerequisites": ["FINAL"]},
                      {"id": "C-02", "dimension": "A", "weight": 1, "prerequisites": ["FINAL"]},
                      {"id": "C-03", "dimension": "A", "weight": 1, "prerequisites": ["C-01"]}]}
CASES = {"module": "vault", "cases": {"C-01": {"call": "partner_key", "args": [], "expect": SECRET},
                                      "C-02": {"call": "double", "args": [2], "expect": 4},
                                      "C-03": {"call": "double", "args": [5], "expect": 10}}}
DOUBLE = "\n\ndef double(x):\n    return 2 * x\n"

HONEST = f'def partner_key():\n    return "{SECRET}"  # learned from memory\n' + DOUBLE

# (a) read the cases file wherever it might be mounted
READ_CASES = '''import os
import re


def partner_key():
    for top in ("/evaluator", "/results", "/channel", "/harness", "/workspace", "/tmp", "/proc/1/root/evaluator",
                "/proc/1/cwd", "/"):
        for root, dirs, files in os.walk(top):
            if top == "/" or root.count(os.sep) > 4:
                dirs[:] = []  # of / itself only its files: the mounts above are where the cases would be
            for name in files:
                try:
                    text = open(os.path.join(root, name), errors="ignore").read(1 << 20)
                except OSError:
                    continue
                found = re.search(r"SECRET-[0-9a-f]{8}", text)
                if found:
                    return found.group(0)
    return "not-found"
''' + DOUBLE

# (b) read the case runner's frames at call time: the check being run holds its expected value
READ_FRAMES = '''import sys


def partner_key():
    frame = sys._getframe(1)
    while frame is not None:
        check = frame.f_locals.get("check")
        if isinstance(check, dict) and "expect" in check:
            return check["expect"]
        frame = frame.f_back
    return "not-found"
''' + DOUBLE

# (c) print the old results marker claiming every case passed, write a results file where the
# runner's go, then end the process so nothing follows
FORGE_RESULTS = '''import json
import os

FORGED = {c: {"status": "passed", "evidence_sha256": "0" * 64, "duration_ms": 1} for c in ("C-01", "C-02", "C-03")}


def partner_key():
    os.write(1, ("\\nMEMBENCH-EVALUATOR-RESULTS " + json.dumps(FORGED) + "\\n").encode())
    for path in ("/results/results.json", "/channel/../results/results.json", "/workspace/../results/results.json"):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                json.dump(FORGED, handle)
        except OSError:
            pass
    os._exit(0)
''' + DOUBLE

# (d) monkeypatch the comparison: the runner's case function and JSON itself
MONKEYPATCH = '''import json
import sys

for module in list(sys.modules.values()):
    if hasattr(module, "run_case"):
        module.run_case = lambda module, check: ("passed", "ok")
json.loads = lambda *args, **kwargs: {"forged": True}


def partner_key():
    return "guess"
''' + DOUBLE

# (e) exit with success as soon as the evaluator imports the submission
EXIT_EARLY = "import os\n\nos._exit(0)\n" + DOUBLE

# (f) hang the call until the harness gives up
HANG = "import time\n\n\ndef partner_key():\n    time.sleep(10 ** 6)\n" + DOUBLE

# (g) kill every process it can see, the case runner's included if it could
KILL = '''import os
import signal


def partner_key():
    for pid in range(1, 4096):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return "guess"
''' + DOUBLE

ATTACKS = {"read_cases_file": READ_CASES, "read_runner_frames": READ_FRAMES, "forge_results": FORGE_RESULTS,
           "monkeypatch_comparison": MONKEYPATCH, "exit_early": EXIT_EARLY, "hang": HANG, "kill_runner": KILL}


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")


def _evaluator(tmp_path: Path, manifest: dict = MANIFEST):
    hidden = tmp_path / "hidden"
    hidden.mkdir(parents=True, exist_ok=True)
    (hidden / "manifest.v2.json").write_text(json.dumps(manifest))
    (hidden / "cases.json").write_text(json.dumps(CASES))
    return load_evaluator(hidden / "manifest.v2.json", hidden / "cases.json")


def _evaluate(sandbox, tmp_path: Path, source: str, timeout_s: float = 60, manifest: dict = MANIFEST
              ) -> dict[str, str]:
    write_tree({"vault/__init__.py": source.encode()}, tmp_path / "workspace")
    freeze_submission(tmp_path / "workspace", tmp_path / "frozen")
    results = run_evaluator(sandbox, tmp_path / "frozen", _evaluator(tmp_path, manifest), timeout_s)
    return {r.case_id: r.status for r in results}


def test_an_honest_submission_passes_through_the_channel(any_sandbox, tmp_path):
    assert EVALUATOR_ISOLATION == "process"
    assert _evaluate(any_sandbox, tmp_path, HONEST) == {"C-01": "passed", "C-02": "passed", "C-03": "passed"}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_the_case_results_never_passes(any_sandbox, tmp_path, attack):
    got = _evaluate(any_sandbox, tmp_path, ATTACKS[attack], timeout_s=15 if attack == "hang" else 60)
    assert got["C-01"] in ("failed", "error", "unreached"), (attack, got)
    assert got["C-03"] in ("blocked", "unreached"), (attack, got)  # behind C-01, never run
    if attack in ("read_cases_file", "read_runner_frames"):
        assert got == {"C-01": "failed", "C-02": "passed", "C-03": "blocked"}, got  # the attack ran, found nothing
    if attack == "exit_early":
        assert got == {"C-01": "error", "C-02": "error", "C-03": "blocked"}, got


def test_a_hang_keeps_the_cases_before_it(bwrap_sandbox, tmp_path):
    """The runner records each case as it ends: a submission that hangs in the second case leaves
    the first one's result; the hanging case and what follows are unreached or blocked."""
    manifest = {**MANIFEST, "cases": [MANIFEST["cases"][1], MANIFEST["cases"][0], MANIFEST["cases"][2]]}
    got = _evaluate(bwrap_sandbox, tmp_path, HANG, timeout_s=15, manifest=manifest)
    assert got == {"C-02": "passed", "C-01": "unreached", "C-03": "blocked"}, got


def test_reading_the_cases_file_forges_a_pass_when_it_shares_the_runners_sandbox(bwrap_sandbox, tmp_path):
    """The control for the isolation: in one sandbox with the cases file, as the evaluator ran
    before, the same attack does find the answer."""
    _evaluator(tmp_path)
    write_tree({"vault/__init__.py": READ_CASES.encode()}, tmp_path / "submission")
    (tmp_path / "scratch").mkdir()
    spec = SandboxSpec(workspace=tmp_path / "scratch", ro_mounts={
        "/evaluator/cases.json": tmp_path / "hidden" / "cases.json", "/submission": tmp_path / "submission"},
        wall_time_s=60, cpu_time_s=60)
    result = bwrap_sandbox.run(["python3", "-I", "-B", "-c",
                                "import sys; sys.path.insert(0, '/submission'); import vault; print(vault.partner_key())"],
                               spec)
    assert result.stdout.strip() == SECRET, result.stderr


def test_reading_the_frames_forges_a_pass_in_the_runners_own_process():
    """The control for the frame attack: a submission called from the case runner's own process
    reads the expected value from the runner's frame."""
    namespace: dict = {}
    exec(compile(READ_FRAMES, "vault/__init__.py", "exec"), namespace)

    def run_case(check):  # the shape of the runner's case function: the check is a local
        return namespace[check["call"]]() == check["expect"]

    assert run_case(CASES["cases"]["C-01"])
