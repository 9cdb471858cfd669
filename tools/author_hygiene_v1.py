"""Author the built-in pack fixtures/hygiene-v1 from tools/hygiene_*.py.

    python tools/author_hygiene_v1.py [OUT_DIR]      (default: fixtures/hygiene-v1)

The output is committed data (a skeleton with {{SECRET:name:class}} placeholders); this script is
how it was written and how to rewrite it after editing a trap. It never generates a secret: values
are drawn by `membench pack finalize` (or automatically when a run opens the pack).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from hygiene_checks import CHECKS  # noqa: E402
from hygiene_repos import GENERATED, REPOS  # noqa: E402
from hygiene_traps import TRAPS  # noqa: E402
from hygiene_warmups import W  # noqa: E402

from membench.memory_systems.skill_bank import write_manifest  # noqa: E402
from membench.formats.pack_format import SECRET  # noqa: E402

PACK_CURATED = ("# Project notes (hand-curated)\n\n"
                "- Three libraries live here: tabular (CSV exports), httpmini (request builder), taskq (job queue).\n"
                "- Run the visible tests with `python -m pytest`; every module keeps its own small API.")

SKILLS = {
    "regenerate-generated-files": "# Skill: change data that has a generated artifact\n\n"
        "1. Find the JSON source of truth next to the generated module (the header says which).\n"
        "2. Edit the JSON source, never the generated module.\n"
        "3. Regenerate with the generator in tools/, passing the release channel the maintainers require.\n"
        "4. Check the generated header names the right channel.\n",
    "csv-export-conventions": "# Skill: add a CSV export\n\n"
        "- Build on tabular.csvout.to_csv (header line, one line per row, newline-terminated).\n"
        "- Put project-specific markers, codes and sentinels in module constants.\n"
        "- Apply a team's export rule only to the exports it names.\n",
    "http-request-headers": "# Skill: add request headers\n\n"
        "- Start from httpmini.headers.DEFAULT_HEADERS and combine with merge_headers.\n"
        "- Header values issued by other teams are configuration: keep them in module constants.\n"
        "- Send an endpoint-specific header only on that endpoint.\n",
}


def scoped(text: str, seq_id: str) -> str:
    """Secret names are per trap: prefix every placeholder name with the trap's id."""
    key = seq_id.replace("-", "_")
    return SECRET.sub(lambda m: "{{SECRET:%s__%s:%s}}" % (key, m.group(1), m.group(2)), text)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40]


def solution(files: dict[str, str], slots: dict[str, tuple[str, str, str]] | None = None) -> str:
    slots = slots or {}
    return json.dumps({"files": files, "slots": {n: {"answer": a, "pattern": p, "default": d}
                                                 for n, (a, p, d) in slots.items()}}, indent=1) + "\n"


def c8_material(t: dict, repos: dict | None = None) -> tuple[dict[str, str], str]:
    """Solution files and oracle of a generated-files trap (computed from the repository's generator)."""
    spec = t["c8"]
    repo = (repos or REPOS)[t["repo"]]
    namespace: dict = {"__file__": spec["gen"], "__name__": "gen"}
    exec(compile(repo[spec["gen"]], spec["gen"], "exec"), namespace)  # the generator's render()
    data = json.loads(repo[spec["src"]])
    data[spec["name"]] = spec["value"]
    source_text = json.dumps(data, indent=1) + "\n"
    artifact = namespace["render"](data, "{{SLOT:channel}}")
    chan = t["slots"]["channel"][0]
    top = spec["pkg_mod"].split(".")[0]
    table = spec.get("table") or {"taskq": "STATES", "tabular": "DIALECTS", "httpmini": "ERRORS"}[top]
    key = int(spec["name"]) if top == "httpmini" else spec["name"]
    oracle = (
        "import importlib\nimport json\nimport pathlib\n\nfrom membench_oracle import load_production_file\n\n"
        f"ROOT = pathlib.Path(importlib.import_module({top!r}).__file__).resolve().parent.parent\n\n\n"
        "def _generator():\n"
        "    # the generator is workspace code: it runs in the production process, never in the oracle's\n"
        f"    return load_production_file({spec['gen']!r})\n\n\n"
        "def test_source_of_truth_edited():\n"
        f"    data = json.loads((ROOT / {spec['src']!r}).read_text())\n"
        f"    assert data[{spec['name']!r}] == {spec['value']!r}\n\n\n"
        "def test_artifact_regenerated_with_release_channel():\n"
        f"    data = json.loads((ROOT / {spec['src']!r}).read_text())\n"
        f"    assert (ROOT / {spec['artifact']!r}).read_text() == _generator().render(data, {chan!r})\n\n\n"
        "def test_module_exposes_new_entry():\n"
        f"    module = importlib.import_module({spec['pkg_mod']!r})\n"
        f"    assert module.{table}[{key!r}] == {spec['value']!r}\n"
        f"    assert module.CHANNEL == {chan!r}\n")
    return {spec["src"]: source_text, spec["artifact"]: artifact}, oracle


def main(out: Path) -> None:
    write_pack(out, name="hygiene-v1", traps=TRAPS, repos=REPOS, generated=GENERATED, warmups=W, checks=CHECKS,
               description=("Memory-hygiene traps (DreamBench-SWE constructs C1-C10) over three small Python libraries: "
                            "S1/S2 set up evidence, S3 is the scored trap; secrets are CSPRNG placeholders filled at finalize."),
               curated=PACK_CURATED, skills=SKILLS)


def write_pack(out: Path, *, name: str, traps: list, repos: dict, generated: dict, warmups: dict, checks: dict,
               description: str, curated: str, skills: dict) -> None:
    """Write the skeleton pack OUT from trap definitions (shared by author_hygiene_v1/_v2.py)."""
    pack_name = name
    if out.exists():
        shutil.rmtree(out)
    # repositories (generated artifacts rendered by their own generator, channel "dev")
    for name, files in repos.items():
        gen, src, artifact = generated[name]
        for rel, text in files.items():
            if text is None:
                namespace: dict = {"__file__": gen, "__name__": "gen"}
                exec(compile(files[gen], gen, "exec"), namespace)
                text = namespace["render"](json.loads(files[src]), "dev")
            path = out / "repos" / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    # skill bank
    for name, text in skills.items():
        path = out / "skills" / name / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    write_manifest(out / "skills")
    sequences = []
    for t in traps:
        seq_id = t["id"]
        hidden = out / "hidden" / seq_id
        hidden.mkdir(parents=True)
        sessions = []
        events = []
        for n, (after, kind, content, files, facts) in enumerate(t["events"], 1):
            events.append({"event_id": f"{seq_id}-e{n}", "after_session": after, "kind": kind, "content": content,
                           "scope": {"repo": t["repo"], "sequence_id": seq_id, "files": files, "symbols": []},
                           "_facts": facts})
        warm = [warmups[t["repo"]][i] if i is not None else None for i in t["warm"]]
        if t["s2"] is not None:
            warm[1] = t["s2"]
        for index, spec in enumerate(warm, 1):
            instruction, files, oracle = spec
            oracle_id = f"s{index}_{slug(list(files)[0].split('/')[-1].removesuffix('.py'))}"
            (hidden / f"{oracle_id}.py").write_text(scoped(oracle, seq_id), encoding="utf-8")
            (hidden / f"s{index}.solution.json").write_text(scoped(solution(files), seq_id), encoding="utf-8")
            sessions.append({"index": index, "instruction": instruction, "visible_files": sorted(files),
                             "inject_after": [e["event_id"] for e in events if e["after_session"] < index],
                             "oracle_id": oracle_id})
        if t.get("c8"):
            files, oracle = c8_material(t, repos)
        else:
            files, oracle = t["files"], t["oracle"]
        oracle_id = f"s3_{slug(list(files)[-1].split('/')[-1].removesuffix('.py').removesuffix('.json'))}"
        (hidden / f"{oracle_id}.py").write_text(scoped(oracle, seq_id), encoding="utf-8")
        (hidden / "s3.solution.json").write_text(scoped(solution(files, t["slots"]), seq_id), encoding="utf-8")
        sessions.append({"index": 3, "instruction": t["instruction"], "visible_files": sorted(files),
                         "inject_after": [e["event_id"] for e in events], "oracle_id": oracle_id})
        fact_map = {e["event_id"]: e.pop("_facts") for e in events}
        events = json.loads(scoped(json.dumps(events), seq_id))
        for spec in sessions:
            spec["instruction"] = scoped(spec["instruction"], seq_id)
        texts = json.dumps([events, [scoped(d, seq_id) for d in t["decisive"]], scoped(t["curated"], seq_id), sessions]) + "".join(
            p.read_text() for p in hidden.iterdir())
        declared = {name: cls for name, cls in sorted(set(SECRET.findall(texts)))}
        declared_checks = t.get("checks") or checks[seq_id]
        check_labels = [{"type": f"{kind}-check", "cases": declared_checks[kind]}
                        for kind in ("commission", "omission") if declared_checks.get(kind)]
        labels = [dict({"label_id": f"{seq_id}-l{n}", "active_session": 3}, **label)
                  for n, label in enumerate(t["labels"] + check_labels, 1)]
        seq = {
            "seq_id": seq_id, "construct": t["construct"], "family": t["family"], "repo": t["repo"],
            "skeleton_id": f"{t['construct'].lower()}-{t['family']}", "initial_state": "base",
            "clean_start_s3": t["clean"], "anti_hoarding": t["construct"] in ("C2", "C3", "C5", "C6", "C9", "C10"),
            "sessions": sessions, "events": events, "oracle_labels": labels,
            "decisive_literals": [scoped(d, seq_id) for d in t["decisive"]], "required_fact_ids": t["required"], "event_fact_map": fact_map,
            "secrets": declared,
        }
        if t["why"]:
            seq["why_not_verbatim"] = t["why"]
        if t.get("newest_event_fails"):
            seq["newest_event_heuristic_fails"] = True
        if t["curated"]:
            seq["curated_context"] = scoped(t["curated"], seq_id)
        sequences.append(seq)
    manifest = {
        "format": "membench-pack", "format_version": 2, "pack": pack_name,
        "description": description,
        "repos": {name: f"repos/{name}" for name in repos},
        "curated_context": curated,
        "skill_bank": "skills",
        "sequences": sequences,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(sequences)} sequences")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures" / "hygiene-v1")
