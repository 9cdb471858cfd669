"""Importing DreamBench-SWE's published sequence records (JSON lines) as a native pack."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from producers.importers.dreambench import import_dreambench
from schemas.pack_format import PackError, load_pack
from tests.conftest import SHARED, require_shared

SAMPLES = SHARED / "external" / "dreambench-swe" / "sequences_excerpt.jsonl"
V1_SEQ = "config-stale-merge"  # the v1-shaped record: no construct_label
V2_SEQ = "v2-c9-todo-spurious-due-parser-01"


def samples() -> list[dict]:
    require_shared(SAMPLES)
    return [json.loads(line) for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "seqs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_two_published_samples_import_with_their_evidence_and_a_supply_list(tmp_path):
    out = tmp_path / "pack"
    result = import_dreambench(require_shared(SAMPLES), out, constructs={V1_SEQ: "C3"})
    manifest = json.loads((out / "manifest.json").read_text())
    seqs = {s["seq_id"]: s for s in manifest["sequences"]}
    assert result.sequences == 2 and set(seqs) == {V1_SEQ, V2_SEQ}
    v1, v2 = seqs[V1_SEQ], seqs[V2_SEQ]
    assert (v1["construct"], v1["family"], v1["repo"]) == ("C3", "stale-architecture", "configly")
    assert (v2["construct"], v2["family"], v2["repo"]) == ("C9", "flaky-test / spurious-lesson", "todolite")
    # the decisive evidence is carried verbatim, delivered where the record says
    source = {r["seq_id"]: r for r in samples()}
    for seq_id, seq in seqs.items():
        assert [(e["event_id"], e["after_session"], e["kind"], e["content"]) for e in seq["events"]] == [
            (e["event_id"], e["after_session"], e["kind"], e["content"]) for e in source[seq_id]["events"]]
        assert [s["inject_after"] for s in seq["sessions"]] == [
            s.get("inject_after", []) for s in source[seq_id]["sessions"]]
    assert "REVIEWER-MERGE-V4" in v1["events"][1]["content"]
    assert v2["clean_start_s3"] is True and v2["anti_hoarding"] is True
    assert v2["sessions"][2]["start_state"] == "clean" and v1["sessions"][2]["start_state"] == "continuation"
    assert v2["decisive_literals"] == ["TASK|1|open|Alpha|due=2026-07-01"] and v2["why_not_verbatim"]
    assert manifest["source"]["initial_commits"]["configly"] == source[V1_SEQ]["initial_commit"]
    # what is not published is listed, and the pack is refused until it is supplied
    supply = (out / "SUPPLY.md").read_text()
    assert len(result.missing) == 14 and all(f"`{rel}`" in supply for rel in result.missing)
    assert f"hidden/{V2_SEQ}/{V2_SEQ}-s3.py" in result.missing and "repos/configly/" in result.missing
    with pytest.raises(PackError, match="repos.configly"):
        load_pack(out)


def test_a_v1_record_without_a_construct_is_refused_naming_record_and_field(tmp_path):
    with pytest.raises(PackError) as err:
        import_dreambench(require_shared(SAMPLES), tmp_path / "pack")
    assert "record 1 (seq_id 'config-stale-merge')" in str(err.value)
    assert "construct_label" in str(err.value) and "--construct config-stale-merge=" in str(err.value)
    assert not (tmp_path / "pack").exists()


def _drop(path: tuple):
    def mutate(record: dict) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


def _set(path: tuple, value):
    def mutate(record: dict) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


@pytest.mark.parametrize("mutate, where, field", [
    (_drop(("events", 0, "content")), "events[0]", "field 'content'"),
    (_set(("events", 0, "content"), "  "), "events[0]", "field 'content' is empty"),
    (_drop(("sessions", 2, "oracle_id")), "sessions[2]", "field 'oracle_id'"),
    (_drop(("sessions", 1, "instruction")), "sessions[1]", "field 'instruction'"),
    (_set(("sessions", 1, "session_index"), 3), "sessions[1]", "field 'session_index' must be 2"),
    (_drop(("initial_commit",)), "", "field 'initial_commit'"),
    (_drop(("oracle_labels",)), "", "field 'oracle_labels'"),
    (_set(("events",), []), "", "field 'events' is empty"),
    (_set(("sessions",), None), "", "field 'sessions'"),
    (_set(("seq_id",), "../escape"), "", "field 'seq_id' must be a plain name"),
    (_set(("sessions", 0, "visible_files"), ["../../etc/passwd"]), "sessions[0]", "field 'visible_files'"),
    (_set(("events", 0, "scope", "files"), ["/etc/passwd"]), "events[0]: scope", "field 'files'"),
    (_set(("sessions", 2, "start_state"), "warm"), "sessions[2]", "field 'start_state'"),
    (_set(("construct_label",), "C11"), "", "field 'construct_label' must be one of"),
])
def test_a_record_lacking_what_a_trap_needs_is_refused_naming_it(tmp_path, mutate, where, field):
    records = samples()
    mutate(records[1])
    with pytest.raises(PackError) as err:
        import_dreambench(write(tmp_path, records), tmp_path / "pack", constructs={V1_SEQ: "C3"})
    message = str(err.value)
    assert "record 2" in message and where in message and field.replace("field ", "") in message
    assert not (tmp_path / "pack").exists()


def test_inconsistent_sessions_are_refused_by_the_native_checks_naming_the_sequence(tmp_path):
    records = samples()
    records[1]["sessions"][2]["inject_after"] = ["no-such-event"]
    with pytest.raises(PackError, match=f"sequence {V2_SEQ}: sessions\\[2\\]: field 'inject_after' names unknown"):
        import_dreambench(write(tmp_path, records), tmp_path / "pack", constructs={V1_SEQ: "C3"})
    assert not (tmp_path / "pack").exists()


def _supplied(tmp_path: Path, records: list[dict]) -> tuple[Path, Path]:
    repos, hidden = tmp_path / "repos", tmp_path / "hidden"
    for record in records:
        repo = repos / record["repo"]
        (repo / ".git").mkdir(parents=True, exist_ok=True)
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (repo / "README.md").write_text(f"{record['repo']}\n")
        for s in record["sessions"]:
            base = hidden / record["seq_id"]
            base.mkdir(parents=True, exist_ok=True)
            # a supplied oracle checks the record's decisive literals (the loader requires them in it)
            literals = record.get("decisive_oracle_literals") or []
            (base / f"{s['oracle_id']}.py").write_text(f"LITERALS = {literals!r}\n\n\ndef test_ok():\n"
                                                      "    assert LITERALS is not None\n")
            (base / f"s{s['session_index']}.solution.json").write_text('{"files": {}, "slots": {}}\n')
    return repos, hidden


def test_supplied_repositories_and_hidden_oracles_make_a_complete_pack(tmp_path):
    records = samples()
    repos, hidden = _supplied(tmp_path, records)
    result = import_dreambench(write(tmp_path, records), tmp_path / "pack", repos=repos, hidden=hidden,
                               constructs={V1_SEQ: "C3"})
    assert result.missing == () and not (tmp_path / "pack" / "SUPPLY.md").exists()
    pack = load_pack(tmp_path / "pack")  # hidden part checked
    assert [s.construct for s in pack.sequences] == ["C3", "C9"]
    assert pack.oracle_path(pack.sequences[1], pack.sequences[1].scored_session).is_file()
    assert not (tmp_path / "pack" / "repos" / "configly" / ".git").exists()  # history is not the fixture


def test_a_partial_hidden_directory_is_refused_naming_the_missing_file(tmp_path):
    records = samples()
    repos, hidden = _supplied(tmp_path, records)
    (hidden / V2_SEQ / "s3.solution.json").unlink()
    with pytest.raises(PackError, match=f"missing file {V2_SEQ}/s3.solution.json .*session 3"):
        import_dreambench(write(tmp_path, records), tmp_path / "pack", repos=repos, hidden=hidden,
                          constructs={V1_SEQ: "C3"})
    assert not (tmp_path / "pack").exists()


def test_a_supplied_repository_linking_outside_the_pack_is_refused(tmp_path):
    records = samples()
    repos, hidden = _supplied(tmp_path, records)
    secret = tmp_path / "host-secret"
    secret.write_text("key\n")
    (repos / "todolite" / "inside.md").symlink_to("README.md")  # control: a link inside is fine
    result = import_dreambench(write(tmp_path, records), tmp_path / "ok", repos=repos, hidden=hidden,
                               constructs={V1_SEQ: "C3"})
    assert (result.out_dir / "repos" / "todolite" / "inside.md").read_text() == "todolite\n"
    (repos / "todolite" / "key").symlink_to(secret)
    with pytest.raises(PackError, match="points outside the pack"):
        import_dreambench(write(tmp_path, records), tmp_path / "pack", repos=repos, hidden=hidden,
                          constructs={V1_SEQ: "C3"})
    assert not (tmp_path / "pack").exists()


def test_duplicate_and_conflicting_records_are_refused(tmp_path):
    records = samples()
    with pytest.raises(PackError, match="record 3: field 'seq_id' repeats"):
        import_dreambench(write(tmp_path, records + [copy.deepcopy(records[1])]), tmp_path / "pack",
                          constructs={V1_SEQ: "C3"})
    other = copy.deepcopy(records[1])
    other["seq_id"], other["initial_commit"] = "other", "0" * 40
    with pytest.raises(PackError, match="record 3 .*field 'initial_commit'.*another record starts repository 'todolite'"):
        import_dreambench(write(tmp_path, records + [other]), tmp_path / "pack", constructs={V1_SEQ: "C3"})
    with pytest.raises(PackError, match="--construct names sequences that are not in"):
        import_dreambench(write(tmp_path, records), tmp_path / "pack", constructs={V1_SEQ: "C3", "typo": "C1"})


def test_cli_usage_errors_exit_2_naming_record_and_field(tmp_path, cli_inproc):
    require_shared(SAMPLES)
    result = cli_inproc("import", "dreambench", str(SAMPLES), str(tmp_path / "pack"))
    assert result.returncode == 2 and "record 1 (seq_id 'config-stale-merge')" in result.stderr
    assert "construct_label" in result.stderr
    result = cli_inproc("import", "dreambench", str(SAMPLES), str(tmp_path / "pack"), "--construct", "x=C99")
    assert result.returncode == 2 and "--construct 'x=C99': expected SEQ_ID=C1..C10" in result.stderr
    assert not (tmp_path / "pack").exists()
