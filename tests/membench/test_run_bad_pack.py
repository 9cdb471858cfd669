"""`membench run` on a pack that loads but cannot be finalized (a secret placeholder outside any
trap's own material) exits 2 naming the file, before anything runs — it ended in a traceback and
exit 1 (found while building the user-path matrix)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from membench.cli import main
from membench.formats.pack_format import load_pack

HYGIENE = Path(__file__).resolve().parents[2] / "fixtures" / "hygiene-v1"


def test_a_pack_that_cannot_be_finalized_is_a_usage_error(tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(HYGIENE, pack)
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["sequences"] = manifest["sequences"][:1]  # the other traps' hidden material stays behind
    (pack / "manifest.json").write_text(json.dumps(manifest))
    load_pack(pack)  # the control: the skeleton itself loads; finalizing is what refuses it
    result = CliRunner().invoke(main, ["run", str(pack), "--agent", "scripted:null", "--conditions", "B0",
                                       "--seeds", "1"], env={"MEMBENCH_HOME": str(tmp_path / "home")})
    assert result.exit_code == 2, result.output
    assert "placeholder" in result.output and "s3.solution.json" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "home" / "runs").exists()
