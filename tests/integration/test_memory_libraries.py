"""The memory libraries end to end: the real CLI runs a trap of the smoke pack with
`scripted:memory-literal` under B0, B5-MEM0-LIT (real Mem0, real embedded Qdrant under the run set),
B2-dense (real Qdrant local mode) and B5-LANGMEM (real LangMem over LangGraph's InMemoryStore), their
model calls and embeddings through the real model gateway to `ScriptedUpstream` — a local scripted
server whose vectors are deterministic hashed bags of words and whose answer to LangMem's memory
manager is one `Memory` call per new line of the session, verbatim (no model API is reachable here).

B5-MEM0 (native Mem0: fact inference on, its extraction through the gateway), B5-MEM0-LIT, B2-dense
and B5-LANGMEM pass the conformance suite (`membench memory check`, two fresh processes each),
complete with every embedding a gateway ModelCall (purpose `embed`, recorded) and each extraction
one too (purpose `sleep`, chat_completions), B5-MEM0-LIT carries the secrets (pass rate above B0's),
and the recorded run replays with no upstream to the same verdicts for every condition, its calls
answered from the recording. Under the scripted upstream B5-MEM0, B2-dense and B5-LANGMEM carry the
secret too (asserted as observed: `pass`; the stand-in's extraction is verbatim, docs/memory-systems.md).
As in DreamBench-SWE's audit, a study registers a configuration that failed its gate: `shuffler`, a
deliberately non-deterministic adapter of the JSON protocol (a test double of the protocol, not of a
library), fails the cross-process identity gate; it is not run, its slot stays in the family at
p = 1, and Holm adjusts the other slot over the full family size (2); the report's conformance funnel
(registered 6 → conformant 5 → evaluated 5) labels it "conformance-unavailable, not an observed
loss". One test, one recorded and one replayed run set for every library (CI's time budget)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from tests.conftest import assert_run_sets_verify
from tests.packs.hygiene_helpers import subset_pack

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
DOUBLE = Path(__file__).resolve().parents[1] / "memory_systems" / "shuffling_adapter.py"
LIBRARIES = ("B5-MEM0", "B5-MEM0-LIT", "B2-dense", "B5-LANGMEM")

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]
MODEL = "gpt-5-mini"


def _run(cli, pack: Path, run_set: str, study: Path, env: dict[str, str], *model_args: str):
    return cli("run", str(pack), "--conditions", ",".join(("B0", *LIBRARIES, "shuffler")), "--seeds", "1",
               "--agent", "scripted:memory-literal", "--run-set", run_set, "--memory-model", MODEL, "--study", str(study),
               *model_args, env=env, timeout=900)


def test_the_libraries_are_conformant_complete_and_replay(cli, home: Path, tmp_path: Path) -> None:
    # one trap of the smoke pack (CI budget): B0 fails it without memory, so a literal lane must carry it
    pack = subset_pack(FIXTURES / "smoke", tmp_path / "smoke", ["smoke-client-header"], name="smoke")
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"baseline": "B0", "families": [{
        "name": "A", "role": "primary", "comparisons": [["B5-MEM0-LIT", "B0"], ["shuffler", "B0"]],
        "tests": ["clustered"]}]}))
    env = {"MEMBENCH_MEMORY_ADAPTERS": json.dumps(
        {"shuffler": {"command": [sys.executable, str(DOUBLE), str(tmp_path / "shuffler"), "shuffle"]}})}
    failed = cli("memory", "check", "shuffler", "--json", env=env, timeout=600)
    assert failed.returncode == 1 and json.loads(failed.stdout)["failed"] == ["cross_process_identity"], failed.stdout
    with ScriptedUpstream() as upstream:
        for condition in LIBRARIES:
            check = cli("memory", "check", condition, "--memory-model", MODEL, "--model-base-url",
                        upstream.base_url, "--json", timeout=600)
            assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
            record = json.loads(check.stdout)
            assert (record["condition"], record["verdict"], record["failed"]) == (condition, "pass", [])
            assert record["model_calls"] > 0  # its embeddings went through the probes' gateways
            # the extraction ran (native Mem0, LangMem): one call per written session, two sessions per
            # probe, two probes
            assert record["model_calls_by_purpose"].get("sleep", 0) == (
                4 if condition in ("B5-MEM0", "B5-LANGMEM") else 0)
        proc = _run(cli, pack, "memrec", study, env, "--model-base-url", upstream.base_url, "--model-record")
        assert proc.returncode == 0, proc.stderr[-3000:]
    # the settings turn each library records while it opens is inside its run: the log verifies
    assert_run_sets_verify(home, "memrec")
    assert "shuffler is conformance-unavailable" in proc.stderr
    recorded = json.loads((home / "runs" / "memrec" / "report.json").read_text())
    passed = {c["condition"]: c["passed"] for c in recorded["conditions"]}
    assert set(passed) == {"B0", *LIBRARIES} and passed["B5-MEM0-LIT"] > passed["B0"], passed
    # every unit completed (a valid cell, none excluded); the libraries carried the secret, B0 did not
    assert recorded["outcome_matrix"]["conditions"] == {
        c: {"smoke-client-header": {"1": verdict}} for c, verdict in
        (("B0", "fail"), *((library, "pass") for library in LIBRARIES))}, recorded["outcome_matrix"]
    assert {c["condition"]: c["excluded"] for c in recorded["conditions"]} == {c: 0 for c in ("B0", *LIBRARIES)}
    family, pairs = recorded["families"]["families"]  # the study's family, then membench's all_pairs
    assert (pairs["name"], pairs["role"]) == ("all_pairs", "secondary")
    assert pairs["family_size"] == len(passed) * (len(passed) - 1) // 2  # the evaluated conditions only
    assert family["family_size"] == 2
    lit, native = family["comparisons"]
    assert (native["b"], native["a"], native["available"]) == ("B0", "shuffler", False)
    assert native["primary"]["p_holm"] == 1.0
    raw = lit["primary"]["p"]
    assert lit["available"] and lit["primary"]["p_holm"] == pytest.approx(min(1.0, 2 * raw))  # m = 2, not 1
    for condition in ("B5-MEM0", "B5-MEM0-LIT", "B2-dense"):  # the stores live under the run set
        assert (home / "runs" / "memrec" / "memory" / condition / "qdrant").is_dir()
    assert not (home / "runs" / "memrec" / "memory" / "B5-LANGMEM").exists()  # LangMem's store is in memory
    funnel = recorded["conformance"]
    assert (funnel["registered"], funnel["conformant"], funnel["evaluated"]) == (6, 5, 5)
    status = {e["condition"]: (e["status"], e["label"]) for e in funnel["conditions"]}
    assert status == {"B0": ("built_in", None), **{c: ("conformant", None) for c in LIBRARIES},
                      "shuffler": ("failed", "conformance-unavailable, not an observed loss")}
    markdown = (home / "runs" / "memrec" / "report.md").read_text()
    assert "conformance funnel: registered 6 → conformant 5 → evaluated 5" in markdown
    assert "| shuffler | B0 | conformance-unavailable, not an observed loss unavailable (p = 1)" in markdown

    proc = _run(cli, pack, "memrep", study, env, "--model-replay", "memrec")  # no upstream at all
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_run_sets_verify(home, "memrep")
    replayed = json.loads((home / "runs" / "memrep" / "report.json").read_text())
    assert replayed["outcome_matrix"]["conditions"] == recorded["outcome_matrix"]["conditions"]
    assert {c["condition"]: (c["passed"], c["excluded"]) for c in replayed["conditions"]} == \
        {c: (n, 0) for c, n in passed.items()}

    # every library call of both run sets, per condition (one query: a CLI process costs CI time):
    # through the gateway, recorded in memrec and answered from it in memrep — embeddings, and
    # LangMem's extraction (chat_completions, purpose `sleep`)
    proc = cli("sql", "SELECT run_set, splitByChar('/', unit_id)[3] AS c, JSONExtractString(payload, 'api'), "
                      "JSONExtractString(payload, 'purpose'), JSONExtractString(payload, 'mode'), "
                      "JSONExtractString(payload, 'status'), JSONExtractBool(payload, 'recorded') "
                      "FROM trajectory_events WHERE run_set IN ('memrec', 'memrep') AND kind = 'ModelCall' "
                      "GROUP BY ALL ORDER BY ALL")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line.split("\t") for line in proc.stdout.splitlines()] == [
        [run_set, condition, api, purpose, mode, "ok", recorded]
        for run_set, mode, recorded in (("memrec", "forward", "1"), ("memrep", "replay", "0"))
        for condition, api, purpose in (("B2-dense", "embeddings", "embed"),
                                        ("B5-LANGMEM", "chat_completions", "sleep"),
                                        ("B5-LANGMEM", "embeddings", "embed"),
                                        ("B5-MEM0", "chat_completions", "sleep"),
                                        ("B5-MEM0", "embeddings", "embed"),
                                        ("B5-MEM0-LIT", "embeddings", "embed"))], proc.stdout
