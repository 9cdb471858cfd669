"""A grid run started from Python (`membench.api.run_grid`): the same grid as `membench run` (the
shared smoke run set), real bubblewrap oracles, chDB and the Avro log; the call returns a typed
outcome, prints nothing and does not end its process, and the report equals the CLI's. A model
agent and a model-driven condition run through the same call, against the scripted upstream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import assert_run_sets_verify

pytestmark = pytest.mark.integration

# run in a process of its own: a chDB warehouse has one owner process, which the test's must not become
LIBRARY_CALL = textwrap.dedent("""
    import json, sys
    from membench.api import RunRequest, run_grid

    request = RunRequest("smoke", conditions=("B0", "B5"), seeds=(1, 2), agent="scripted:memory-literal")
    outcomes = [run_grid(request), run_grid(request)]  # the second finds every unit complete
    summary = [{"run_set": o.run_set, "report_dir": str(o.report_dir), "log": str(o.log), "verified": o.verified,
                "events": o.verification.events, "planned": o.units_planned, "completed": o.units_completed,
                "run": o.units_run, "stopped": o.stopped, "partial": o.report.partial is not None,
                "conditions": {c.condition: [c.passed, c.cells] for c in o.report.conditions}} for o in outcomes]
    with open(sys.argv[1], "w", encoding="utf-8") as out:  # the call returned: the process goes on
        json.dump(summary, out)
""")


def _conditions(report: dict) -> dict[str, list[int]]:
    return {c["condition"]: [c["passed"], c["cells"]] for c in report["conditions"]}


def test_a_run_started_from_python_returns_its_outcome_silently(tmp_path: Path, smoke_run_set) -> None:
    home = tmp_path / "home"
    result = tmp_path / "outcome.json"
    proc = subprocess.run([sys.executable, "-c", LIBRARY_CALL, str(result)], capture_output=True, text=True,
                          env={**os.environ, "MEMBENCH_HOME": str(home)}, cwd=str(tmp_path), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout, proc.stderr) == ("", ""), "the library call drew on the terminal"
    first, again = json.loads(result.read_text(encoding="utf-8"))

    cli_report = json.loads((smoke_run_set.home / "runs" / smoke_run_set.run_set / "report.json").read_text())
    # derived as the CLI derives it (pack, finalized digest, agent, grid): a second call resumes it
    assert first["run_set"].startswith("smoke-memory-literal-") and again["run_set"] == first["run_set"]
    assert first["conditions"] == _conditions(cli_report)
    assert (first["planned"], first["completed"], first["run"]) == (12, 12, 12)
    assert first["verified"] and first["events"] > 0 and first["stopped"] is None and not first["partial"]
    written = json.loads((Path(first["report_dir"]) / "report.json").read_text(encoding="utf-8"))
    assert _conditions(written) == first["conditions"] and written["verification"]["verified"] is True
    assert Path(first["log"]).is_file()

    # resumed: nothing left to run, the same report
    assert (again["planned"], again["completed"], again["run"]) == (12, 12, 0)
    assert again["conditions"] == first["conditions"] and again["verified"]
    assert_run_sets_verify(home, first["run_set"])


# the request's model settings come in as JSON (argv[2]): the upstream is the test process's
MODEL_CALL = textwrap.dedent("""
    import json, sys
    from membench.api import ModelSettings, RunRequest, run_grid

    spec = json.loads(sys.argv[2])
    model = ModelSettings(**{k: tuple(v) if k == "base_urls" else v for k, v in spec.pop("model").items()})
    outcome = run_grid(RunRequest(spec.pop("pack"), conditions=tuple(spec.pop("conditions")), seeds=(1,),
                                  model=model, **spec))
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump({"run_set": outcome.run_set, "verified": outcome.verified, "stopped": outcome.stopped,
                   "completed": outcome.units_completed, "planned": outcome.units_planned,
                   "conditions": {c.condition: [c.passed, c.cells, c.excluded] for c in outcome.report.conditions}},
                  out)
""")
KEY = "sk-membench-library-call-0d5e"


def _start_model_call(tmp_path: Path, home: Path, spec: dict, result: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # the key is the request's
    return subprocess.run([sys.executable, "-c", MODEL_CALL, str(result), json.dumps(spec)], capture_output=True,
                          text=True, env={**env, "MEMBENCH_HOME": str(home)}, cwd=str(tmp_path), timeout=900)


def _model_call(tmp_path: Path, home: Path, spec: dict) -> dict:
    result = tmp_path / f"outcome-{len(list(tmp_path.glob('outcome-*')))}.json"
    proc = _start_model_call(tmp_path, home, spec, result)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout, proc.stderr) == ("", ""), "the library call drew on the terminal"
    return json.loads(result.read_text(encoding="utf-8"))


def _calls(events) -> dict[tuple[str, str, str, str], int]:
    """(condition, purpose, mode, status) -> the number of ModelCall events so."""
    return dict(Counter((e.unit_id.split("/")[2], e.payload["purpose"], e.payload["mode"], e.payload["status"])
                        for e in events if e.kind == "ModelCall"))


def test_a_model_agent_and_a_model_driven_condition_run_through_the_library_call(tmp_path: Path,
                                                                                  bwrap_sandbox) -> None:
    """The built-in `openai:` loop under B5 and under B3-llm (whose memory model the harness calls),
    both through the gateway the call starts, against the scripted upstream with the request's own
    key; then replayed from the recording with no upstream. The control, a call without the key,
    is refused by the models' pre-flight before anything is written."""
    from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
    from membench.bus.attempts import read_log
    from tests.integration.pack_helpers import smoke_cut_to

    pack = smoke_cut_to(tmp_path / "smoke-currency")
    home = tmp_path / "home"
    spec = {"pack": str(pack), "conditions": ["B5", "B3-llm"], "agent": "openai:local-model", "workers": 2,
            "run_set": "lib-loop", "baseline": "B5",
            "model": {"record": True, "memory_model": "memory-model", "api_keys": {"*": KEY}}}
    with ScriptedUpstream(script_from_pack(pack), key=KEY) as upstream:
        spec["model"]["base_urls"] = [upstream.base_url]
        keyless = {**spec, "model": {k: v for k, v in spec["model"].items() if k != "api_keys"}}
        refused = _start_model_call(tmp_path, home, keyless, tmp_path / "none.json")
        assert refused.returncode != 0 and "RequestInvalid: pre-flight failed" in refused.stderr, refused.stderr
        assert not (home / "runs" / "lib-loop").exists()  # nothing written
        recorded = _model_call(tmp_path, home, spec)
    assert recorded["run_set"] == "lib-loop" and recorded["verified"] and recorded["stopped"] is None
    assert (recorded["planned"], recorded["completed"]) == (2, 2)
    # the script fills S3's currency code from what reached the agent: each condition's memory carried it
    assert recorded["conditions"] == {"B5": [1, 1, 0], "B3-llm": [1, 1, 0]}
    evs = [e for e, _ in read_log(home / "runs" / "lib-loop" / "events.avro")]
    assert [e.payload["outcome"] for e in evs if e.kind == "OracleVerdict"].count("pass") == 6
    # the agent's two calls a session (the files, then its answer) and B3-llm's sleep after each, forwarded
    # and recorded; the pre-flight's probe is in no log
    assert _calls(evs) == {("B5", "agent", "forward", "ok"): 6, ("B3-llm", "agent", "forward", "ok"): 6,
                           ("B3-llm", "sleep", "forward", "ok"): 3}
    assert all(e.payload["recorded"] for e in evs if e.kind == "ModelCall")

    # replayed: no upstream, a run set of its own (derived, "+replay"), the same verdicts
    replay = {**spec, "run_set": None, "model": {"replay": "lib-loop", "memory_model": "memory-model"}}
    replayed = _model_call(tmp_path, home, replay)
    assert replayed["run_set"] != "lib-loop" and replayed["conditions"] == recorded["conditions"]
    assert replayed["verified"] and replayed["completed"] == 2
    again = [e for e, _ in read_log(home / "runs" / replayed["run_set"] / "events.avro")]
    assert _calls(again) == {(c, purpose, "replay", "ok"): n for (c, purpose, _, _), n in _calls(evs).items()}
    assert_run_sets_verify(home, "lib-loop", replayed["run_set"])
