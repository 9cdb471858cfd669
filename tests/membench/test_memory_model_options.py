"""`membench run`'s checks of the model-driven memory conditions and of the paper's ablations that
cannot be defined here: each is a usage error (exit 2, one line naming the option) before anything
is written."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, needle", [
    (["--conditions", "B0,A4"], "A4 (no counterfactual replay)"),
    (["--conditions", "A11"], "A11 (forced consolidation"),
    (["--conditions", "B0,B3-llm"], "--conditions B3-llm: a model-driven memory policy needs --memory-model"),
    (["--conditions", "B0,B5", "--memory-model", "m"], "--memory-model: no condition of this run is model-driven"),
    (["--conditions", "B0,DF-llm", "--memory-model", "m"], "reached through the model gateway"),
    (["--conditions", "B0,DF-llm", "--memory-model", "m", "--model-replay", "R", "--run-set", "R",
      "--bus", "kafka://127.0.0.1:1"], "--model-replay R: a run set cannot replay itself"),
])
def test_memory_model_usage_errors_exit_2_before_anything_runs(cli_inproc, home, args, needle) -> None:
    proc = cli_inproc("run", "smoke", "--seeds", "1", *args)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
