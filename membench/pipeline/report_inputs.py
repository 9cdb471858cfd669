"""What a report needs from outside the warehouse, found by the run set's pack digest (RunStarted's
`pack_digest`): the pack's secret values for the canary proof, and `membench validate`'s admission
funnel. Also the last step of writing a report: the rendered files are searched for the secrets
before they are written.

Secret values are recorded nowhere but in the finalized pack's own trap material
(membench/packs/finalize.py), so they are recovered by matching the skeleton (placeholders
`{{SECRET:name:class}}`) against the finalized copy, `$MEMBENCH_HOME/packs/<skeleton>-<digest12>`.
The skeleton is `--pack` when given, else the built-in pack the finalized copy names in its
provenance (its digest must match the directory's). Anything missing makes the proof `not_run`
with the reason.

The admission funnel: `membench validate` records its result as
`$MEMBENCH_HOME/validations/<pack digest>.json` under the digest a run of the pack carries (the
validated finalized copy, or with `--admitted DIR` the admitted pack's); a report whose pack has no
such record says `not_validated`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from membench.reports.canary import Secret, not_run
from membench.reports.model import AdmissionFunnel
from membench.warehouse.read_model import ReadModel
from membench.formats.pack_format import SECRET, has_placeholders, pack_digest

CLASS_PATTERNS = {"hex8": "[0-9a-f]{8}", "hex12": "[0-9a-f]{12}", "hex16": "[0-9a-f]{16}",
                  "token": "[A-Za-z0-9]{16}", "word": "[A-Z]{8}", "int": "[0-9]{4}"}


class SecretsUnavailable(LookupError):
    pass


def validation_path(home: Path, digest: str) -> Path:
    return home / "validations" / f"{digest}.json"


def refused_traps(home: Path, digest: str) -> dict[str, str | None]:
    """seq id -> its first failing gate, for every trap `membench validate` refused in the pack of
    DIGEST (empty when the pack was not validated, or every trap was admitted)."""
    try:
        data = json.loads(validation_path(home, digest).read_text(encoding="utf-8"))
        return {t["seq_id"]: t.get("first_failure") for t in data.get("traps", []) if not t["admitted"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def admission_for(home: Path, digests: list[str], measured: set[str] | frozenset[str] = frozenset()) -> AdmissionFunnel:
    """The funnel `membench validate` recorded for the run set's (one) pack, or not_validated; with
    the refused traps among MEASURED (the run set's trap ids) named, when there are any."""
    from membench.reports.model import RefusedTrap

    if len(digests) == 1:
        path = validation_path(home, digests[0])
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            refused = refused_traps(home, digests[0])
            hits = [RefusedTrap(seq_id, refused[seq_id]) for seq_id in sorted(refused) if seq_id in measured]
            return AdmissionFunnel(status="validated", source=f"validations/{path.name}", authored=int(data["authored"]),
                                   valid=int(data["valid"]), admitted=int(data["admitted"]),
                                   refused_measured=hits or None)
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return AdmissionFunnel(status="not_validated", source=None, authored=None, valid=None, admitted=None)


def _pattern(skeleton_text: str) -> re.Pattern[str]:
    """SKELETON_TEXT as a regex whose placeholders capture the values that filled them."""
    out, last, seen = [], 0, set()
    for match in SECRET.finditer(skeleton_text):
        out.append(re.escape(skeleton_text[last:match.start()]))
        name, cls = match.group(1), match.group(2)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{CLASS_PATTERNS.get(cls, '.+?')})")
        seen.add(name)
        last = match.end()
    out.append(re.escape(skeleton_text[last:]))
    return re.compile("".join(out), re.S)


def _fill_values(skeleton_text: str, final_text: str, where: str) -> dict[str, str]:
    match = _pattern(skeleton_text).fullmatch(final_text)
    if match is None:
        raise SecretsUnavailable(f"{where}: the finalized text does not match its skeleton")
    return match.groupdict()


def pack_secrets(skeleton: Path, finalized: Path) -> list[Secret]:
    """Every secret value of FINALIZED, by trap, recovered against SKELETON."""
    skel = json.loads((skeleton / "manifest.json").read_text(encoding="utf-8"))
    final = {s.get("seq_id"): s for s in json.loads((finalized / "manifest.json").read_text(encoding="utf-8"))
             .get("sequences", [])}
    values: dict[str, dict[str, str]] = {}
    for seq in skel.get("sequences", []):
        seq_id = seq.get("seq_id")
        text = json.dumps(seq)
        if SECRET.search(text):
            if seq_id not in final:
                raise SecretsUnavailable(f"{finalized / 'manifest.json'}: no sequence {seq_id}")
            values.setdefault(seq_id, {}).update(_fill_values(text, json.dumps(final[seq_id]), f"sequence {seq_id}"))
        hidden = skeleton / "hidden" / str(seq_id)
        for path in sorted(hidden.rglob("*")) if hidden.is_dir() else []:
            if not path.is_file():
                continue
            body = path.read_text(encoding="utf-8", errors="ignore")
            if SECRET.search(body):
                target = finalized / path.relative_to(skeleton)
                values.setdefault(seq_id, {}).update(_fill_values(
                    body, target.read_text(encoding="utf-8", errors="ignore"), str(path.relative_to(skeleton))))
    return [Secret(name=name, trap=trap, value=value)
            for trap, named in sorted(values.items()) for name, value in sorted(named.items())]


def _builtin_dirs() -> list[Path]:
    from membench.packs.pack_resolver import BUILTIN_DIR, builtin_packs

    return [BUILTIN_DIR / name for name in builtin_packs()]


def find_secrets(home: Path, digests: list[str], pack_spec: str | None,
                 kafka: bool = False) -> tuple[list[Secret] | None, str | None, str]:
    """(secrets, pack label, reason): secrets None when they cannot be had (reason says why; KAFKA:
    the run set came through a Kafka bus, whose runners hold the finalized pack on their machines)."""
    from membench.packs.pack_resolver import resolve_pack_dir
    from membench.formats.pack_format import PackError

    if len(digests) != 1:
        return None, None, f"the run set mixes {len(digests)} packs"
    digest = digests[0]
    skeleton: Path | None = None
    if pack_spec is not None:
        try:
            skeleton = resolve_pack_dir(pack_spec)
        except PackError as exc:
            return None, None, f"--pack: {exc}"
    candidates = [skeleton] if skeleton is not None else _builtin_dirs()
    from membench.packs.pack_resolver import finalized_skeleton_name

    if skeleton is not None and finalized_skeleton_name(skeleton) is not None:
        # a finalized copy has no placeholders but does have secrets: never report it as secret-free
        return None, skeleton.name, (f"--pack {pack_spec} is a finalized copy; give the skeleton it was made from "
                                     f"('{finalized_skeleton_name(skeleton)}') with --pack")
    for root in candidates:  # the run used the pack itself: it has no placeholders, hence no secrets
        if not has_placeholders(root) and pack_digest(root) == digest:
            return [], root.name, ""
    finalized = next((d for d in sorted((home / "packs").glob("*")) if d.is_dir() and pack_digest(d) == digest), None)
    if finalized is None:
        if kafka:  # one line: the report's reader learns why and what to copy
            return None, None, (f"no finalized pack with digest {digest[:12]}… in this machine's MEMBENCH_HOME/packs: "
                                "on a Kafka bus the pack is finalized where the grid was enqueued and copied to "
                                "each runner, and its secrets live only there; copy that "
                                f"packs/<pack>-<{digest[:12]}…> directory here to search for them")
        return None, None, (f"no finalized pack with digest {digest[:12]}… in MEMBENCH_HOME/packs (the secrets live "
                            "only there; give the pack with --pack where it was finalized)")
    if skeleton is None:
        try:
            named = json.loads((finalized / "provenance.json").read_text(encoding="utf-8")).get("skeleton")
        except (OSError, ValueError):
            named = None
        skeleton = next((d for d in _builtin_dirs() if d.name == named
                         and finalized.name.endswith("-" + pack_digest(d)[:12])), None)
        if skeleton is None:
            return None, finalized.name, (f"the skeleton of {finalized.name} is not a built-in pack; give it with "
                                          "--pack to search for its secrets")
    elif not finalized.name.endswith("-" + pack_digest(skeleton)[:12]):
        return None, finalized.name, f"--pack {pack_spec} is not the skeleton of {finalized.name}"
    try:
        return pack_secrets(skeleton, finalized), finalized.name, ""
    except (SecretsUnavailable, OSError, ValueError) as exc:
        return None, finalized.name, str(exc)


def canary_for(reads: ReadModel, run_set: str, home: Path, digests: list[str], pack_spec: str | None,
               blob_dir: Path | None = None, kafka: bool = False):
    """(events proof, secrets): the proof over the read model's agent-visible events and the diffs
    stored as blobs in BLOB_DIR (runs/<run set>/blobs), or not_run."""
    from membench.bus.blobs import get_blob
    from membench.reports.canary import search_events

    secrets, label, reason = find_secrets(home, digests, pack_spec, kafka)
    if secrets is None:
        return not_run(reason, label), []
    place = f"in runs/{run_set}/blobs of this MEMBENCH_HOME" + (
        " (on a Kafka bus each runner keeps them in its own MEMBENCH_HOME)" if kafka else "")
    return search_events(reads, run_set, secrets, label or "",
                         read_blob=(lambda digest: get_blob(blob_dir, digest)) if blob_dir is not None else None,
                         blob_place=place), secrets


def load_study(path: Path | None):
    """The study file of --study (docs/study.md), or the default study; a bad file is refused
    (`RequestInvalid`, naming it)."""
    from membench.pipeline.run_errors import RequestInvalid
    from membench.reports.study import DEFAULT_STUDY, StudyError, load_study_text

    if path is None:
        return DEFAULT_STUDY
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RequestInvalid(f"--study: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return load_study_text(text, path.name)
    except StudyError as exc:
        raise RequestInvalid(f"--study: {exc}") from None


def check_baseline(conditions: list[str], baseline: str | None, study) -> None:
    """Refuse (`RequestInvalid`) before anything runs when the run's conditions leave the baseline open."""
    from membench.pipeline.run_errors import RequestInvalid
    from membench.reports.study import BaselineError, resolve_baseline

    try:
        resolve_baseline(conditions, baseline, study)
    except BaselineError as exc:
        raise RequestInvalid(str(exc)) from None


def build_full_report(reads: ReadModel, run_set: str, home: Path, *, baseline: str | None = None, study=None,
                      pack_spec: str | None = None, blob_dir: Path | None = None, kafka: bool = False,
                      compare: tuple[tuple[str, str], ...] = ()):
    """(report, secrets): `build_report` over READS (the warehouse's read model, or one in memory) with the
    canary proof over the same reads (and the diffs stored
    as blobs in BLOB_DIR) and the admission funnel; `membench.pipeline.grid_run.write_report(settings,
    report, secrets)` adds the reports' search. KAFKA: the run set's bus is Kafka (for the reasons)."""
    from membench.reports.build import build_report
    from membench.reports.study import DEFAULT_STUDY

    if reads.has_transfer_results(run_set):
        # a transfer study's run set: `membench transfer` reports it without a canary proof or admission
        # funnel (its study declares no secrets and is not admitted by `validate`), and `membench report`
        # must rebuild exactly that report (not add a not_run proof naming a pack to find)
        return build_report(reads, run_set, baseline=baseline, study=study or DEFAULT_STUDY, compare=compare), []
    started = [start.payload for start in reads.run_started(run_set)]
    digests = sorted({p["pack_digest"] for p in started})
    proof, secrets = canary_for(reads, run_set, home, digests, pack_spec, blob_dir, kafka)
    report = build_report(reads, run_set, baseline=baseline, study=study or DEFAULT_STUDY, canary=proof,
                          admission=admission_for(home, digests, {p["task"] for p in started}), compare=compare)
    models = sorted({p.get("memory_model") or "" for p in started} - {""})
    funnel = conformance_funnel(home, [c.condition for c in report.conditions], study or DEFAULT_STUDY,
                                models[0] if len(models) == 1 else None)
    if funnel is not None:
        import dataclasses

        report = dataclasses.replace(report, conformance=funnel)
    return report, secrets


def conformance_funnel(home: Path, evaluated: list[str], study: Any, memory_model: str | None):
    """The conformance funnel (registered -> conformant -> evaluated) of a run set whose registered
    conditions (evaluated, or named in a study family) include a library, external or plug-in
    condition; None when every one is built in."""
    from membench.memory_systems.conformance_records import admission_record
    from membench.memory_systems.registry import MEMORY_SYSTEMS, needs_conformance
    from membench.reports.model import CONFORMANCE_UNAVAILABLE, ConformanceEntry, ConformanceFunnel

    registered = list(dict.fromkeys([*evaluated, *(c for fam in study.families for pair in fam.comparisons
                                                   for c in pair)]))
    if not any(c not in MEMORY_SYSTEMS or needs_conformance(c) for c in registered):
        return None
    entries = []
    for c in registered:
        if c not in MEMORY_SYSTEMS:
            status, failed, record = "unknown", list[str](), None
        else:
            # the run was admitted against its upstream, which the report does not know: any upstream's record
            status, _, found = admission_record(home, c, memory_model, any_upstream=True)
            record, failed = None, []
            # budget_spent: the record of the attempt that spent the budget, with its failed gates
            if status in ("conformant", "failed", "budget_spent") and found is not None:
                record = f"conformance/{found.get('digest')}.json"
                failed = list(found.get("failed") or [])
        conformant = status in ("built_in", "conformant")
        done = c in evaluated
        entries.append(ConformanceEntry(condition=c, status=status, conformant=conformant, evaluated=done,
                                        failed_gates=failed, record=record,
                                        label=None if done or conformant else CONFORMANCE_UNAVAILABLE))
    return ConformanceFunnel(registered=len(entries), conformant=sum(e.conformant for e in entries),
                             evaluated=sum(e.evaluated for e in entries), conditions=entries)
