"""Predictions scored under the A/B benchmark's own source labels keep the memory
evidence that benchmark records, through the real `membench score` (bwrap scoring, chDB).

The five published task shapes of `tasks-v1-5tasks.json` under every source label (`no_memory`,
`remem`, `curated_file`): without a transcript, an empty patch citing one id remem held (`1`) and
one no memory held (`99`); with the three published `codex exec --json` transcripts and their final
diffs (resolved). Expected, as that benchmark defines it:
- `remem`: the contract applies; injected ids are the task's memories as remem numbers them (`1`),
  cited ids come from the prediction or the transcript's "Memory citations:" line; a citation of
  an id remem never held is `agent_hallucinated_memory`;
- `curated_file`: `memory_contract_status` is `not_applicable` (its artifact contract), but a
  failing run citing an id its MEMORY.md never held is `agent_hallucinated_memory`;
- `no_memory`: a task failure only (`test_failure`), whatever it cites.
Before the fix `remem` ran as `no_memory`: its contract was `not_applicable` with no cited ids."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import SHARED, require_shared
from membench.warehouse.client import connect

pytestmark = pytest.mark.integration

BENCH = SHARED / "external" / "remem-coding-bench"
TRANSCRIPTS = {"context-visibility-policy": "remem-context-visibility-policy-1",
               "slug-normalizer-contract": "remem-slug-normalizer-contract-1",
               "ticket-key-memory-convention": "remem-ticket-key-memory-convention-1"}
LABELS = ("no_memory", "remem", "curated_file")


def test_source_labels_keep_the_published_memory_taxonomy(cli, home, tmp_path, bwrap_sandbox):
    sample = require_shared(BENCH / "tasks-v1-5tasks.json")
    tasks = [t["id"] for t in json.loads(sample.read_text(encoding="utf-8"))["tasks"]]
    assert len(tasks) == 5
    cli("import", "remem", str(sample), str(tmp_path / "pack"), check=True)
    root = tmp_path / "preds"
    (root / "transcripts").mkdir(parents=True)
    predictions = []
    for label in LABELS:
        for task in tasks:  # seed 1: no transcript, an empty patch (fails), citing a held and an unheld id
            predictions.append({"unit": task, "condition": label, "seed": 1, "patch": "",
                                "cited_memory_ids": ["1", "99"]})
        for task, stem in TRANSCRIPTS.items():  # seed 2: the published transcript and its final diff
            source = require_shared(BENCH / "transcripts" / f"{stem}.codex.jsonl")
            shutil.copy(source, root / "transcripts" / source.name)  # in tmp only, never the repository
            predictions.append({"unit": task, "condition": label, "seed": 2,
                                "patch": (BENCH / "transcripts" / f"{stem}.final.diff").read_text(encoding="utf-8"),
                                "transcript": f"transcripts/{source.name}", "transcript_format": "codex-exec-json"})
    path = root / "p.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    cli("score", str(tmp_path / "pack"), "--predictions", str(path), "--run-set", "ab", check=True)

    warehouse = connect(f"chdb://{home / 'warehouse'}")
    try:
        def rows(sql: str) -> dict[str, dict]:
            return {r["run_id"]: r for r in warehouse.query_dicts(sql + " LIMIT 1 BY run_id")}

        runs = rows("SELECT run_id, task, condition, seed FROM run_results WHERE run_set = 'ab'")
        failures = rows("SELECT run_id, failure_reason AS reason, resolved FROM failures WHERE run_set = 'ab' AND scored")
        contracts = rows("SELECT run_id, memory_contract_status AS status, injected_memory_ids AS injected, "
                         "cited_memory_ids AS cited, memory_helped AS helped FROM memory_contracts "
                         "WHERE run_set = 'ab' AND scored")
    finally:
        warehouse.close()
    got = {(r["task"], r["condition"], r["seed"]): {**r, **failures[i], **contracts[i]} for i, r in runs.items()}
    assert len(got) == len(predictions)
    for task in tasks:
        none, remem, curated = (got[(task, label, 1)] for label in LABELS)
        assert (remem["reason"], remem["status"]) == ("agent_hallucinated_memory", "failed"), remem
        assert (list(remem["injected"]), list(remem["cited"])) == (["1"], ["1", "99"])
        assert (curated["reason"], curated["status"], list(curated["cited"])) == \
            ("agent_hallucinated_memory", "not_applicable", []), curated
        assert (none["reason"], none["status"]) == ("test_failure", "not_applicable"), none
    for task in TRANSCRIPTS:
        none, remem, curated = (got[(task, label, 2)] for label in LABELS)
        assert all(r["resolved"] and r["reason"] is None for r in (remem, curated, none)), (remem, curated, none)
        # the transcript's "Memory citations: memory:#1" is in the contract
        assert (remem["status"], list(remem["injected"]), list(remem["cited"]), remem["helped"]) == \
            ("passed", ["1"], ["1"], True), remem
        assert curated["status"] == none["status"] == "not_applicable"
