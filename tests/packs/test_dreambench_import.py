"""Importing DreamBench-SWE's published sequence records (JSON lines) as a native pack."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from membench.packs.importers.dreambench import import_dreambench
from membench.formats.pack_format import PackError, load_pack
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
    with pytest.raises(PackError, match="repos/configly/"):
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


# where each published record field lands in the imported sequence (None: in the manifest's `source`)
CARRIED = {"seq_id": "seq_id", "construct_label": "construct", "family_label": "family", "seq_type": "seq_type",
           "repo": "repo", "fixture_repo": "repo", "initial_commit": None, "sessions": "sessions", "events": "events",
           "oracle_labels": "oracle_labels", "clean_start_s3": "clean_start_s3", "anti_hoarding": "anti_hoarding",
           "decisive_oracle_literals": "decisive_literals", "required_fact_ids": "required_fact_ids",
           "event_fact_map": "event_fact_map", "insufficiency_mechanism": "why_not_verbatim"}
VERBATIM = ("commission_checks", "omission_checks", "single_event_complete_answer", "validation_metadata")


def test_every_field_of_a_published_record_is_kept_or_listed(tmp_path):
    records = samples()
    result = import_dreambench(write(tmp_path, records), tmp_path / "pack", constructs={V1_SEQ: "C3"})
    manifest = json.loads((tmp_path / "pack" / "manifest.json").read_text())
    seqs = {s["seq_id"]: s for s in manifest["sequences"]}
    listed = {(e["field"], seq_id) for e in result.fields_not_used for seq_id in e["records"]}
    assert manifest["source"]["fields_not_used"] == list(result.fields_not_used)
    for record in records:
        seq = seqs[record["seq_id"]]
        for key, value in record.items():
            if key in VERBATIM:
                assert seq[key] == value, key  # the v2 validation fields, as published
            elif key in CARRIED:
                assert CARRIED[key] is None or CARRIED[key] in seq, key
            else:
                assert (key, record["seq_id"]) in listed, key
        for session in record["sessions"]:
            for key in session:
                assert key in {"session_index", "start_state", "started_from_previous_session", "instruction",
                               "visible_files", "inject_after", "oracle_id"} \
                    or (f"sessions[].{key}", record["seq_id"]) in listed, key
        for j, event in enumerate(record["events"]):
            assert seq["events"][j]["scope"] == event["scope"]  # repo and sequence_id too
    assert seqs[V2_SEQ]["seq_type"] == "flaky-test" and seqs[V2_SEQ]["family"] == "flaky-test / spurious-lesson"
    # the v2 record's per-session clean_start_s3 is the one field the pack does not take, and it says why
    assert [(e["field"], e["records"]) for e in result.fields_not_used] == [("sessions[].clean_start_s3", [V2_SEQ])]
    assert "record-level clean_start_s3" in result.fields_not_used[0]["why"]


def test_a_field_the_importer_does_not_know_is_listed_not_dropped(tmp_path):
    records = samples()
    records[0]["difficulty"] = "hard"
    records[1]["events"][0]["scope"]["lines"] = [3, 9]
    result = import_dreambench(write(tmp_path, records), tmp_path / "pack", constructs={V1_SEQ: "C3"})
    got = {e["field"]: (e["records"], e["why"]) for e in result.fields_not_used}
    assert got["difficulty"][0] == [V1_SEQ] and "not a field this importer knows" in got["difficulty"][1]
    assert got["events[].scope.lines"][0] == [V2_SEQ]


def test_the_cli_prints_the_fields_it_does_not_use(tmp_path, cli):
    require_shared(SAMPLES)
    result = cli("import", "dreambench", str(SAMPLES), str(tmp_path / "pack"), "--construct", f"{V1_SEQ}=C3")
    assert result.returncode == 0, result.stderr
    assert "source.fields_not_used" in result.stdout
    assert f"sessions[].clean_start_s3 (1 record: {V2_SEQ}): the record-level clean_start_s3" in result.stdout


@pytest.mark.parametrize("command", [("validate",), ("run", "--agent", "scripted:null")])
def test_validate_and_run_of_an_incomplete_import_name_supply_md_and_every_missing_part(tmp_path, cli_inproc,
                                                                                       command):
    out = tmp_path / "pack"
    result = import_dreambench(require_shared(SAMPLES), out, constructs={V1_SEQ: "C3"})
    assert len(result.missing) == 14
    cli = cli_inproc(*command[:1], str(out), *command[1:])
    assert cli.returncode == 2, cli.stderr
    message = " ".join(cli.stderr.split())  # click may wrap the one line
    assert f"14 of the 14 parts listed in {out / 'SUPPLY.md'} are still missing" in message
    assert all(rel in message for rel in result.missing)


def test_a_supplied_part_drops_off_the_list_and_a_complete_supply_loads(tmp_path):
    records = samples()
    out = tmp_path / "pack"
    result = import_dreambench(write(tmp_path, records), out, constructs={V1_SEQ: "C3"})
    repos, hidden = _supplied(tmp_path, records)
    shutil.copytree(repos / "configly", out / "repos" / "configly", ignore=shutil.ignore_patterns(".git"))
    with pytest.raises(PackError) as err:
        load_pack(out)
    assert "13 of the 14 parts" in str(err.value) and "repos/configly/" not in str(err.value)
    shutil.copytree(repos / "todolite", out / "repos" / "todolite", ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(hidden, out / "hidden")
    assert [s.seq_id for s in load_pack(out).sequences] == [V1_SEQ, V2_SEQ]  # SUPPLY.md stays; nothing missing
    assert len(result.missing) == 14
