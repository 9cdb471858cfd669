"""The coding-agent A/B pack, imported and run through the real CLI (bwrap sandbox, chDB)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from tests.conftest import SHARED, require_shared
from tests.packs.test_remem_import import LATER

pytestmark = pytest.mark.integration

SAMPLE = SHARED / "external" / "remem-coding-bench" / "tasks-v1-5tasks.json"

FIXES = {
    "retention-window-memory-policy": ("memory_demo/retention.py",
                                       'WINDOWS = {"audit_log": 365, "ephemeral": 7, "disabled": 0}\n\n\n'
                                       'def retention_days(policy_name):\n    return WINDOWS.get(policy_name, 30)\n'),
    "slug-normalizer-contract": ("memory_demo/slug.py",
                                 'import re\n\n\ndef normalize_slug(value):\n'
                                 '    slug = re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-")\n'
                                 '    return slug[:32].rstrip("-") or "untitled"\n'),
    "context-visibility-policy": ("memory_demo/visibility.py",
                                  'def visible_context_sections(sections):\n'
                                  '    return [s for s in sections if s.get("status") not in ("suppressed", "terminal")]\n'),
    "session-budget-footer": ("memory_demo/session.py",
                              'def render_session_footer(title, budget_label):\n'
                              '    if not str(budget_label or "").strip():\n        return title\n'
                              '    return f"{title}\\nBudget: {budget_label}"\n'),
}


def diff(files: dict[str, str], path: str, new: str) -> str:
    return "".join(difflib.unified_diff(files.get(path, "").splitlines(True), new.splitlines(True),
                                        f"a/{path}", f"b/{path}"))


def failure_counts_in_warehouse(cli, run_set: str) -> dict[str, dict[str, int]]:
    out = cli("sql", "SELECT condition, failure_reason, count() FROM failures "
                     f"WHERE run_set = '{run_set}' AND scored AND NOT resolved AND NOT excluded "
                     "GROUP BY condition, failure_reason", check=True).stdout
    counts: dict[str, dict[str, int]] = {}
    for line in out.strip().splitlines():
        condition, reason, n = line.split("\t")
        counts.setdefault(condition, {})[reason] = int(n)
    return counts


def report(home: Path, run_set: str) -> dict[str, dict]:
    data = json.loads((home / "runs" / run_set / "report.json").read_text())
    return {c["condition"]: c for c in data["conditions"]}


def test_sample_pack_runs_and_scores_predictions(cli, home, tmp_path):
    require_shared(SAMPLE)
    pack = tmp_path / "pack"
    cli("import", "remem", str(SAMPLE), str(pack), check=True)

    cli("run", str(pack), "--agent", "scripted:null", "--conditions", "no_memory,B5", "--seeds", "1",
        "--run-set", "null", check=True)
    null = report(home, "null")
    for condition in ("no_memory", "B5"):
        assert null[condition]["passed"] == 0
        assert null[condition]["failure_counts"] == {"test_failure": 5}
        assert null[condition]["memory_failure_counts"] == {}
    assert failure_counts_in_warehouse(cli, "null") == {c: null[c]["failure_counts"] for c in null}
    # imported packs are scored by their commands, tests and code in one process: the report says so
    full = json.loads((home / "runs" / "null" / "report.json").read_text())
    assert [(x["suite"], x["oracle_isolation"]) for x in full["suites"]] == [(full["suite"], "in_process")]
    assert "in_process" in (home / "runs" / "null" / "report.html").read_text()

    files = json.loads(SAMPLE.read_text())["repo"]["files"]
    ticket = ("import re\n\n\ndef normalize_ticket_key(value):\n"
              "    parts = [p for p in re.split(r\"[\\s_#-]+\", str(value)) if p]\n"
              "    return parts[0].upper() + \"-\" + parts[1] if len(parts) > 1 else \"MEM-\" + parts[0]\n")
    predictions = [{"unit": task, "condition": "B5", "seed": 1, "patch": diff(files, path, new),
                    "cited_memory_ids": [f"B5:{task}:m0"], "usage": {"input_tokens": 100, "output_tokens": 20}}
                   for task, (path, new) in FIXES.items() if task != "session-budget-footer"]
    # a correct fix that also edits a path outside allowed_paths
    predictions.append({"unit": "ticket-key-memory-convention", "condition": "B5", "seed": 1,
                        "patch": diff(files, "memory_demo/tickets.py", ticket) + diff(files, "README.md", "# Changed\n")})
    # a wrong fix citing a memory id that was never injected
    predictions.append({"unit": "session-budget-footer", "condition": "B5", "seed": 1, "cited_memory_ids": ["B5:ghost"],
                        "patch": diff(files, "memory_demo/session.py", "def render_session_footer(title, b):\n"
                                                                      "    return title\n")})
    # the same correct fixes under no_memory, to see both conditions in one report
    predictions += [{"unit": task, "condition": "no_memory", "seed": 1, "patch": diff(files, path, new)}
                    for task, (path, new) in FIXES.items()]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    cli("score", str(pack), "--predictions", str(path), "--run-set", "preds", check=True)

    scored = report(home, "preds")
    assert scored["no_memory"]["passed"] == 4 and scored["no_memory"]["failure_counts"] == {}
    assert scored["B5"]["passed"] == 3
    assert scored["B5"]["failure_counts"] == {"agent_hallucinated_memory": 1, "wrong_file_modified": 1}
    assert scored["B5"]["memory_failure_counts"] == {"agent_hallucinated_memory": 1}
    assert scored["no_memory"]["memory_contract"]["status_counts"] == {"not_applicable": 4}
    assert failure_counts_in_warehouse(cli, "preds") == {
        c: scored[c]["failure_counts"] for c in scored if scored[c]["failure_counts"]}
    rules = cli("sql", "SELECT task, rule FROM failures WHERE run_set = 'preds' AND rule IS NOT NULL ORDER BY task",
                check=True).stdout.split()
    assert rules == ["session-budget-footer", "cited_never_injected", "ticket-key-memory-convention",
                     "path_rule_violated"]


def test_correct_patch_citing_a_stale_memory_is_resolved_and_its_contract_records_it(cli, home, tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    pack = tmp_path / "pack"
    cli("import", "remem", str(source), str(pack), check=True)
    files = LATER["repo"]["files"]
    patch = diff(files, "api/client.py", "def endpoint():\n    return '/v2/items'\n")
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"unit": "stale-api", "condition": "B5", "seed": 1, "patch": patch,
                                "cited_memory_ids": ["B5:new:m0", "B5:old:m0"]}) + "\n")
    cli("score", str(pack), "--predictions", str(path), "--run-set", "stale", check=True)
    scored = report(home, "stale")["B5"]
    assert scored["passed"] == 1 and scored["failure_counts"] == {}
    assert scored["memory_contract"]["runtime_failure_counts"] == {"stale_memory_used": 1}
    row = cli("sql", "SELECT memory_contract_status, stale_used_count, citation_recall, memory_hurt, resolved "
                     "FROM memory_contracts WHERE run_set = 'stale' AND scored", check=True).stdout.split()
    assert row == ["failed", "1", "0.5", "true", "true"]
