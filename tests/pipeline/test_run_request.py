"""The rules of a legal run, as the library call applies them (`membench.pipeline.run_request.run_grid`): an
illegal request raises `RequestInvalid` before anything is written, and `membench run` refuses the
same request with the same message and exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.errors import EXIT_AUDIT_FAILED, EXIT_HARNESS_FAULTS, EXIT_OK, EXIT_STOPPED, run_exit_status
from membench.pipeline.grid_run import RunOutcome
from membench.pipeline.model_gateway import ModelSettings
from membench.pipeline.run_errors import RequestInvalid
from membench.pipeline.run_request import RunRequest, run_grid
from membench.pipeline.settings import Settings
from membench.reports.model import LogVerification
from tests.conftest import run_cli_inprocess

ILLEGAL = [  # (request fields, the same request on the command line, what the refusal names)
    ({"conditions": ("B0", "B9")}, ["--conditions", "B0,B9"], "unknown condition 'B9'"),
    ({"run_set": "../escape"}, ["--run-set", "../escape"], "invalid run-set id '../escape'"),
    ({"compare": (("B0", "B7"),)}, ["--compare", "B0:B7"], "condition 'B7' is not in the run set"),
    ({"agent": "scripted:nope"}, ["--agent", "scripted:nope"], "unknown agent 'scripted:nope'"),
    ({"baseline": "B5", "conditions": ("B0", "B2")}, ["--baseline", "B5", "--conditions", "B0,B2"], "B5"),
    ({"agent": "openai:m"}, ["--agent", "openai:m"], "a model agent needs --model-base-url"),
    ({"conditions": ("B0", "DF-llm")}, ["--conditions", "B0,DF-llm"],
     "a model-driven memory policy needs --memory-model"),
    ({"agent": "openai:m", "model": ModelSettings(base_urls=("ftp://x",))},
     ["--agent", "openai:m", "--model-base-url", "ftp://x"], "expected an http:// or https:// URL"),
    ({"agent": "codex", "model": ModelSettings(base_urls=("http://127.0.0.1:9/v1",), replay="earlier")},
     ["--agent", "codex", "--model-base-url", "http://127.0.0.1:9/v1", "--model-replay", "earlier"],
     "--model-replay and --model-base-url exclude each other"),
    ({"model": ModelSettings(base_urls=("http://127.0.0.1:9/v1",))},
     ["--model-base-url", "http://127.0.0.1:9/v1"], "calls no model"),
]


def _settings(home: Path, bus: str | None = None) -> Settings:
    return Settings(home, bus or f"file://{home / 'runs'}", f"chdb://{home / 'warehouse'}")


@pytest.mark.parametrize("fields, args, named", ILLEGAL, ids=[case[2] for case in ILLEGAL])
def test_an_illegal_request_is_refused_before_anything_is_written(tmp_path: Path, fields, args, named) -> None:
    home = tmp_path / "home"
    with pytest.raises(RequestInvalid) as refused:
        run_grid(RunRequest("smoke", settings=_settings(home), **fields))
    assert named in str(refused.value)
    assert not home.exists()  # no run set, no finalized pack, no warehouse

    cli_home = tmp_path / "cli-home"
    proc = run_cli_inprocess("run", "smoke", *args, home=cli_home)
    assert proc.returncode == 2 and named in proc.stderr, proc.stderr
    assert " ".join(str(refused.value).split()) in " ".join(proc.stderr.split())  # the same message


def test_the_library_call_refuses_a_kafka_bus(tmp_path: Path) -> None:
    with pytest.raises(RequestInvalid, match="embedded bus"):
        run_grid(RunRequest("smoke", settings=_settings(tmp_path, "kafka://127.0.0.1:9092")))


def test_a_legal_request_passes_every_rule(tmp_path: Path, monkeypatch) -> None:
    """Control: the same pack and options, legal, reach the run's first step (the scoring pre-flight,
    stopped here: the run itself is tests/integration/test_library_run.py)."""
    import membench.pipeline.run_environment

    class Reached(Exception):
        pass

    def preflight(pack, sandbox_name, runs_dir, run_set, cases=None):
        raise Reached(run_set)

    monkeypatch.setattr(membench.pipeline.run_environment, "prepare_scoring", preflight)
    with pytest.raises(Reached):
        run_grid(RunRequest("smoke", conditions=("B0", "B5"), compare=(("B0", "B5"),), settings=_settings(tmp_path)))
    # a model agent and a model-driven condition pass them too, the gateway started (its probe off: no upstream)
    model = ModelSettings(base_urls=("http://127.0.0.1:9/v1",), memory_model="mm", preflight=False)
    with pytest.raises(Reached) as reached:
        run_grid(RunRequest("smoke", conditions=("B0", "B3-llm"), agent="openai:m", model=model,
                            settings=_settings(tmp_path)))
    # the default id includes the memory model, as `membench run`'s does (a run set of its own)
    from membench.runner.grid import default_run_set
    from membench.packs.pack_resolver import open_pack

    pack = open_pack("smoke", tmp_path)
    assert str(reached.value) == default_run_set(pack.name, pack.digest, "openai:m+memory-model=mm", ["B0", "B3-llm"],
                                                 [1, 2, 3])
    assert str(reached.value) != default_run_set(pack.name, pack.digest, "openai:m", ["B0", "B3-llm"], [1, 2, 3])


def _outcome(verified: bool = True, stopped: str | None = None, after_grid: bool = False) -> RunOutcome:
    verification = LogVerification(verified=verified, events=1, runs=1, derived=0, compared=0,
                                   findings=0 if verified else 1, dead_letters=0, first_finding=None)
    return RunOutcome(run_set="rs", report=None, report_dir=None, log=Path("events.avro"), log_root="r",
                      verification=verification, units_planned=1, units_completed=1, units_run=1,
                      units_not_started=0, attempts_abandoned=0, stopped=stopped, stopped_after_grid=after_grid)


def test_the_cli_alone_maps_an_outcome_to_the_documented_exit_statuses() -> None:
    assert run_exit_status(_outcome()) == EXIT_OK == 0
    assert run_exit_status(_outcome(verified=False)) == EXIT_AUDIT_FAILED == 1
    assert run_exit_status(_outcome(stopped="signal")) == EXIT_STOPPED == 130
    assert run_exit_status(_outcome(verified=False, stopped="signal")) == 130  # a stop wins over the findings
    assert run_exit_status(_outcome(stopped="harness_faults")) == EXIT_HARNESS_FAULTS == 4
    assert run_exit_status(_outcome(after_grid=True)) == 130
    assert run_exit_status(_outcome(verified=False, after_grid=True)) == 1


def test_plain_lines_show_the_account_without_styling() -> None:
    import io

    from rich.text import Text

    from membench.pipeline.run_display import PlainLines

    out = io.StringIO()
    display = PlainLines(out, interval_s=0)
    display.print("run set [bold]rs[/]: 2 units", highlight=False)
    display.print(Text.assemble(("MISMATCH ", "bold red"), "run r1"))
    with display.units(2) as shown:
        shown.done("u1")
    assert out.getvalue() == "run set rs: 2 units\nMISMATCH run r1\n"


def test_the_default_worker_count_is_membench_runs(tmp_path: Path, monkeypatch) -> None:
    """workers=None takes `membench run`'s default for the agent (cores for a CPU-bound one, more for
    one that waits on a model) and says why on the display; a number is taken as given. The grid
    itself is stopped at its start (the run is tests/integration/test_library_run.py)."""
    import membench.pipeline.run_environment
    import membench.pipeline.run_request as run_request
    import membench.pipeline.worker_count as worker_count
    from membench.pipeline.worker_count import default_workers

    monkeypatch.setattr(worker_count, "available_mb", lambda: 16_000.0)  # the reason names it: held still
    started: list[tuple[int, str | None]] = []
    monkeypatch.setattr(membench.pipeline.run_environment, "prepare_scoring", lambda *args, **kwargs: None)
    monkeypatch.setattr(run_request, "run_embedded",
                        lambda pack, units, config, sandbox, settings, workers, **kw: started.append(
                            (workers, kw.get("workers_note"))))
    model = ModelSettings(base_urls=("http://127.0.0.1:9/v1",), preflight=False)
    run_grid(RunRequest("smoke", settings=_settings(tmp_path)))
    run_grid(RunRequest("smoke", agent="openai:m", model=model, settings=_settings(tmp_path)))
    run_grid(RunRequest("smoke", workers=3, settings=_settings(tmp_path)))
    cpu, cpu_why = default_workers("scripted:memory-literal")
    waiting, waiting_why = default_workers("openai:m")
    assert waiting > cpu  # the two rules differ on this machine, so the test tells them apart
    assert started == [(cpu, f"workers: {cpu} ({cpu_why})"), (waiting, f"workers: {waiting} ({waiting_why})"),
                       (3, None)]
    with pytest.raises(RequestInvalid, match="--workers must be at least 1"):
        run_grid(RunRequest("smoke", workers=0, settings=_settings(tmp_path)))
