"""The hidden evaluator's runner, run inside the scoring sandbox (docs/transfer.md).

    python3 -I -B evaluator_runner.py CASES.json PLAN.json SUBMISSION_DIR

CASES.json is the study's `cases.json` ({"module", "cases": {id: {"call", "args", "expect"|"raises"}}});
PLAN.json lists the cases in evaluation order with their case prerequisites. A case whose
prerequisite did not pass is `blocked` and not run. Each case calls one public function of the
frozen submission and compares the JSON form of its result (or the exception it raises). The
submission runs in this process (isolation `in_process`): what it prints is captured, and the
results are printed as one line after the marker, at the end.
"""

import contextlib
import hashlib
import io
import json
import sys
import time

MARKER = "MEMBENCH-EVALUATOR-RESULTS "


def main(argv):
    cases_path, plan_path, submission = argv
    with open(cases_path, encoding="utf-8") as handle:
        checks = json.load(handle)
    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    sys.path.insert(0, submission)
    sink = io.StringIO()
    results = {}
    module, import_error = None, None
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        try:
            module = __import__(checks["module"], fromlist=["*"])
        except BaseException as exc:  # a submission that does not import fails every case it reaches
            import_error = f"import {checks['module']}: {type(exc).__name__}: {exc}"
        for item in plan:
            cid, prerequisites = item["case_id"], item["prerequisites"]
            blockers = [p for p in prerequisites if results.get(p, {}).get("status") != "passed"]
            started = time.monotonic()
            if blockers:
                status, evidence = "blocked", "blocked by " + ", ".join(blockers)
            elif import_error is not None:
                status, evidence = "error", import_error
            else:
                status, evidence = run_case(module, checks["cases"][cid])
            results[cid] = {"status": status, "evidence_sha256": hashlib.sha256(evidence.encode()).hexdigest(),
                            "evidence": evidence[:500],
                            "duration_ms": int((time.monotonic() - started) * 1000)}
    sys.stdout.write("\n" + MARKER + json.dumps(results) + "\n")
    return 0


def run_case(module, check):
    args = json.loads(json.dumps(check.get("args", [])))
    try:
        value = getattr(module, check["call"])(*args)
    except BaseException as exc:  # SystemExit from the submission fails the case, not the evaluator
        if "raises" in check and type(exc).__name__ == check["raises"]:
            return "passed", f"raised {check['raises']}"
        if "raises" in check:
            return "failed", f"expected {check['raises']}, raised {type(exc).__name__}: {exc}"
        return "error", f"{type(exc).__name__}: {exc}"
    if "raises" in check:
        return "failed", f"expected {check['raises']}, returned {value!r}"
    try:
        got = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return "failed", f"result is not JSON data: {value!r}"
    if got == check["expect"]:
        return "passed", "ok"
    return "failed", f"expected {json.dumps(check['expect'])[:200]}, got {json.dumps(got)[:200]}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
