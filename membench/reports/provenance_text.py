"""Plain-text lines of a report's provenance and canary facts (memory policies, USD cost, admission
funnel, scored diffs stored as blobs, the replay of the log at the run's end), shared by the Markdown (`membench.reports.markdown`) and the HTML
(`membench.reports.html.study`) renderings, so neither imports the other for them."""

from __future__ import annotations

from membench.reports.model import AdmissionFunnel, CanarySearch, CostUsd, LogVerification, MemoryPolicy


def memory_policy_text(policies: dict[str, MemoryPolicy]) -> str:
    """Each condition's memory policy; a model-driven one with its model and its sleep/judge calls."""
    parts = []
    for condition, p in policies.items():
        if p.policy != "model_driven":
            parts.append(f"{condition}: model_free")
            continue
        parts.append(f"{condition}: model_driven ({p.memory_model}; {p.sleep_calls} sleep + {p.judge_calls} "
                     f"judge calls, {p.input_tokens} input + {p.output_tokens} output tokens, "
                     f"${p.cost_usd:.4f})")
    return "; ".join(parts)


def cost_text(cost: CostUsd) -> str:
    if cost.status == "no_model_calls":
        return "no model calls (no USD cost recorded)"
    if cost.status == "unpriced":
        return f"{cost.model_calls} model calls, none priced"
    per = "; ".join(f"{c}: ${v.cost_usd:.4f}" + (f" (${v.cost_per_success_usd:.4f} per success)"
                                                 if v.cost_per_success_usd is not None else "")
                    for c, v in cost.conditions.items())
    return f"${cost.cost_usd:.4f} over {cost.priced_calls}/{cost.model_calls} priced calls — {per}"


def admission_text(admission: AdmissionFunnel) -> str:
    if admission.status != "validated":
        return "not validated (run `membench validate PACK` to record the funnel)"
    return (f"{admission.authored} authored → {admission.valid} valid → {admission.admitted} admitted "
            f"({admission.source})")


def refused_measured_text(admission: AdmissionFunnel | None) -> str:
    """The notice a report gives above every number when its run set measured traps `membench validate`
    refused (`run --include-refused`); "" when it measured none (or the report predates the key)."""
    refused = (admission.refused_measured if admission is not None else None) or []
    if not refused:
        return ""
    named = "; ".join(f"{t.seq_id} ({t.first_failure or 'refused'})" for t in refused)
    assert admission is not None  # it lists the refused traps
    return (f"this run set measures {len(refused)} trap{'s' * (len(refused) > 1)} that `membench validate` refused "
            f"({admission.source}): {named}. Their cells are in every figure below, and a proof that passes "
            "on them (e.g. the canary proof) does not make them admitted; `membench validate PACK --admitted DIR` "
            "writes the pack of the admitted traps only.")


def blobs_text(searched: CanarySearch) -> str:
    """", N scored diffs stored as blobs (B bytes)" when the run set has any (plain text; empty for a
    run set without, or a report.json from before they were searched)."""
    if not searched.blobs and not searched.blobs_missing:
        return ""
    return (f", {searched.blobs} scored diffs stored as blobs ({searched.blob_bytes} bytes"
            + (f"; {searched.blobs_missing} unreadable" if searched.blobs_missing else "") + ")")


def verification_text(v: LogVerification) -> str:
    """The log line of a report whose run replayed its log (membench.reports.model.LogVerification)."""
    if not v.verified:
        return f"not verified ({v.findings} problems)"
    return (f"verified (replayed at the end of the run: {v.events} events of {v.runs} runs, chains intact, "
            f"{v.derived} derived events re-derived, {v.compared} compared with the warehouse, no dead letters)")


def not_verified_text(v: LogVerification) -> str:
    """Why a report's numbers are not to be used: its log failed replay."""
    return (f"replaying this run set's log found {v.findings} problems ({v.dead_letters} events the "
            f"processors rejected); first: {v.first_finding}. The numbers below come from a log that does "
            "not verify; `membench replay runs/<run set>/events.avro --verify` lists every problem.")
