"""Verdicts the code under test cannot forge: the oracle's tests and the production code
run in separate sandboxed processes, on both backends (real bubblewrap, real podman).

Each attack below is production code written by a hostile agent that knows nothing of the answer
(a secret only the oracle holds) and tries to pass anyway. Every one must score `fail` or an
inconclusive outcome, never `pass`; the honest control must pass, so that a harness that passes
nothing cannot look secure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.sandbox.scoring import score_session
from membench.sandbox.workspace import write_tree

pytestmark = pytest.mark.integration

SECRET = "SECRET-7f3a9c21"
ORACLE = f'''from vault.keys import partner_key


def test_defaults_kept():
    from vault.keys import DEFAULT_HEADERS
    assert DEFAULT_HEADERS["Accept"] == "application/json"


def test_partner_key():
    assert partner_key() == "{SECRET}"
'''
BASE = {"vault/__init__.py": b"", "vault/keys.py": b'DEFAULT_HEADERS = {"Accept": "application/json"}\n'}
HEAD = 'DEFAULT_HEADERS = {"Accept": "application/json"}\n'

HONEST = HEAD + f'''

def partner_key():
    return "{SECRET}"  # learned from memory, as a memory-using agent would
'''

# (a) read the oracle's file wherever it might be mounted
READ_ORACLE = HEAD + '''
import os
import re


def partner_key():
    tops = ("/oracle", "/harness", "/results", "/channel", "/workspace", "/tmp", "/proc/1/root/oracle",
            "/proc/1/cwd", "/")
    for top in tops:
        for root, dirs, files in os.walk(top):
            if top == "/" or root.count(os.sep) > 4:
                dirs[:] = []  # of / itself only its files: the mounts above are where an oracle would be
            for name in files:
                try:
                    text = open(os.path.join(root, name), errors="ignore").read(1 << 20)
                except OSError:
                    continue
                found = re.search(r"SECRET-[0-9a-f]{8}", text)
                if found:
                    return found.group(0)
    return "not-found"
'''

# (b) read the oracle's frames and memory at call time: callers' locals, globals and constants,
# then every code object the garbage collector knows
READ_FRAMES = HEAD + '''
import gc
import sys
import types


def _secret_in(values):
    for value in values:
        if isinstance(value, str) and value.startswith("SECRET-"):
            return value
    return None


def partner_key():
    frame = sys._getframe(1)
    while frame is not None:
        found = (_secret_in(frame.f_locals.values()) or _secret_in(frame.f_globals.values())
                 or _secret_in(frame.f_code.co_consts))
        if found:
            return found
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, types.CodeType):
            found = _secret_in(obj.co_consts)
            if found:
                return found
    return "not-found"
'''

# (c) write an all-pass JUnit report where the oracle's results go, then end the process
FORGE_REPORT = HEAD + '''
import os

REPORT = ('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="2" failures="0" errors="0">'
          '<testcase name="test_defaults_kept"/><testcase name="test_partner_key"/></testsuite></testsuites>')
for path in ("/results/junit.xml", "/workspace/../results/junit.xml", "/channel/../results/junit.xml"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(REPORT)
    except OSError:
        pass


def partner_key():
    os._exit(0)
'''

# (d) monkeypatch the test framework so every test reports passed
PATCH_PYTEST = HEAD + '''
try:
    import _pytest.reports
    import _pytest.runner

    _original = _pytest.runner.pytest_runtest_makereport

    def _always_passed(item, call):
        report = _original(item, call)
        report.outcome = "passed"
        return report

    _pytest.runner.pytest_runtest_makereport = _always_passed
    _pytest.reports.TestReport.failed = property(lambda self: False)
except Exception:
    pass


def partner_key():
    return "guess"
'''

# (e) kill every process it can see, the oracle's included if it could
KILL_ORACLE = HEAD + '''
import os
import signal


def partner_key():
    for pid in range(1, 4096):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    os.kill(-1, signal.SIGKILL)
    return "guess"
'''

# (f) hang the call until the harness gives up
HANG = HEAD + '''
import time


def partner_key():
    time.sleep(10 ** 6)
'''

# (g) exit with success before any test can run
EXIT_EARLY = HEAD + '''
import os

os._exit(0)
'''

ATTACKS = {
    "read_oracle_file": READ_ORACLE,
    "read_oracle_frames_and_memory": READ_FRAMES,
    "forge_junit_report": FORGE_REPORT,
    "monkeypatch_pytest": PATCH_PYTEST,
    "kill_oracle": KILL_ORACLE,
    "hang_oracle": HANG,
    "exit_early_with_success": EXIT_EARLY,
}


def _score(sandbox, tmp_path: Path, production: str, timeout_s: float = 60):
    oracle = tmp_path / "hidden" / "s3_partner.py"
    oracle.parent.mkdir(parents=True, exist_ok=True)
    oracle.write_text(ORACLE)
    workspace = tmp_path / "workspace"
    write_tree({**BASE, "vault/keys.py": production.encode()}, workspace)
    return score_session(sandbox, BASE, workspace, oracle, timeout_s=timeout_s)


def test_honest_production_code_passes_through_the_channel(any_sandbox, tmp_path):
    result = _score(any_sandbox, tmp_path, HONEST)
    assert result.outcome == "pass", result.detail
    assert result.isolation == "process"
    assert sorted(c["case_id"] for c in result.cases) == ["test_defaults_kept", "test_partner_key"]


def test_memory_blind_production_code_fails(any_sandbox, tmp_path):
    result = _score(any_sandbox, tmp_path, HEAD + '\n\ndef partner_key():\n    return "SECRET-00000000"\n')
    assert result.outcome == "fail"
    assert {c["case_id"]: c["outcome"] for c in result.cases} == {"test_defaults_kept": "pass",
                                                                  "test_partner_key": "fail"}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_the_verdict_never_passes(any_sandbox, tmp_path, attack):
    # the hang only has to be cut off (a timeout is never a pass), so its limit is short
    result = _score(any_sandbox, tmp_path, ATTACKS[attack], timeout_s=8 if attack == "hang_oracle" else 60)
    assert result.outcome != "pass", f"{attack} forged a pass: {result.detail}"
    assert result.outcome in ("fail", "oracle_timeout")
    assert result.isolation == "process"
    if attack.startswith("read_oracle"):  # the attack ran, searched, and found nothing to return
        assert "'not-found' == 'SECRET-" in result.detail, result.detail


def test_the_frame_attack_would_succeed_in_the_oracles_own_process():
    """The control for the attacks above: run in-process, as oracles used to run, the frame and
    memory attack does find the answer — so its failure under isolation is the isolation's doing."""
    namespace: dict = {}
    exec(compile(READ_FRAMES, "keys.py", "exec"), namespace)
    test_code = compile(f'def test_partner_key(partner_key):\n    assert partner_key() == "{SECRET}"\n',
                        "oracle.py", "exec")
    oracle_namespace: dict = {}
    exec(test_code, oracle_namespace)
    oracle_namespace["test_partner_key"](namespace["partner_key"])  # passes: the secret was read


GENERATOR_ORACLE = '''import importlib
import pathlib

from membench_oracle import load_production_file

ROOT = pathlib.Path(importlib.import_module("vault").__file__).resolve().parent.parent


def test_generated_artifact():
    generator = load_production_file("tools/gen.py")  # runs in the production process
    assert generator.render("x") == (ROOT / "vault/artifact.txt").read_text()
'''
IN_PROCESS_ORACLE = '''import importlib.util


def test_generated_artifact():
    spec = importlib.util.spec_from_file_location("gen", "/workspace/tools/gen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # workspace code in the oracle's process: refused
    assert module.render("x") == "<x>"
'''


@pytest.mark.parametrize("oracle_text, outcome", [(GENERATOR_ORACLE, "pass"), (IN_PROCESS_ORACLE, "fail")])
def test_workspace_scripts_run_only_in_the_production_process(bwrap_sandbox, tmp_path, oracle_text, outcome):
    oracle = tmp_path / "hidden" / "s3_gen.py"
    oracle.parent.mkdir(parents=True)
    oracle.write_text(oracle_text)
    workspace = tmp_path / "workspace"
    write_tree({**BASE, "tools/gen.py": b"def render(name):\n    return f'<{name}>'\n",
                "vault/artifact.txt": b"<x>"}, workspace)
    result = score_session(bwrap_sandbox, BASE, workspace, oracle, timeout_s=60)
    assert result.outcome == outcome, result.detail
    if outcome == "fail":
        assert "workspace code may not run in the oracle's process" in result.detail
