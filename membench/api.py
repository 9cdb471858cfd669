"""membench from Python: a grid run as a library call, as `membench run` makes it.

    from membench.api import ModelSettings, RunRequest, run_grid

    outcome = run_grid(RunRequest("smoke", conditions=("B0", "B5"), seeds=(1,)))
    outcome.report.conditions, outcome.report_dir, outcome.verified

    # a model agent, through the model gateway (its key from MEMBENCH_MODEL_API_KEY unless `api_keys` gives it)
    run_grid(RunRequest("smoke", agent="openai:gpt-5-mini", conditions=("B5",), seeds=(1,),
                        model=ModelSettings(base_urls=("https://api.openai.com/v1",), record=True)))

`run_grid` shows nothing unless given a display (`PlainLines()` for plain lines on stderr, or any
`RunDisplay`), never ends the process, and raises `RequestInvalid` for a request that breaks a rule
of a legal run (nothing is written), `AuditFailed` when the warehouse or the log does not check.
The code lives in `membench/pipeline/run_request.py`; the CLI applies the same rules and maps the outcome to
its exit statuses (`membench.errors`). External and plug-in memory systems become conditions by the
explicit calls the CLI makes at start-up (`membench.memory_systems.registry.register_adapters_from_env`,
`register_plugins`); a Python caller makes them too before naming one."""

from membench.pipeline.grid_run import RunOutcome
from membench.pipeline.model_gateway import ModelSettings
from membench.pipeline.run_display import PlainLines, RunDisplay, SilentDisplay
from membench.pipeline.run_errors import AuditFailed, ReportRefused, RequestInvalid, RunRefused
from membench.pipeline.run_request import RunRequest, run_grid
from membench.pipeline.settings import Settings, load_settings

__all__ = ["AuditFailed", "ModelSettings", "PlainLines", "ReportRefused", "RequestInvalid", "RunDisplay", "RunOutcome",
           "RunRefused", "RunRequest", "Settings", "SilentDisplay", "load_settings", "run_grid"]
