"""Admissions pinned to what earned them (membench/memory_systems/admission.py): a conformance record
holds the code digest of the system it checked — a plug-in's distribution and module files, a
command adapter's argv files, membench's own modules — and the memory model's upstream (a host, or a
stand-in on this machine). A real installed plug-in passes `memory check`; once its module is edited
so that `read` returns nothing, `run` refuses it (exit 2, nothing written) naming the module and the
two digests; its re-check fails and says in text what the reads returned; restored, the first record
admits it again. A record made before the pins (no code digest) is refused with the command that
makes a new one, and the control shows the old gate's lookup would have admitted the broken plug-in.
A check against a stand-in and a run against a real upstream are different configurations."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from membench.commands.memory import (admission_record, attempts_path, conformance_status, load_record, record_path,
                                      require_conformant)
from membench.errors import UsageError
from membench.memory_systems.admission import STAND_IN, changes, repair_budget_spender, upstream
from membench.memory_systems.conformance import REPAIR_BUDGET, SUITE_VERSION, draw_tokens, evidence_lines, fact, grade
from membench.memory_systems.registry import (MEMORY_SYSTEMS, PLUGIN_ENTRY_POINTS, configuration,
                                               configuration_digest, register_adapters_from_env, register_plugins)
from tests.memory_systems.test_conformance import _result
from tests.memory_systems.vendor_distribution import break_read, repair_read, write_vendor_distribution

DOUBLE = Path(__file__).with_name("shuffling_adapter.py")


@pytest.fixture
def registered():
    """Conditions registered in this process (plug-ins, adapters) and the plug-in's modules are
    removed afterwards."""
    before = set(MEMORY_SYSTEMS)
    yield
    for name in set(MEMORY_SYSTEMS) - before:
        MEMORY_SYSTEMS.pop(name, None)
        PLUGIN_ENTRY_POINTS.pop(name, None)
    for module in [m for m in sys.modules if m == "vendor_mem" or m.startswith("vendor_mem.")]:
        del sys.modules[module]


@pytest.fixture
def vendor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registered) -> Path:
    """The vendor's distribution installed on the path of this process and of the CLI's; registered."""
    site = tmp_path / "site"
    store = write_vendor_distribution(site)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert "vendor" in register_plugins()
    return store


def _pinned_write(home: Path, config: dict, verdict: str = "pass") -> dict:
    """A record as `membench memory check` writes it (its configuration and verdict; the suite's
    gates do not matter to the admission)."""
    digest = configuration_digest(config)
    record = {"condition": config["condition"], "configuration": config, "digest": digest,
              "suite_version": SUITE_VERSION, "verdict": verdict, "failed": [] if verdict == "pass" else ["x"]}
    path = record_path(home, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return record


def test_an_edited_plugin_is_refused_naming_its_module_until_rechecked(cli, cli_inproc, home, vendor) -> None:
    checked = cli("memory", "check", "vendor", timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]
    assert "pinned to: distribution vendor-mem 0.1, 2 module files" in checked.stdout
    config = configuration("vendor")
    record = load_record(home, configuration_digest(config))
    assert record["verdict"] == "pass" and record["configuration"] == config
    assert config["detail"]["distribution"] == {"name": "vendor-mem", "version": "0.1"}
    before = config["code"]["modules"]["vendor_mem/store.py"]
    assert conformance_status(home, "vendor", None)[0] == "conformant"

    break_read(vendor)  # after its check, the plug-in's reads return nothing
    after = configuration("vendor")["code"]["modules"]["vendor_mem/store.py"]
    status, why = conformance_status(home, "vendor", None)
    assert status == "changed", why
    assert f"plug-in vendor: module vendor_mem/store.py changed (sha256 {before[:12]}… → {after[:12]}…)" in why
    assert "re-run `membench memory check vendor`" in why
    refused = cli_inproc("run", "smoke", "--conditions", "B0,vendor", "--seeds", "1", "--agent",
                         "scripted:memory-literal", "--run-set", "broken")
    assert refused.returncode == 2 and "module vendor_mem/store.py changed" in refused.stderr, refused.stderr
    assert not (home / "runs").exists()  # refused before any unit: nothing written

    rechecked = cli("memory", "check", "vendor", timeout=600)  # text mode: the evidence is printed
    assert rechecked.returncode == 1, rechecked.stdout + rechecked.stderr[-2000:]
    assert "- literal_round_trip: fail" in rechecked.stdout
    assert "missing: hex8, hex12, hex16, token, word, int" in rechecked.stdout
    assert '"returned": "(nothing)"' in rechecked.stdout and "reads a/hex8: " in rechecked.stdout
    status, why = conformance_status(home, "vendor", None)
    assert status == "failed" and "literal_round_trip" in why

    repair_read(vendor)  # the code the first record checked: admitted again by that record
    assert conformance_status(home, "vendor", None) == ("conformant", f"conformance/{record['digest']}.json")


def test_a_record_without_a_code_digest_is_refused_where_the_old_gate_admitted_a_broken_plugin(home, vendor) -> None:
    # what membench wrote before admissions were pinned: the configuration without code or upstream
    legacy_view = lambda c: {"condition": c["condition"], "kind": c["kind"],  # noqa: E731
                             "detail": {"factory": c["detail"]["factory"]}, "memory_model": c["memory_model"]}
    legacy = _pinned_write(home, legacy_view(configuration("vendor")))
    assert "code" not in legacy["configuration"]
    break_read(vendor)
    # control: the old gate looked the record up by that digest, which the edit does not change
    assert load_record(home, configuration_digest(legacy_view(configuration("vendor"))))["verdict"] == "pass"
    status, why = conformance_status(home, "vendor", None)
    assert status == "changed"
    assert "holds no code digest" in why and "re-run `membench memory check vendor`" in why
    with pytest.raises(UsageError, match="condition 'vendor' is not admitted.*holds no code digest"):
        require_conformant(home, ["vendor"], None, "--conditions")


def test_a_stand_in_check_and_a_real_upstream_are_different_records(home, tmp_path) -> None:
    stand_in, real = {"*": "http://127.0.0.1:8123/v1"}, {"openai": "https://api.openai.com/v1"}
    assert upstream(stand_in) == upstream({"*": "http://localhost:9000"}) == STAND_IN
    assert upstream(real) == "api.openai.com" and upstream(None) is None
    checked, wanted = configuration("B2-dense", "m", stand_in), configuration("B2-dense", "m", real)
    assert configuration_digest(checked) != configuration_digest(wanted)
    # control: without the upstream (as records were keyed before) the two are one configuration
    assert {**checked, "upstream": None} == {**wanted, "upstream": None}
    assert checked["code"]["membench"]["membench/memory_systems/libraries.py"]  # membench's module, pinned
    assert checked["detail"]["version"]  # the library version (mem0ai, qdrant-client…)

    _pinned_write(home, checked)
    assert conformance_status(home, "B2-dense", "m", {"*": "http://127.0.0.1:9999"})[0] == "conformant"
    status, why = conformance_status(home, "B2-dense", "m", real)
    assert status == "changed"
    assert f"upstream changed ({STAND_IN} → api.openai.com)" in why
    assert "`membench memory check B2-dense --memory-model m --model-base-url https://api.openai.com/v1`" in why
    # a replay calls no upstream: the record of the recorded run's upstream serves
    assert conformance_status(home, "B2-dense", "m", None, any_upstream=True)[0] == "conformant"
    # and the other way round: a check against the real API does not admit a run against a stand-in
    real_home = tmp_path / "real-home"
    _pinned_write(real_home, wanted)
    assert conformance_status(real_home, "B2-dense", "m", real)[0] == "conformant"
    status, why = conformance_status(real_home, "B2-dense", "m", stand_in)
    assert status == "changed" and f"upstream changed (api.openai.com → {STAND_IN})" in why
    status, why = conformance_status(home, "B2-dense", "other-model", None, any_upstream=True)
    assert status == "changed" and why.startswith("library B2-dense: memory model changed (m → other-model) since")


def test_an_edited_command_adapter_is_refused_naming_its_file(cli, home, tmp_path, monkeypatch, registered) -> None:
    script = tmp_path / "adapter.py"
    shutil.copy(DOUBLE, script)
    monkeypatch.setenv("MEMBENCH_MEMORY_ADAPTERS", json.dumps(
        {"steady": {"command": [sys.executable, str(script), str(tmp_path / "store"), "stable"]}}))
    assert register_adapters_from_env(os.environ) == ["steady"]
    checked = cli("memory", "check", "steady", "--json", timeout=600)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    files = json.loads(checked.stdout)["configuration"]["code"]["files"]
    assert set(files) == {sys.executable, str(script)}  # the store directory is not code
    assert conformance_status(home, "steady", None)[0] == "conformant"
    script.write_text(script.read_text() + "\n# edited after its check\n")
    status, why = conformance_status(home, "steady", None)
    assert status == "changed" and f"adapter steady: file {script} changed (sha256 " in why, why


def test_changes_name_each_difference_and_nothing_for_the_same_configuration() -> None:
    base = {"condition": "c", "kind": "plugin", "detail": {"distribution": {"name": "d", "version": "1"}},
            "code": {"modules": {"p/a.py": "a" * 64, "p/b.py": "b" * 64}}, "memory_model": None, "upstream": None}
    assert changes(base, json.loads(json.dumps(base))) == []
    other = {**base, "detail": {"distribution": {"name": "d", "version": "2"}},
             "code": {"modules": {"p/a.py": "c" * 64, "p/new.py": "d" * 64}}}
    assert changes(base, other) == [
        'distribution changed ({"name": "d", "version": "1"} → {"name": "d", "version": "2"})',
        f"module p/a.py changed (sha256 {'a' * 12}… → {'c' * 12}…)", "module p/b.py removed",
        "module p/new.py added"]


def test_a_failed_gate_shows_what_leaked_in_text() -> None:
    tokens = draw_tokens()
    good = _result(tokens)
    leaky = json.loads(json.dumps(good))
    leaky["reads"]["b/int"]["texts"].append(fact("int", tokens["a"]["int"]))
    gate = grade(tokens, leaky, leaky)["namespace_isolation"]
    assert gate["verdict"] == "fail"
    assert evidence_lines(gate["evidence"]) == [f"leaks: b/int holds a token of a (a/int {tokens['a']['int']})"]
    assert evidence_lines(grade(tokens, good, good)["namespace_isolation"]["evidence"]) == []  # control: nothing


def _attempt(home: Path, config: dict) -> dict:
    """A failed `memory check` of CONFIG as the command records it: its record and a ledger entry."""
    record = _pinned_write(home, config, verdict="fail")
    ledger_path = attempts_path(home, config["condition"])
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {"condition": config["condition"],
                                                                              "budget": REPAIR_BUDGET, "attempts": []}
    ledger["attempts"].append({"digest": record["digest"], "verdict": "fail", "failed": record["failed"]})
    ledger_path.parent.mkdir(parents=True, exist_ok=True)
    ledger_path.write_text(json.dumps(ledger))
    return record


def test_a_spent_repair_budget_is_its_own_status_naming_the_record_that_spent_it(home, cli_inproc) -> None:
    url = "http://127.0.0.1:8123/v1"
    records = [_attempt(home, configuration("B2-dense", model, {"*": url})) for model in ("m1", "m2")]
    # control: two failed attempts leave the budget open, so a check of another configuration is advised
    status, why = conformance_status(home, "B2-dense", "m4", {"*": url})
    assert status == "missing" and "run `membench memory check B2-dense" in why
    records.append(_attempt(home, configuration("B2-dense", "m3", {"*": url})))
    spent_by = f"conformance/{records[2]['digest']}.json"

    status, why, record = admission_record(home, "B2-dense", "m4", {"*": url})
    assert status == "budget_spent" and record == records[2]
    assert spent_by in why and "repair budget is spent" in why and "memory check B2-dense" not in why
    # the check it would have advised is indeed refused, naming the same record
    check = cli_inproc("memory", "check", "B2-dense", "--memory-model", "m4", "--model-base-url", url)
    assert check.returncode == 1 and "repair budget is spent" in check.stderr and spent_by in check.stderr
    with pytest.raises(UsageError, match=f"condition 'B2-dense' is not admitted.*{spent_by}"):
        require_conformant(home, ["B2-dense"], "m4", "--conditions", {"*": url})
    refused = cli_inproc("run", "smoke", "--conditions", "B0,B2-dense", "--memory-model", "m4", "--model-base-url",
                         url, "--agent", "scripted:memory-literal", "--seeds", "1")
    assert refused.returncode == 2 and "repair budget is spent" in refused.stderr and spent_by in refused.stderr
    assert "run `membench memory check" not in refused.stderr and not (home / "runs").exists()
    # each configuration that spent it keeps its own status: its record failed
    assert conformance_status(home, "B2-dense", "m1", {"*": url})[0] == "failed"

    from membench.pipeline.report_inputs import conformance_funnel
    from membench.reports.markdown import _study_parts_markdown
    from membench.reports.model import to_json
    from membench.reports.study import FamilySpec, Study
    from tests.reports.test_html import make_report, typed

    study = Study(source="s.json", baseline="B0", alpha=0.05,
                  families=(FamilySpec("A", "primary", (("B2-dense", "B0"),), ("clustered",)),))
    funnel = conformance_funnel(home, ["B0"], study, "m4")
    (entry,) = [e for e in funnel.conditions if e.condition == "B2-dense"]
    assert (entry.status, entry.record, entry.failed_gates, entry.conformant) == ("budget_spent", spent_by, ["x"],
                                                                                   False)
    provenance = {"agents": [], "agent_kinds": [], "models": [], "code_digests": [], "pack_digests": [], "seeds": [1],
                  "conditions": [], "runs": 1}
    text = _study_parts_markdown(typed(make_report(provenance=provenance, conformance=to_json(funnel))))
    assert f"  - B2-dense: budget_spent (spent by {spent_by}), failed x" in text, text


def test_a_pass_before_leaves_the_budget_open() -> None:
    failed = [{"digest": d, "verdict": "fail"} for d in ("a", "b", "c")]
    assert repair_budget_spender(failed, "d", 3) == failed[2]
    assert repair_budget_spender(failed, "c", 3) is None  # a configuration already tried may be re-checked
    assert repair_budget_spender([*failed, {"digest": "e", "verdict": "pass"}], "d", 3) is None
