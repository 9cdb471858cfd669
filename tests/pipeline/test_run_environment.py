"""The run set's scoring environment (membench/pipeline/run_environment.py): recorded when a run set starts,
and a resume under another environment refused with both digests, what differs and the fix,
writing nothing. The CLI path (a real run resumed, then refused) is
tests/integration/test_scoring_preflight.py."""

from __future__ import annotations

import json

import pytest

from membench.pipeline.grid_run import RunRefused
from membench.pipeline.run_environment import (ENVIRONMENT_FILE, ScoringEnvironment, claim_environment, differences,
                                      environment_path, read_environment)

FIELDS = {"membench_version": "0.1.0", "code_digest": "a" * 64, "python": "3.11.2", "sandbox_python": "3.11.2",
          "pytest": "9.2.0", "sandbox_backend": "bwrap", "sandbox_version": "bubblewrap 0.8.0",
          "oracle_runner": "fast", "scoring_preflight": "ok (ledger/smoke-client-header: reference pass, base fail)"}


def _env(**changed: str) -> ScoringEnvironment:
    return ScoringEnvironment({**FIELDS, **changed})


def _with_events(runs, run_set="rs"):
    """A run set whose log holds events (what `claim_environment` protects)."""
    (runs / run_set).mkdir(parents=True, exist_ok=True)
    (runs / run_set / "events.avro").write_bytes(b"Obj\x01 recorded events")


def test_a_new_run_set_records_its_environment(tmp_path):
    claim_environment(tmp_path, "rs", _env())
    doc = json.loads((tmp_path / "rs" / ENVIRONMENT_FILE).read_text())
    assert doc["fields"] == FIELDS and doc["digest"] == _env().digest
    assert read_environment(environment_path(tmp_path, "rs")) == _env()


def test_the_same_environment_resumes(tmp_path):
    claim_environment(tmp_path, "rs", _env())
    _with_events(tmp_path)
    before = (tmp_path / "rs" / ENVIRONMENT_FILE).read_bytes()
    claim_environment(tmp_path, "rs", _env())
    assert (tmp_path / "rs" / ENVIRONMENT_FILE).read_bytes() == before


@pytest.mark.parametrize("changed, named", [
    ({"pytest": "(none)"}, "pytest (in the sandbox) 9.2.0 -> (none)"),
    ({"code_digest": "b" * 64}, "code digest aaaaaaaaaaaa… -> bbbbbbbbbbbb…"),
    ({"sandbox_backend": "docker", "sandbox_version": "Podman Engine 4.3.1"}, "sandbox backend bwrap -> docker"),
    ({"oracle_runner": "pytest"}, "oracle runner fast -> pytest"),
])
def test_another_environment_is_refused_and_nothing_is_written(tmp_path, changed, named):
    claim_environment(tmp_path, "rs", _env())
    _with_events(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "rs").iterdir()}
    with pytest.raises(RunRefused) as refused:
        claim_environment(tmp_path, "rs", _env(**changed))
    message = str(refused.value)
    assert named in message
    assert _env().digest[:12] in message and _env(**changed).digest[:12] in message
    assert "--run-set NEW" in message
    assert {p.name: p.read_bytes() for p in (tmp_path / "rs").iterdir()} == before


def test_events_without_a_record_are_refused(tmp_path):
    """A run set from before the record existed: its cells cannot be shown to match."""
    _with_events(tmp_path)
    with pytest.raises(RunRefused, match=r"no record of the environment.*--run-set NEW"):
        claim_environment(tmp_path, "rs", _env())
    assert not (tmp_path / "rs" / ENVIRONMENT_FILE).exists()


def test_a_run_set_without_events_takes_the_new_environment(tmp_path):
    """Nothing was scored under the old record (e.g. the warehouse could not be opened): no cell to protect."""
    claim_environment(tmp_path, "rs", _env())
    claim_environment(tmp_path, "rs", _env(pytest="8.0.0"))
    assert read_environment(environment_path(tmp_path, "rs")) == _env(pytest="8.0.0")


def test_an_unreadable_record_is_refused_naming_the_file(tmp_path):
    _with_events(tmp_path)
    (tmp_path / "rs" / ENVIRONMENT_FILE).write_text("{not json")
    with pytest.raises(RunRefused, match=rf"{ENVIRONMENT_FILE}: unreadable scoring environment record"):
        claim_environment(tmp_path, "rs", _env())


def test_differences_name_every_changed_field():
    assert differences(_env(), _env(python="3.12.1", pytest="8.0.0")) == [
        "Python 3.11.2 -> 3.12.1", "pytest (in the sandbox) 9.2.0 -> 8.0.0"]


def test_the_oracle_runner_in_use_is_part_of_the_environment(monkeypatch):
    """MEMBENCH_ORACLE_RUNNER changes the recorded environment, so a resume cannot mix runners."""
    from types import SimpleNamespace

    from membench.pipeline.run_environment import scoring_environment

    probe = SimpleNamespace(python="3.11.2", pytest="9.2.0", backend_version="bubblewrap 0.8.0")
    preflight = SimpleNamespace(checks=[], probe=probe, backend="bwrap", ok=True)
    monkeypatch.delenv("MEMBENCH_ORACLE_RUNNER", raising=False)
    fast = scoring_environment(preflight)
    monkeypatch.setenv("MEMBENCH_ORACLE_RUNNER", "pytest")
    slow = scoring_environment(preflight)
    assert (fast.fields["oracle_runner"], slow.fields["oracle_runner"]) == ("fast", "pytest")
    assert differences(fast, slow) == ["oracle runner fast -> pytest"]
