"""Importing the coding-agent A/B benchmark's tasks.json (both version-1 shapes) as a native pack."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from membench.packs.importers.remem import import_remem
from membench.runner.labels import sequence_labels
from membench.formats.fields import MAX_INPUT_BYTES
from membench.formats.pack_format import PackError, load_pack
from tests.conftest import SHARED, require_shared

SAMPLE = SHARED / "external" / "remem-coding-bench" / "tasks-v1-5tasks.json"

# A later-shape pack (history episodes, raw events, gold memory, forbidden paths), with an
# unknown field at each level that the importer must ignore.
LATER = {
    "version": 1, "future_top": True,
    "repo": {"kind": "inline_python", "base_commit": "abc", "fixture_revision": "r1", "files": {
        "api/__init__.py": "", "api/client.py": "def endpoint():\n    return '/v1/items'\n", "README.md": "x\n"}},
    "curated_context": "# Curated\n- The current API is v2.\n",
    "tasks": [{
        "id": "stale-api", "category": "stale_memory_avoidance", "smoke": True, "future_task": 1,
        "prompt": "Point the client at the current API.", "timeout_ms": 1000,
        "allowed_paths": ["api"], "forbidden_paths": ["api/__init__.py"],
        "score": {"commands": [["python3", "-m", "unittest", "tests.test_api_hidden"]],
                  "hidden_files": {"tests/__init__.py": "",
                                   "tests/test_api_hidden.py": "import unittest\nfrom api.client import endpoint\n\n"
                                   "class T(unittest.TestCase):\n    def test_v2(self):\n"
                                   "        self.assertEqual(endpoint(), '/v2/items')\n"},
                  "required_patch_patterns": ["/v2/"], "forbidden_patch_patterns": ["/v1/"]},
        "history_episodes": [
            {"episode_id": "old", "reference_time_epoch": 1, "summary": "We used the v1 API.",
             "expected_memory_facts": ["fact:api_v1_current"], "future_episode": "x",
             "memories": [{"title": "API", "text": "The current API is v1.", "memory_type": "decision",
                           "topic_key": "api", "files": ["api/client.py"]}]},
            {"episode_id": "new", "reference_time_epoch": 2, "summary": "Migrated to v2.",
             "expected_memory_facts": ["fact:api_v2_current"],
             "raw_events": [{"event_id": "new:e1", "timestamp_epoch": 2, "role": "user",
                             "sanitized_content": "v1 is retired, use /v2/", "host_boundary": "x"}],
             "memories": [{"title": "API", "text": "The current API is v2 (/v2/items).", "memory_type": "decision",
                           "files": ["api/client.py"]}]}],
        "gold_memory": {"required_facts": ["fact:api_v2_current"], "forbidden_facts": ["fact:api_v1_current"],
                        "supporting_event_ids": ["new:e1"]},
    }],
}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_sample_pack_imports_as_history_then_task(tmp_path):
    require_shared(SAMPLE)
    pack = load_pack(import_remem(SAMPLE, tmp_path / "pack"))
    assert len(pack.sequences) == 5 and pack.conditions == ("no_memory", "remem", "curated_file") and pack.resolution_policy == "agent_must_finish"
    assert pack.curated_context.startswith("# Curated Project Memory")
    seq = pack.sequence("ticket-key-memory-convention")
    history, task = seq.sessions
    assert (history.mode, task.mode) == ("history", "task") and seq.construct == "C1"
    assert [e.after_session for e in seq.events] == [1] and "PREFIX-digits" in seq.events[0].content
    assert task.scoring.commands == (("python3", "-m", "unittest", "tests.test_ticket_hidden"),)
    assert task.scoring.allowed_paths == ("memory_demo/tickets.py", "tests")
    assert (pack.hidden_files_dir(seq, task) / "tests/test_ticket_hidden.py").is_file()
    assert (pack.repos["fixture"] / "memory_demo/tickets.py").is_file()
    assert not seq.gold_labels  # the early shape has no gold memory


def test_later_shape_maps_episodes_gold_and_rules(tmp_path):
    pack = load_pack(import_remem(write(tmp_path, LATER), tmp_path / "pack"))
    seq = pack.sequence("stale-api")
    assert [s.mode for s in seq.sessions] == ["history", "history", "task"]
    assert (seq.construct, seq.family) == ("C3", "stale_memory_avoidance")
    assert [(e.event_id, e.after_session) for e in seq.events] == [("old:m0", 1), ("new:e1", 2), ("new:m0", 2)]
    rules = seq.scored_session.scoring
    assert rules.forbidden_paths == ("api/__init__.py",) and rules.forbidden_patch_patterns == ("/v1/",)
    labels = {label["label_type"]: label for label in sequence_labels(seq)}
    assert labels["required"]["event_ids"] == ["new:e1", "new:m0"]
    assert labels["forbidden"]["event_ids"] == ["old:m0"]
    assert labels["task_scope"]["fact_ids"] == ["api"] and labels["required"]["active_session"] == 3
    # remem's memories as its agent cites them (memory:#1, #2 in seeding order), each with its pack event
    assert seq.source_memories == {"remem": {"1": "old:m0", "2": "new:m0"}}


@pytest.mark.parametrize("value,needle", [
    ({"B9": {"1": "old:m0"}}, "'source_memories.B9' names a condition the pack does not declare"),
    ({"remem": {"1": "nowhere"}}, "'source_memories.remem.1' must name an event of the sequence"),
    ({"remem": ["old:m0"]}, "'source_memories.remem' must be an object"),
])
def test_a_bad_source_memories_declaration_is_refused_naming_the_field(tmp_path, value, needle):
    root = import_remem(write(tmp_path, LATER), tmp_path / "pack")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["sequences"][0]["source_memories"] = value
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PackError, match=re.escape(needle)):
        load_pack(root)


@pytest.mark.parametrize("path,field", [
    (("tasks", 0, "prompt"), "prompt"),
    (("tasks", 0, "score", "commands"), "commands"),
    (("tasks", 0, "history_episodes", 1, "episode_id"), "episode_id"),
    (("tasks", 0, "history_episodes", 0, "memories", 0, "text"), "text"),
])
def test_missing_required_field_names_task_and_field(tmp_path, path, field):
    data = copy.deepcopy(LATER)
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    with pytest.raises(PackError) as err:
        import_remem(write(tmp_path, data), tmp_path / "pack")
    assert "task 'stale-api'" in str(err.value) and f"'{field}'" in str(err.value)
    assert not (tmp_path / "pack").exists()


def test_unsafe_paths_and_wrong_version_are_refused(tmp_path):
    data = copy.deepcopy(LATER)
    data["tasks"][0]["score"]["hidden_files"]["../escape.py"] = ""
    with pytest.raises(PackError, match="unsafe path '../escape.py'"):
        import_remem(write(tmp_path, data), tmp_path / "pack")
    with pytest.raises(PackError, match="field 'version' must be 1"):
        import_remem(write(tmp_path, {**LATER, "version": 2}), tmp_path / "pack")


# -- hostile tasks.json ------------------------------------------------------------


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_non_utf8_tasks_json_names_the_byte_offset_and_writes_nothing(tmp_path):
    text = json.dumps(LATER, indent=1).encode()
    offset = text.index(b"Point the client")
    source = tmp_path / "tasks.json"
    source.write_bytes(text[:offset] + b"\xc3\x28" + text[offset:])  # 0xc3 must start a 2-byte sequence
    line = text[:offset].count(b"\n") + 1
    with pytest.raises(PackError) as err:
        import_remem(source, tmp_path / "deep" / "pack")
    assert str(err.value) == f"{source}: not UTF-8: invalid byte 0xc3 at byte offset {offset} (line {line})"
    assert entries(tmp_path) == ["tasks.json"]


def test_tasks_json_over_the_limit_is_refused(tmp_path):
    source = tmp_path / "tasks.json"
    with source.open("wb") as handle:
        handle.truncate(MAX_INPUT_BYTES + 1)
    with pytest.raises(PackError, match=r"tasks\.json: larger than the 16 MiB input limit"):
        import_remem(source, tmp_path / "pack")
    assert entries(tmp_path) == ["tasks.json"]


@pytest.mark.parametrize("mutate,fragment", [
    (lambda d: d["repo"]["files"].update({"api/client.py/inner.py": "x\n"}),
     "field 'files.api/client.py/inner.py' cannot be written as a file"),
    (lambda d: d["repo"]["files"].update({"/etc/cron.d/x": "x\n"}),
     "field 'files' holds an unsafe path '/etc/cron.d/x'"),
    (lambda d: d["tasks"][0]["history_episodes"][0]["memories"][0].update(files=["../../.ssh/id_rsa"]),
     "episode 'old': memories[0]: field 'files' holds an unsafe path '../../.ssh/id_rsa'"),
    (lambda d: d["tasks"][0].update(id="../escape"), "field 'id' must be a plain name"),
])
def test_a_failed_import_leaves_nothing_half_written(tmp_path, mutate, fragment):
    data = copy.deepcopy(LATER)
    mutate(data)
    source = write(tmp_path, data)
    with pytest.raises(PackError, match=re.escape(fragment)):
        import_remem(source, tmp_path / "out" / "pack")
    assert entries(tmp_path) == ["tasks.json"]  # no pack, no staging directory, no parent made for it


def test_an_existing_pack_is_never_overwritten(tmp_path):
    out = tmp_path / "pack"
    import_remem(write(tmp_path, LATER), out)
    manifest = (out / "manifest.json").read_text()
    with pytest.raises(PackError, match="output directory exists and is not empty"):
        import_remem(write(tmp_path, LATER), out)
    assert (out / "manifest.json").read_text() == manifest and entries(tmp_path) == ["pack", "tasks.json"]


def test_an_invalid_pack_name_is_refused_before_writing(tmp_path):
    with pytest.raises(PackError, match="pack name '../x' .--name. must be a plain name"):
        import_remem(write(tmp_path, LATER), tmp_path / "pack", name="../x")
    assert entries(tmp_path) == ["tasks.json"]
