"""The native pack format: the loader rejects malformed packs naming file, sequence and field;
the built-in hygiene-v1 pack meets its authoring requirements, and its oracles fail the null
patch (that they pass the reference solution is validate's gate, tests/integration/test_hygiene_pack.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from membench.packs.finalize import finalize_pack
from membench.sandbox.scoring import production_change, score_session
from membench.sandbox.workspace import snapshot, write_tree
from membench.formats.pack_format import NO_SINGLE_EVENT_CONSTRUCTS, Pack, PackError, Sequence, load_pack
from tests.packs.hygiene_helpers import FIXTURES, edit_manifest

HYGIENE = FIXTURES / "hygiene-v1"


@pytest.fixture
def smoke_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "smoke"
    shutil.copytree(FIXTURES / "smoke", dest)
    return dest


@pytest.mark.parametrize("edit, field", [
    (lambda m: m["sequences"][0]["sessions"][2].__setitem__("inject_after", ["nope"]), "inject_after"),
    (lambda m: m["sequences"][0]["sessions"][0].__setitem__("inject_after", ["smoke-client-header-e1"]), "inject_after"),
    (lambda m: m["sequences"][0].__setitem__("event_fact_map", {"ghost": ["x"]}), "event_fact_map"),
    (lambda m: m["sequences"][0].__setitem__("required_fact_ids", ["client-id-header", "unknown-fact"]), "required_fact_ids"),
    (lambda m: m["sequences"][0]["events"].append(dict(m["sequences"][0]["events"][0])), "events"),
    (lambda m: m["sequences"][0].__setitem__("clean_start_s3", "yes"), "clean_start_s3"),
    (lambda m: m["sequences"][0].__setitem__("secrets", {"client_id": "uuid"}), "secrets.client_id"),
    (lambda m: m["sequences"][0]["sessions"][1].__setitem__("start_state", "warm"), "start_state"),
    (lambda m: m.__setitem__("skill_bank", "no-such-dir"), "skill_bank"),
    (lambda m: m.__setitem__("format_version", 7), "format_version"),
])
def test_malformed_pack_is_rejected_naming_file_sequence_field(smoke_copy: Path, edit, field: str) -> None:
    edit_manifest(smoke_copy, edit)
    with pytest.raises(PackError) as err:
        load_pack(smoke_copy)
    message = str(err.value)
    assert "manifest.json" in message and f"'{field}'" in message
    if field not in ("skill_bank", "format_version"):
        assert "smoke-client-header" in message


def test_v2_pack_requires_why_not_verbatim_for_non_c1(smoke_copy: Path) -> None:
    def edit(m):
        m["format_version"] = 2
        m["sequences"][1]["construct"] = "C3"
    edit_manifest(smoke_copy, edit)
    with pytest.raises(PackError, match=r"sequence smoke-currency: field 'why_not_verbatim'"):
        load_pack(smoke_copy)


def test_missing_oracle_is_rejected_before_any_run(smoke_copy: Path) -> None:
    (smoke_copy / "hidden" / "smoke-currency" / "s3_make_invoice.py").unlink()
    with pytest.raises(PackError, match=r"sequence smoke-currency: session 3: field 'oracle_id'"):
        load_pack(smoke_copy)


def test_hygiene_pack_composition() -> None:
    pack = load_pack(HYGIENE)
    seqs = pack.sequences
    constructs = Counter(s.construct for s in seqs)
    assert len(seqs) >= 30
    assert len(pack.repos) >= 3 and {s.repo for s in seqs} == set(pack.repos)
    assert all(constructs[f"C{i}"] >= 2 for i in range(1, 11)), constructs
    assert constructs["C1"] / len(seqs) <= 0.40
    assert sum(s.clean_start_s3 for s in seqs) >= 6
    for s in seqs:
        if s.construct != "C1":
            assert s.why_not_verbatim and len(s.why_not_verbatim) > 40, s.seq_id
        if s.construct in NO_SINGLE_EVENT_CONSTRUCTS:
            assert len(s.required_fact_ids) >= 2, s.seq_id
        assert s.secrets, s.seq_id
    for name, repo in pack.repos.items():  # each a working library with visible tests
        assert list((repo / "tests").glob("test_*.py")), name
    assert pack.skill_bank is not None and (pack.skill_bank / "MANIFEST.sha256").is_file()


def _null_patch_verdicts(pack: Pack, seq: Sequence, sandbox) -> list[str]:
    """Each session's hidden oracle scored from the tree the agent starts from, as membench.runner.grid
    walks a sequence, unchanged (the null patch). Returns the problems: a null patch that does not
    fail. The reference half (every session's oracle passes the reference solution, applied in
    order as the runner does) is `membench validate`'s `reference_passes` gate, which
    tests/integration/test_hygiene_pack.py::test_validate_admits_every_hygiene_trap requires of
    every trap; scoring it here again doubled this test's sandboxes for nothing new."""
    base = snapshot(pack.repos[seq.repo])
    tree, problems = base, []
    for session in seq.sessions:
        clean = session.start_state == "clean" or (session is seq.scored_session and seq.clean_start_s3)
        start = base if clean else tree
        oracle = pack.oracle_path(seq, session)
        with tempfile.TemporaryDirectory(prefix="membench-test-") as tmp:
            workspace = Path(tmp) / "ws"
            write_tree(start, workspace)
            # require_change=False: the oracle itself must run and fail, not the empty-diff rule
            null = score_session(sandbox, start, workspace, oracle, require_change=False)
            for rel, text in pack.solution(seq, session).reference().items():
                (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
                (workspace / rel).write_text(text, encoding="utf-8")
            # the next session continues from the reference's result: the tree score_session would
            # have scored (its own production_change), built without running the oracle
            _, scored_tree, rejected = production_change(start, workspace)
        if null.outcome != "fail" or null.inconclusive:
            problems.append(f"{seq.seq_id} S{session.index}: null patch {null.outcome} (exit {null.exit_status})")
        if rejected is not None:
            problems.append(f"{seq.seq_id} S{session.index}: reference refused: {rejected.outcome}")
        tree = scored_tree
    return problems


@pytest.mark.integration
def test_hygiene_oracles_fail_the_null_patch(bwrap_sandbox, tmp_path: Path) -> None:
    """Every session of every trap: its oracle rejects doing nothing, run for real in the scoring
    sandbox on the finalized pack (secrets filled), from the tree the runner would start it from.
    That the oracles accept the reference solution: test_validate_admits_every_hygiene_trap."""
    finalize_pack(HYGIENE, tmp_path / "final")
    pack = load_pack(tmp_path / "final")
    assert all(s.mode == "task" and s.scoring is None for q in pack.sequences for s in q.sessions)  # pytest oracles
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        problems = [p for found in pool.map(lambda q: _null_patch_verdicts(pack, q, bwrap_sandbox), pack.sequences)
                    for p in found]
    assert not problems, "\n".join(problems)


def test_at_least_two_c3_traps_defeat_the_newest_event_heuristic(tmp_path: Path) -> None:
    values: dict = {}
    finalize_pack(HYGIENE, tmp_path / "final", reveal=values)
    pack = load_pack(tmp_path / "final")
    defeated = []
    for s in pack.sequences:
        if s.construct != "C3":
            continue
        solution = pack.solution(s, s.scored_session)
        for slot in solution.slots.values():
            newest = [e for e in s.events if re.search(slot.pattern, e.content)][-1]
            if re.search(slot.pattern, newest.content).group(1) != slot.answer:
                defeated.append(s.seq_id)
                break
    assert len(defeated) >= 2, defeated
    raw = json.loads((HYGIENE / "manifest.json").read_text())
    flagged = {s["seq_id"] for s in raw["sequences"] if s.get("newest_event_heuristic_fails")}
    assert flagged <= set(defeated)
