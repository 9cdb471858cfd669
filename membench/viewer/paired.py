"""The paired view: one (trap, seed) under two or more conditions, side by side (docs/viewer.md).

Built from the runs' trajectories as the unit page reads them (`LiveRunSet.run_detail`), plus what
only a comparison needs: each session's memory items (read, admitted, cited, with the content a
`MemoryWrite` of the run gave them) and a unified diff between the conditions' scored patches.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from membench.reports.conventions import condition_order
from membench.viewer.state import LiveRunSet

MAX_CONDITIONS = 6
DIFF_INPUT_LIMIT = 1 << 20  # a patch larger than this is not diffed against another (difflib is quadratic)


def _text(value: Any) -> str:
    return (value.get("text") or "") if isinstance(value, dict) else (value or "")


def memory_items(run: dict[str, Any], session: dict[str, Any]) -> list[dict[str, Any]]:
    """Every memory a session's reads offered: admitted or not, cited or not, and its content when a
    MemoryWrite of the run recorded it."""
    content: dict[str, str] = {}
    for s in run["sessions"]:
        for e in s["events"]:
            if e["kind"] == "MemoryWrite":
                content[e["payload"]["memory_id"]] = _text(e["payload"].get("content"))
    cited: set[str] = set((session.get("contract") or {}).get("cited_memory_ids") or [])
    items: dict[str, dict[str, Any]] = {}
    for e in session["events"]:
        p = e["payload"]
        if e["kind"] == "MemoryCitation":
            cited.update(p.get("memory_ids") or [])
        elif e["kind"] == "MemoryRead":
            admitted = set(p.get("admitted_ids") or [])
            for memory_id in p.get("candidates") or []:
                item = items.setdefault(memory_id, {"memory_id": memory_id, "admitted": False, "cited": False,
                                                    "content": content.get(memory_id)})
                item["admitted"] = item["admitted"] or memory_id in admitted
    for memory_id, item in items.items():
        item["cited"] = memory_id in cited
    return list(items.values())


def scored_patch(run: dict[str, Any], blob: Any) -> str | None:
    """The production diff of the run's scored session (its last PatchProduced), from the event or,
    when it was too large to sit there, from the run set's blob store (None when neither has it)."""
    for session in reversed(run["sessions"]):
        if not (session.get("started") or {}).get("scored"):
            continue
        for e in reversed(session["events"]):
            if e["kind"] == "PatchProduced":
                p = e["payload"]
                if p.get("production_diff") is not None:
                    return p["production_diff"]
                digest = p.get("production_diff_sha256")
                data = blob(digest) if digest else None
                return data.decode("utf-8", "replace") if data is not None else None
        return ""  # the scored session produced no patch
    return None


def patch_diff(name_a: str, a: str, name_b: str, b: str) -> dict[str, Any]:
    """The unified diff from condition NAME_A's scored patch A to NAME_B's B."""
    if len(a) > DIFF_INPUT_LIMIT or len(b) > DIFF_INPUT_LIMIT:
        return {"a": name_a, "b": name_b, "identical": a == b, "diff": None, "too_large": True}
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), f"{name_a} patch", f"{name_b} patch", lineterm="")
    return {"a": name_a, "b": name_b, "identical": a == b, "diff": "\n".join(lines), "too_large": False}


def pair_view(live: LiveRunSet, blobs_dir: Path, task: str, seed: str,
              conditions: list[str] | None) -> dict[str, Any] | None:
    """The paired view of (TASK, SEED): one column per condition asked for (all that ran it, when none
    is named), in ladder order as named; None when no condition ran that trap and seed."""
    from membench.bus.blobs import get_blob

    units = live.unit_ids(task, seed)
    if not units:
        return None
    available = sorted(units, key=condition_order)
    chosen = [c for c in (conditions or available)][:MAX_CONDITIONS]
    columns: list[dict[str, Any]] = []
    patches: dict[str, str | None] = {}
    for condition in chosen:
        unit_id = units.get(condition)
        run_id = live.cell_run_id(unit_id) if unit_id else None
        run = live.run_detail(run_id) if run_id else None
        if run is None:
            columns.append({"condition": condition, "unit_id": None, "run": None})
            continue
        for session in run["sessions"]:
            session["memory_items"] = memory_items(run, session)
        patches[condition] = scored_patch(run, lambda digest: get_blob(blobs_dir, digest))
        columns.append({"condition": condition, "unit_id": unit_id, "run": run})
    shown = [c for c in chosen if patches.get(c) is not None]
    diffs = [patch_diff(shown[0], patches[shown[0]] or "", other, patches[other] or "") for other in shown[1:]]
    return {"run_set": live.run_set, "task": task, "seed": seed, "available": available, "conditions": chosen,
            "columns": columns, "patch_diffs": diffs}
