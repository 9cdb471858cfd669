"""The conformance gate: `grade` fails each gate on its own evidence (pure, with the
passing control beside each); `membench memory check` runs the suite in two fresh processes and
records it under the configuration digest; a deliberately non-deterministic adapter — a test double
of the JSON *protocol* (shuffling_adapter.py), not of a library — fails the cross-process identity
gate and nothing else; `run` then refuses it naming
the gate, and a condition with no record naming the command that makes one."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from membench.commands.memory import conformance_status
from membench.memory_systems.conformance import GATES, SECRET_CLASSES, SMALL_BUDGET, draw_tokens, fact, grade

DOUBLE = Path(__file__).with_name("shuffling_adapter.py")


def _result(tokens, order=1):
    reads = {}
    for ns in ("a", "b"):
        texts = [fact(c, t) for c, t in tokens[ns].items()][::order]
        for cls in SECRET_CLASSES:
            reads[f"{ns}/{cls}"] = {"texts": texts, "tokens": 100, "budget": 2000}
    for cls in SECRET_CLASSES:
        reads[f"empty/{cls}"] = {"texts": [], "tokens": 0, "budget": 2000}
    return {"reads": reads, "small": {"tokens": 10, "budget": SMALL_BUDGET}, "ops": [{"op": "x", "seconds": 0.1}],
            "network": [], "calls": []}


def _failed(gates):
    return [g for g in GATES if gates[g]["verdict"] != "pass"]


def test_each_gate_fails_on_its_own_evidence_and_passes_its_control() -> None:
    tokens = draw_tokens()
    assert len({t for ns in tokens.values() for t in ns.values()}) == 2 * len(SECRET_CLASSES)  # CSPRNG draws
    good = _result(tokens)
    assert _failed(grade(tokens, good, copy.deepcopy(good))) == []  # the control: everything passes
    assert _failed(grade(tokens, good, _result(tokens, order=-1))) == ["cross_process_identity"]
    lost = copy.deepcopy(good)
    lost["reads"]["a/hex8"]["texts"] = [t for t in lost["reads"]["a/hex8"]["texts"] if tokens["a"]["hex8"] not in t]
    assert "literal_round_trip" in _failed(grade(tokens, lost, lost))
    leaky = copy.deepcopy(good)
    leaky["reads"]["b/int"]["texts"].append(fact("int", tokens["a"]["int"]))
    assert "namespace_isolation" in _failed(grade(tokens, leaky, leaky))
    ghost = copy.deepcopy(good)
    ghost["reads"]["empty/word"]["texts"] = ["something"]
    assert "empty_namespace" in _failed(grade(tokens, ghost, ghost))
    greedy = copy.deepcopy(good)
    greedy["small"]["tokens"] = SMALL_BUDGET + 1
    assert _failed(grade(tokens, greedy, greedy)) == ["read_budget"]
    broken = copy.deepcopy(good)
    broken["ops"].append({"op": "read a hex8", "error": "RuntimeError: down"})
    assert _failed(grade(tokens, broken, broken)) == ["errors_timeouts"]
    chatty = copy.deepcopy(good)
    chatty["network"] = ["connect 203.0.113.9:443"]
    assert _failed(grade(tokens, chatty, chatty)) == ["no_network"]
    assert _failed(grade(tokens, {"crashed": "exit 1"}, good)) == list(GATES)


def _adapters(tmp_path: Path) -> dict[str, str]:
    spec = {name: {"command": [sys.executable, str(DOUBLE), str(tmp_path / name), mode]}
            for name, mode in (("shuffler", "shuffle"), ("steady", "stable"))}
    return {"MEMBENCH_MEMORY_ADAPTERS": json.dumps(spec)}


@pytest.fixture
def registered():
    """The conditions an in-process CLI call registers from its environment are removed afterwards."""
    from membench.memory_systems.registry import MEMORY_SYSTEMS

    before = set(MEMORY_SYSTEMS)
    yield
    for name in set(MEMORY_SYSTEMS) - before:
        MEMORY_SYSTEMS.pop(name, None)


def test_a_nondeterministic_adapter_fails_identity_only_and_run_refuses_it(cli, cli_inproc, home, tmp_path,
                                                                           registered) -> None:
    env = _adapters(tmp_path)
    proc = cli("memory", "check", "shuffler", "--json", env=env, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    record = json.loads(proc.stdout)
    assert record["failed"] == ["cross_process_identity"] and record["verdict"] == "fail"
    assert record["configuration"]["kind"] == "external" and record["repair_budget"]["used"] == 1
    assert (home / "conformance" / f"{record['digest']}.json").exists()
    evidence = record["gates"]["cross_process_identity"]["evidence"]
    assert evidence["digests"][0] != evidence["digests"][1]
    # control (in grade's test above): the same reads in the same order pass the identity gate

    refused = cli_inproc("run", "smoke", "--conditions", "B0,shuffler", "--agent", "scripted:memory-literal", env=env)
    assert refused.returncode == 2 and "cross_process_identity" in refused.stderr, refused.stderr
    missing = cli_inproc("run", "smoke", "--conditions", "B0,nobody", "--agent", "scripted:memory-literal",
                         env={"MEMBENCH_MEMORY_ADAPTERS": json.dumps({"nobody": {"command": ["true"]}})})
    assert missing.returncode == 2 and "membench memory check nobody" in missing.stderr, missing.stderr
    assert conformance_status(home, "shuffler", None)[0] == "failed"  # registered by the calls above
    assert conformance_status(home, "steady", None)[0] == "missing"
    assert conformance_status(home, "B5", None)[0] == "built_in"  # built-ins need no record


def test_memory_check_usage_errors_name_the_condition_and_the_options(cli_inproc, home) -> None:
    unknown = cli_inproc("memory", "check", "no-such-memory")
    assert unknown.returncode == 2 and "unknown condition 'no-such-memory'" in unknown.stderr
    bare = cli_inproc("memory", "check", "B5-MEM0-LIT")  # a library calls its embedder through the gateway
    assert bare.returncode == 2 and "--memory-model MODEL and --model-base-url URL" in bare.stderr
    stray = cli_inproc("memory", "check", "B5", "--memory-model", "m")
    assert stray.returncode == 2 and "B5 calls no model" in stray.stderr
    assert not (home / "conformance").exists()  # nothing recorded for a refused check
