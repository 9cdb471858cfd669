"""The hidden evaluator's case runner, run inside the evaluator's sandbox (docs/transfer.md).

    python3 -I -B evaluator_runner.py CASES.json PLAN.json RESULTS.json SOCKET TIMEOUT_S

CASES.json is the study's `cases.json` ({"module", "cases": {id: {"call", "args", "expect"|"raises"}}});
PLAN.json lists the cases in evaluation order with their case prerequisites. A case whose
prerequisite did not pass is `blocked` and not run. Each case calls one public function of the
frozen submission and compares the JSON form of its result (or the exception it raises).

A `raises` case names its class, and this runner resolves that name itself: a built-in exception
from its own `builtins`, else the attribute of that name of the submission's module (through the
proxy: the stand-in class of the module's real class). The exception raised must be that very
class (`type(exc) is expected`), never merely one with the same name: a submission's own
`class ValueError(Exception)`, or a class named like the project's exception defined elsewhere,
does not satisfy the case (a submission's own failure must never pass as, or exclude, a case).

The submission is not in this sandbox: it runs in a production sandbox (the pack scorer's
`production_server`), and its module is imported here as a proxy (`membench_harness.oracle_client`,
mounted at /harness) whose calls cross a Unix socket as plain data. So the submission cannot read
CASES.json, patch the comparison or write RESULTS.json (isolation `process`). RESULTS.json is
rewritten after every case, so a hang or crash in case k leaves the cases before it recorded.
"""

import builtins
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, "/harness")

from membench_harness import oracle_client  # noqa: E402  (mounted read-only at /harness)


def main(argv):
    cases_path, plan_path, results_path, sock_path, timeout_s = argv
    with open(cases_path, encoding="utf-8") as handle:
        checks = json.load(handle)
    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    oracle_client.REMOTE = oracle_client.Remote(sock_path, float(timeout_s))
    # only the module under test is answered by proxies; everything else imports locally
    sys.meta_path.insert(0, oracle_client.ProductionFinder({checks["module"].split(".", 1)[0]}))
    results: dict[str, dict] = {}
    module, import_error = None, None
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
                        "evidence": evidence[:500], "duration_ms": int((time.monotonic() - started) * 1000)}
        _write(results_path, results)
    _write(results_path, results)  # a plan without cases still leaves a results file
    try:
        oracle_client.REMOTE.request({"op": "shutdown"})
    except Exception:  # the channel may be gone already; the harness stops the sandbox anyway
        pass
    return 0


def _write(path, results):
    staging = path + ".partial"
    with open(staging, "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    os.replace(staging, path)


def expected_exception(module, name):
    """The class a `raises` case names, resolved by this runner: (class, None), or (None, why).
    A built-in exception's name means the built-in (a submission cannot redefine it for the case);
    any other name is the submission module's attribute, which must be an exception class."""
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        return builtin, None
    try:
        found = getattr(module, name)
    except BaseException as exc:  # the proxy's answer, or the submission's own error
        return None, f"{name} is neither a built-in exception nor an attribute of the module ({type(exc).__name__})"
    if isinstance(found, type) and issubclass(found, BaseException):
        return found, None
    return None, f"the module's {name} is not an exception class"


def _qualified(kind):
    return f"{kind.__module__}.{kind.__qualname__}"


def run_case(module, check):
    args = json.loads(json.dumps(check.get("args", [])))
    expected = None
    if "raises" in check:
        expected, why = expected_exception(module, check["raises"])
        if expected is None:
            return "failed", f"expected {check['raises']}: {why}"
    try:
        value = getattr(module, check["call"])(*args)
    except BaseException as exc:  # SystemExit from the submission arrives as a stand-in RuntimeError
        if expected is not None and type(exc) is expected:  # identity, not the class's name
            return "passed", f"raised {check['raises']}"
        if expected is not None:
            raised = type(exc).__name__
            if raised == check["raises"]:  # same name, another class: say which
                raised = f"{raised} (another class of that name, {_qualified(type(exc))})"
            return "failed", f"expected {check['raises']}, raised {raised}: {exc}"
        return "error", f"{type(exc).__name__}: {exc}"
    if expected is not None:
        return "failed", f"expected {check['raises']}, returned {_describe(value)}"
    try:
        # a proxy (an object that stayed in the production process) is not JSON data
        got = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return "failed", f"result is not JSON data: {_describe(value)}"
    if got == check["expect"]:
        return "passed", "ok"
    return "failed", f"expected {json.dumps(check['expect'])[:200]}, got {json.dumps(got)[:200]}"


def _describe(value):
    if isinstance(value, oracle_client.Proxy):  # its repr would be another call into the submission
        return f"<{object.__getattribute__(value, '_type')} object>"
    return repr(value)[:200]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
