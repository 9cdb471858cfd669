"""docs/authoring.md's minimal example pack is real: its file blocks, written out as they stand in the
guide, load, finalize (secrets drawn, slot patterns checked against every secret class shape) and
pass every static gate of `membench validate`. Static only (no sandbox): cheap, and enough to keep
the guide from drifting from the loaders and gates."""

from __future__ import annotations

import json
import re
from pathlib import Path

from membench.packs.finalize import finalize_pack
from membench.packs.validate import STATIC_GATES, static_gates
from membench.sandbox.workspace import snapshot
from membench.formats.pack_format import MANIFEST_KEYS, SEQUENCE_KEYS, SESSION_KEYS, load_pack

GUIDE = Path(__file__).parents[2] / "docs" / "authoring.md"
BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.S | re.M)


def write_example(root: Path) -> Path:
    blocks = BLOCK.findall(GUIDE.read_text(encoding="utf-8"))
    assert {"manifest.json", "hidden/tiny-tag-prefix/s2_tag.py"} <= {path for path, _ in blocks}
    for rel, text in blocks:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_the_guides_example_pack_finalizes_and_passes_every_static_gate(tmp_path):
    skeleton = write_example(tmp_path / "tiny")
    assert load_pack(skeleton).name == "tiny"
    values: dict[str, dict[str, str]] = {}
    provenance = finalize_pack(skeleton, tmp_path / "final", reveal=values)
    assert set(values["tiny-tag-prefix"]) == {"prefix"}
    pack = load_pack(tmp_path / "final")
    seq = pack.sequence("tiny-tag-prefix")
    gates = static_gates(pack, seq, provenance, snapshot(pack.repos["app"])).gates
    assert set(gates) == set(STATIC_GATES) - {"no_single_event"}  # C1 has no single-event rule
    assert all(g["passed"] for g in gates.values()), gates
    # the reference solution renders the drawn secret where the oracle expects it
    reference = pack.solution(seq, seq.scored_session).reference()["app/tags.py"]
    assert f't{values["tiny-tag-prefix"]["prefix"]}-' in reference


def test_every_manifest_key_is_in_the_guide():
    text = GUIDE.read_text(encoding="utf-8")
    missing = sorted(k for k in MANIFEST_KEYS | SEQUENCE_KEYS | SESSION_KEYS if f"`{k}`" not in text and f"`{k}[]`" not in text)
    assert not missing, f"docs/authoring.md does not mention: {missing}"
    # control: the check can fail
    assert "`no_such_key`" not in text


def test_pack_new_writes_the_guides_example(cli_inproc, tmp_path):
    from membench.packs.skeletons import EXAMPLE_PACK

    blocks = dict(BLOCK.findall(GUIDE.read_text(encoding="utf-8")))
    assert blocks == EXAMPLE_PACK  # the guide and `membench pack new` show the same pack
    from click.testing import CliRunner

    from membench.cli import main

    out = tmp_path / "mine"  # `pack new` opens no warehouse, so click's runner in this process is enough
    result = CliRunner().invoke(main, ["pack", "new", "mine", str(out)], env={"MEMBENCH_HOME": str(tmp_path / "h")})
    assert result.exit_code == 0, result.output
    assert load_pack(out).name == "mine" and json.loads((out / "manifest.json").read_text())["pack"] == "mine"
    again = cli_inproc("pack", "new", "mine", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert cli_inproc("pack", "new", "../x", str(tmp_path / "y")).returncode == 2
