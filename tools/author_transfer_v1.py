"""Author the built-in transfer study `fixtures/transfer-v1` (docs/transfer.md).

    python -m tools.author_transfer_v1 [OUT]     (default: fixtures/transfer-v1)

Six learning tasks each teach one house convention (a constant an instruction states); two
transfer projects need three conventions each, which their plans do not state: only what was
learned carries them. Every evaluator case's expected value is computed here by running the
reference solution, so `scripted:refsol` passes every case by construction; the starting
workspace passes exactly the cases whose functions it already implements.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from membench.memory_systems.skill_bank import write_manifest  # noqa: E402

SLOT_PATTERNS = {
    "fee_bps": (r"FEE_BPS = (\d+)", "37", "30"),
    "id_prefix": (r'ID_PREFIX = "([a-z]+_)"', "stl_", "txn_"),
    "round_mode": (r'ROUND_MODE = "(ROUND_[A-Z_]+)"', "ROUND_HALF_EVEN", "ROUND_HALF_UP"),
    "max_retries": (r"MAX_RETRIES = (\d+)", "4", "3"),
    "page_size": (r"PAGE_SIZE = (\d+)", "25", "20"),
    "ts_format": (r'TS_FORMAT = "(%[^"]+)"', "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S"),
}


def slot(name: str) -> dict[str, str]:
    pattern, answer, default = SLOT_PATTERNS[name]
    return {"answer": answer, "pattern": pattern, "default": default}


# ---------------------------------------------------------------- learning tasks
# (id, package, module, stub, solution template, slot, instruction, oracle)
LEARNING = [
    ("L1-fees", "tipjar", "fees",
     'def service_fee(cents: int) -> int:\n    raise NotImplementedError\n',
     'FEE_BPS = {{SLOT:fee_bps}}\n\n\ndef service_fee(cents: int) -> int:\n'
     '    """Fee in cents: FEE_BPS basis points, truncated."""\n    return cents * FEE_BPS // 10000\n',
     "fee_bps",
     "In tipjar/fees.py implement service_fee(cents). House rule for every fee we charge: FEE_BPS = 37 "
     "(basis points of the amount), kept as a module constant.",
     "from tipjar.fees import service_fee\n\n\ndef test_fee():\n    assert service_fee(10000) == 37\n\n\n"
     "def test_zero():\n    assert service_fee(0) == 0\n"),
    ("L2-ids", "tickets", "ids",
     'def ticket_id(n: int) -> str:\n    raise NotImplementedError\n',
     'ID_PREFIX = "{{SLOT:id_prefix}}"\n\n\ndef ticket_id(n: int) -> str:\n'
     '    """Record identifiers: the house prefix and six digits."""\n    return f"{ID_PREFIX}{n:06d}"\n',
     "id_prefix",
     "In tickets/ids.py implement ticket_id(n). House rule for record identifiers: ID_PREFIX = \"stl_\" "
     "followed by the number zero-padded to six digits.",
     "from tickets.ids import ticket_id\n\n\ndef test_id():\n    assert ticket_id(7) == 'stl_000007'\n"),
    ("L3-retries", "mailer", "retry",
     'def may_retry(attempts: int) -> bool:\n    raise NotImplementedError\n',
     'MAX_RETRIES = {{SLOT:max_retries}}\n\n\ndef may_retry(attempts: int) -> bool:\n'
     '    """A failed delivery is retried while fewer than MAX_RETRIES attempts were made."""\n'
     '    return attempts < MAX_RETRIES\n',
     "max_retries",
     "In mailer/retry.py implement may_retry(attempts). House rule for every job or delivery that fails: "
     "MAX_RETRIES = 4 attempts in total.",
     "from mailer.retry import may_retry\n\n\ndef test_retry():\n    assert may_retry(3) is True\n"
     "    assert may_retry(4) is False\n"),
    ("L4-paging", "catalog", "paging",
     'def first_page(items: list) -> list:\n    raise NotImplementedError\n',
     'PAGE_SIZE = {{SLOT:page_size}}\n\n\ndef first_page(items: list) -> list:\n'
     '    """Listings are paged by the house page size."""\n    return list(items[:PAGE_SIZE])\n',
     "page_size",
     "In catalog/paging.py implement first_page(items). House rule for every listing we page: PAGE_SIZE = 25 "
     "items.",
     "from catalog.paging import first_page\n\n\ndef test_page():\n    assert len(first_page(list(range(60)))) == 25\n"),
    ("L5-timestamps", "auditlog", "stamps",
     'def stamp(epoch: int) -> str:\n    raise NotImplementedError\n',
     'import time\n\nTS_FORMAT = "{{SLOT:ts_format}}"\n\n\ndef stamp(epoch: int) -> str:\n'
     '    """Timestamps are UTC in the house format."""\n    return time.strftime(TS_FORMAT, time.gmtime(epoch))\n',
     "ts_format",
     "In auditlog/stamps.py implement stamp(epoch). House rule for every timestamp we write: "
     "TS_FORMAT = \"%Y-%m-%dT%H:%M:%SZ\" in UTC.",
     "from auditlog.stamps import stamp\n\n\ndef test_stamp():\n    assert stamp(0) == '1970-01-01T00:00:00Z'\n"),
    ("L6-rounding", "payroll", "rounding",
     'def half_cents(cents: int) -> int:\n    raise NotImplementedError\n',
     'from decimal import Decimal\nimport decimal\n\nROUND_MODE = "{{SLOT:round_mode}}"\n\n\n'
     'def half_cents(cents: int) -> int:\n    """Halve an amount, rounding with the house rounding mode."""\n'
     '    return int((Decimal(cents) / 2).quantize(Decimal(1), rounding=getattr(decimal, ROUND_MODE)))\n',
     "round_mode",
     "In payroll/rounding.py implement half_cents(cents). House rule for every rounding of money: "
     "ROUND_MODE = \"ROUND_HALF_EVEN\" (the decimal module's mode).",
     "from payroll.rounding import half_cents\n\n\ndef test_half():\n    assert half_cents(5) == 2\n"
     "    assert half_cents(7) == 4\n"),
]

# ---------------------------------------------------------------- transfer projects
SETTLE_SKELETON = '''"""settle: settlement of metered charges (see README.md for the contract)."""

from decimal import Decimal


def parse_amount(text: str) -> int:
    """'12.34' -> 1234 cents."""
    units, _, cents = text.strip().partition(".")
    return int(units) * 100 + int((cents + "00")[:2])


def format_amount(cents: int) -> str:
    """1234 -> '12.34'."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def split(cents: int, parts: int) -> list:
    raise NotImplementedError


def fee(cents: int) -> int:
    raise NotImplementedError


def net(cents: int) -> int:
    raise NotImplementedError


def make_id(n: int) -> str:
    raise NotImplementedError


def is_valid_id(text: str) -> bool:
    raise NotImplementedError


def settle(charges: list) -> dict:
    raise NotImplementedError
'''

SETTLE_SOLUTION = '''"""settle: settlement of metered charges (see README.md for the contract)."""

import decimal
from decimal import Decimal

FEE_BPS = {{SLOT:fee_bps}}
ID_PREFIX = "{{SLOT:id_prefix}}"
ROUND_MODE = "{{SLOT:round_mode}}"


def parse_amount(text: str) -> int:
    """'12.34' -> 1234 cents."""
    units, _, cents = text.strip().partition(".")
    return int(units) * 100 + int((cents + "00")[:2])


def format_amount(cents: int) -> str:
    """1234 -> '12.34'."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def split(cents: int, parts: int) -> list:
    if parts <= 0:
        raise ValueError("parts must be positive")
    base, extra = divmod(cents, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def fee(cents: int) -> int:
    if cents < 0:
        raise ValueError("negative amount")
    exact = Decimal(cents) * FEE_BPS / Decimal(10000)
    return int(exact.quantize(Decimal(1), rounding=getattr(decimal, ROUND_MODE)))


def net(cents: int) -> int:
    return cents - fee(cents)


def make_id(n: int) -> str:
    if n < 0:
        raise ValueError("negative number")
    return f"{ID_PREFIX}{n:06d}"


def is_valid_id(text: str) -> bool:
    rest = text[len(ID_PREFIX):]
    return text.startswith(ID_PREFIX) and len(rest) == 6 and rest.isdigit()


def settle(charges: list) -> dict:
    gross = sum(c["cents"] for c in charges)
    fees = sum(fee(c["cents"]) for c in charges)
    return {"ids": [make_id(c["n"]) for c in charges], "gross": gross, "fees": fees, "net": gross - fees,
            "count": len(charges)}
'''

JOBS_SKELETON = '''"""jobqueue: a small job queue's bookkeeping (see README.md for the contract)."""


def normalize_name(name: str) -> str:
    """'  Nightly Report ' -> 'nightly-report'."""
    return "-".join(name.strip().lower().split())


def backoff_ms(attempt: int) -> int:
    """Exponential back-off: 100 ms doubled per attempt, at most 10 s."""
    return min(100 * 2 ** attempt, 10_000)


def should_retry(attempts: int) -> bool:
    raise NotImplementedError


def remaining_attempts(attempts: int) -> int:
    raise NotImplementedError


def page(items: list, number: int) -> list:
    raise NotImplementedError


def page_count(total: int) -> int:
    raise NotImplementedError


def format_ts(epoch: int) -> str:
    raise NotImplementedError


def parse_ts(text: str) -> int:
    raise NotImplementedError


def summary(jobs: list) -> dict:
    raise NotImplementedError
'''

JOBS_SOLUTION = '''"""jobqueue: a small job queue's bookkeeping (see README.md for the contract)."""

import calendar
import time

MAX_RETRIES = {{SLOT:max_retries}}
PAGE_SIZE = {{SLOT:page_size}}
TS_FORMAT = "{{SLOT:ts_format}}"


def normalize_name(name: str) -> str:
    """'  Nightly Report ' -> 'nightly-report'."""
    return "-".join(name.strip().lower().split())


def backoff_ms(attempt: int) -> int:
    """Exponential back-off: 100 ms doubled per attempt, at most 10 s."""
    return min(100 * 2 ** attempt, 10_000)


def should_retry(attempts: int) -> bool:
    return attempts < MAX_RETRIES


def remaining_attempts(attempts: int) -> int:
    return max(0, MAX_RETRIES - attempts)


def page(items: list, number: int) -> list:
    if number < 1:
        raise ValueError("pages start at 1")
    return list(items[(number - 1) * PAGE_SIZE:number * PAGE_SIZE])


def page_count(total: int) -> int:
    return -(-total // PAGE_SIZE)


def format_ts(epoch: int) -> str:
    return time.strftime(TS_FORMAT, time.gmtime(epoch))


def parse_ts(text: str) -> int:
    return calendar.timegm(time.strptime(text, TS_FORMAT))


def summary(jobs: list) -> dict:
    return {"names": [normalize_name(j["name"]) for j in jobs],
            "retrying": sum(1 for j in jobs if should_retry(j["attempts"])),
            "pages": page_count(len(jobs)),
            "first_seen": format_ts(min(j["epoch"] for j in jobs)) if jobs else None}
'''

E = 1_700_000_000  # an epoch the timestamp cases use


def settle_cases() -> list[tuple[str, str, float, list[str], str, list]]:
    """(id, dimension, weight, prerequisites, call, args); expectations are computed later."""
    cases = []
    amounts = ["0.00", "1.00", "12.34", "99.99", "1000.5"]
    for i, a in enumerate(amounts):
        cases.append((f"A-{i + 1:02d}", "A", 2, ["FINAL"], "parse_amount", [a]))
    for i, c in enumerate([0, 5, 1234, -250]):
        cases.append((f"A-{i + 6:02d}", "A", 2, ["FINAL"], "format_amount", [c]))
    cases.append(("A-10", "A", 3, ["FINAL"], "split", [100, 3]))
    cases.append(("A-11", "A", 3, ["FINAL"], "split", [7, 7]))
    for i, c in enumerate([10000, 5000, 25000, 15000, 1, 13514, 40541, 123456, 999, 0]):
        cases.append((f"B-{i + 1:02d}", "B", 3, ["FINAL"], "fee", [c]))
    for i, c in enumerate([5000, 25000]):
        cases.append((f"B-{i + 11:02d}", "B", 3, ["B-01"], "net", [c]))
    for i, n in enumerate([0, 1, 42, 999999]):
        cases.append((f"C-{i + 1:02d}", "C", 3, ["FINAL"], "make_id", [n]))
    for i, s in enumerate(["stl_000001", "txn_000001", "stl_12345", "stl_00000a"]):
        cases.append((f"C-{i + 5:02d}", "C", 2, ["C-01"], "is_valid_id", [s]))
    batches = [[{"n": 1, "cents": 5000}], [{"n": 2, "cents": 25000}, {"n": 3, "cents": 100}],
               [], [{"n": 7, "cents": 10000}, {"n": 8, "cents": 15000}, {"n": 9, "cents": 1}],
               [{"n": 10, "cents": 40541}], [{"n": 11, "cents": 13514}, {"n": 12, "cents": 0}]]
    for i, b in enumerate(batches):
        cases.append((f"D-{i + 1:02d}", "D", 4, ["B-01", "C-01"], "settle", [b]))
    cases.append(("E-01", "E", 2, ["FINAL"], "fee", [-1]))
    cases.append(("E-02", "E", 2, ["FINAL"], "make_id", [-5]))
    cases.append(("E-03", "E", 2, ["FINAL"], "split", [10, 0]))
    cases.append(("E-04", "E", 2, ["FINAL"], "net", [0]))
    cases.append(("E-05", "E", 2, ["V1"], "parse_amount", ["3.50"]))
    return cases


def jobs_cases() -> list[tuple[str, str, float, list[str], str, list]]:
    cases = []
    for i, n in enumerate(["Nightly Report", "  a  b ", "X"]):
        cases.append((f"A-{i + 1:02d}", "A", 2, ["FINAL"], "normalize_name", [n]))
    for i, a in enumerate([0, 1, 5, 7, 12]):
        cases.append((f"A-{i + 4:02d}", "A", 2, ["FINAL"], "backoff_ms", [a]))
    for i, a in enumerate([0, 2, 3, 4, 5]):
        cases.append((f"B-{i + 1:02d}", "B", 3, ["FINAL"], "should_retry", [a]))
    for i, a in enumerate([0, 3, 4, 9]):
        cases.append((f"B-{i + 6:02d}", "B", 3, ["B-01"], "remaining_attempts", [a]))
    cases.append(("B-10", "B", 3, ["FINAL"], "should_retry", [1]))
    items = list(range(70))
    for i, n in enumerate([1, 2, 3, 4]):
        cases.append((f"C-{i + 1:02d}", "C", 3, ["FINAL"], "page", [items, n]))
    for i, t in enumerate([0, 20, 25, 26, 100, 49, 51]):
        cases.append((f"C-{i + 5:02d}", "C", 2, ["C-01"], "page_count", [t]))
    for i, e in enumerate([0, E, E + 86399]):
        cases.append((f"D-{i + 1:02d}", "D", 3, ["FINAL"], "format_ts", [e]))
    for i, text in enumerate(["1970-01-01T00:00:00Z", "2023-11-14T22:13:20Z"]):
        cases.append((f"D-{i + 4:02d}", "D", 3, ["D-01"], "parse_ts", [text]))
    jobs = [{"name": f"Job {k}", "attempts": k % 6, "epoch": E + k} for k in range(30)]
    cases.append(("D-06", "D", 4, ["B-01", "C-01", "D-01"], "summary", [jobs]))
    cases.append(("D-07", "D", 4, ["B-01", "C-01", "D-01"], "summary", [jobs[:3]]))
    cases.append(("E-01", "E", 2, ["FINAL"], "page", [items, 0]))
    cases.append(("E-02", "E", 2, ["FINAL"], "summary", [[]]))
    cases.append(("E-03", "E", 2, ["FINAL"], "backoff_ms", [30]))
    cases.append(("E-04", "E", 2, ["V1"], "backoff_ms", [2]))
    cases.append(("E-05", "E", 2, ["FINAL"], "normalize_name", ["Tab\tName"]))
    return cases


PROJECTS = [
    {
        "id": "settle", "package": "settle", "skeleton": SETTLE_SKELETON, "solution": SETTLE_SOLUTION,
        "slots": ["fee_bps", "id_prefix", "round_mode"], "cases": settle_cases,
        "dimensions": {"A": ("Public contract: amounts", 30), "B": ("Fee correctness", 25),
                       "C": ("Record identifiers", 20), "D": ("Settlement batches", 15),
                       "E": ("Validation and operability", 10)},
        "caps": [{"id": "FEE_CONSERVATION", "cap": 35, "cases": ["B-01", "B-02"],
                  "publicInvariant": "Every charge pays exactly the house fee, rounded by the house rounding mode."},
                 {"id": "ID_CONTRACT", "cap": 60, "cases": ["C-01"],
                  "publicInvariant": "Every settled charge carries an identifier in the house format."}],
        "readme": "# settle\n\nSettle metered charges. Public functions (module `settle`): parse_amount, "
                  "format_amount, split, fee, net, make_id, is_valid_id, settle. Fees follow the house fee rule "
                  "and the house rounding mode; identifiers follow the house identifier rule.\n\n"
                  "Public check: `python3 public_check.py` (run by the user before any review).\n",
        "plan": "Plan for settle: implement the missing public functions in settle/__init__.py as the README "
                "describes: split, fee, net, make_id, is_valid_id and settle. Fees and rounding follow our "
                "house fee rule and rounding of money; record identifiers follow our house identifiers rule. "
                "Keep parse_amount and format_amount as they are.",
        "check": "settle",
        "probe": [("fee", [0]), ("net", [0]), ("make_id", [1]), ("split", [3, 3]), ("settle", [[]])],
    },
    {
        "id": "jobqueue", "package": "jobqueue", "skeleton": JOBS_SKELETON, "solution": JOBS_SOLUTION,
        "slots": ["max_retries", "page_size", "ts_format"], "cases": jobs_cases,
        "dimensions": {"A": ("Public contract: names and back-off", 30), "B": ("Retry policy", 25),
                       "C": ("Paging", 20), "D": ("Timestamps and summaries", 15),
                       "E": ("Validation and operability", 10)},
        "caps": [{"id": "RETRY_BOUND", "cap": 40, "cases": ["B-03"],
                  "publicInvariant": "No job is attempted more often than the house retry rule allows."}],
        "readme": "# jobqueue\n\nBookkeeping of a job queue. Public functions (module `jobqueue`): normalize_name, "
                  "backoff_ms, should_retry, remaining_attempts, page, page_count, format_ts, parse_ts, summary. "
                  "Retries, paging and timestamps follow the house rules.\n\n"
                  "Public check: `python3 public_check.py` (run by the user before any review).\n",
        "plan": "Plan for jobqueue: implement the missing public functions in jobqueue/__init__.py as the README "
                "describes: should_retry, remaining_attempts, page, page_count, format_ts, parse_ts and summary. "
                "Every job or delivery that fails is retried by our house rule; every listing we page and every "
                "timestamp we write follow our house rules too. Keep normalize_name and backoff_ms as they are.",
        "check": "jobqueue",
        "probe": [("should_retry", [0]), ("page", [[], 1]), ("page_count", [0]), ("format_ts", [0]),
                  ("summary", [[]])],
    },
]

NATIVE_SKILLS = {
    "record-identifiers": "---\nname: record-identifiers\n---\n# Record identifiers\n\nEvery record identifier "
                          "uses the house prefix: ID_PREFIX = \"stl_\" followed by the number zero-padded to six "
                          "digits. Validate identifiers against the same rule.\n",
    "listing-pages": "---\nname: listing-pages\n---\n# Paging listings\n\nEvery listing we page uses PAGE_SIZE = 25 "
                     "items; page numbers start at 1.\n",
    "public-contract": "---\nname: public-contract\n---\n# Keep the public contract\n\nRun the public check before "
                       "delivering; keep existing public functions unchanged; raise ValueError on invalid input.\n",
}

PUBLIC_CHECK = '''"""Public interface check of {name}: every public function exists and answers a trivial call."""

import sys

sys.path.insert(0, "/workspace")
sys.dont_write_bytecode = True

import {name} as m  # noqa: E402

failures = []
for fn, args in {probe!r}:
    try:
        getattr(m, fn)(*args)
    except Exception as exc:  # any failure of the public surface is reported, not raised
        failures.append(f"{{fn}}: {{type(exc).__name__}}: {{exc}}")
if failures:
    print("public check failed:\\n" + "\\n".join(failures))
    sys.exit(1)
print("public check passed")
'''


def _run_reference(package: str, source: str, cases) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / package).mkdir()
        (Path(tmp) / package / "__init__.py").write_text(source)
        sys.path.insert(0, tmp)
        try:
            module = importlib.import_module(package)
            out = {}
            for cid, _dim, _w, _pre, call, args in cases:
                try:
                    out[cid] = {"call": call, "args": args, "expect": getattr(module, call)(*json.loads(json.dumps(args)))}
                except ValueError:
                    out[cid] = {"call": call, "args": args, "raises": "ValueError"}
            return out
        finally:
            sys.path.remove(tmp)
            sys.modules.pop(package, None)


def gate_negative_cases(cases, checks: dict[str, dict]) -> list:
    """A case that expects a raise is gated on the first earlier case of the same function that
    returns a value: a stub that raises everywhere would otherwise pass every negative case without
    the behaviour it guards, and score above a submission that does nothing."""
    gated = []
    for cid, dim, weight, pre, call, args in cases:
        if "raises" in checks[cid]:
            positive = next((c for c, *_rest, f, _a in gated if f == call and "expect" in checks[c]), None)
            if positive is None:
                raise SystemExit(f"{cid}: a negative case of {call} needs an earlier positive case of {call}")
            pre = [p for p in pre if p != "FINAL"] + [positive]
        gated.append((cid, dim, weight, pre, call, args))
    return gated


def _render(template: str, names: list[str]) -> str:
    for n in names:
        template = template.replace("{{SLOT:" + n + "}}", SLOT_PATTERNS[n][1])
    return template


def _json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def _text(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value, encoding="utf-8")


def author(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    study = {"format": "membench-transfer/1", "name": "transfer-v1",
             "description": "membench's own transfer study: six learning tasks teach house conventions; two "
                            "transfer projects need them without stating them.",
             "learning": [], "projects": [], "native_bank": "native_bank", "ablate_skill": "L1-fees",
             "conditions": ["no_memory", "learned_bank", "native_bank", "ablated_bank"]}
    for tid, package, module, stub, template, slot_name, instruction, oracle in LEARNING:
        repo = out / "repos" / tid
        _text(repo / package / "__init__.py", "")
        _text(repo / package / f"{module}.py", stub)
        _text(repo / "README.md", f"# {package}\n\nA small repository of the learning task {tid}.\n")
        _text(out / "hidden" / "learning" / tid / "test_oracle.py", oracle)
        _json(out / "hidden" / "learning" / tid / "solution.json",
              {"files": {f"{package}/{module}.py": template}, "slots": {slot_name: slot(slot_name)}})
        study["learning"].append({"id": tid, "repo": f"repos/{tid}", "instruction": instruction,
                                  "oracle": f"hidden/learning/{tid}/test_oracle.py",
                                  "solution": f"hidden/learning/{tid}/solution.json"})
    for p in PROJECTS:
        pid, package = p["id"], p["package"]
        ws = out / "projects" / pid / "workspace"
        _text(ws / package / "__init__.py", p["skeleton"])
        _text(ws / "README.md", p["readme"])
        check = PUBLIC_CHECK.format(name=p["check"], probe=p["probe"])
        _text(ws / "public_check.py", check)
        _text(out / "projects" / pid / "public_check.py", check)
        _json(out / "projects" / pid / "scenario.json", {
            "plan": p["plan"],
            "answers": [{"match": "(?i)house|rule|convention",
                         "reply": "Our house rules are the ones your team already follows; I cannot say more."}],
            "default_answer": "Please follow the README contract.",
            "accept": "Thanks, the delivery passes the public check; I am freezing it for the hidden tests.",
            "public_check_failed": "The public check fails on your delivery:\n{output}\nPlease fix it and "
                                   "deliver again.",
            "test_feedback": "The hidden tests ran: {passed} of {cases} cases passed.",
            "max_review_rounds": 2})
        cases = p["cases"]()
        checks = _run_reference(package, _render(p["solution"], p["slots"]), cases)
        cases = gate_negative_cases(cases, checks)
        _json(out / "hidden" / "projects" / pid / "cases.json", {"module": package, "cases": checks})
        _json(out / "hidden" / "projects" / pid / "manifest.v2.json", {
            "schemaVersion": 2, "taskId": pid, "profile": "membench-transfer-v1", "maxScore": 100,
            "acceptance": {"mode": "all_cases_pass"},
            "dimensions": {k: {"title": t, "weight": w} for k, (t, w) in p["dimensions"].items()},
            "hardCaps": p["caps"], "specGaps": [],
            "cases": [{"id": cid, "title": f"{call}{tuple(args)!r}"[:80], "weight": w, "dimension": d,
                       "prerequisites": pre} for cid, d, w, pre, call, args in cases]})
        _json(out / "hidden" / "projects" / pid / "solution.json",
              {"files": {f"{package}/__init__.py": p["solution"]}, "slots": {n: slot(n) for n in p["slots"]}})
        study["projects"].append({
            "id": pid, "workspace": f"projects/{pid}/workspace", "public_check": f"projects/{pid}/public_check.py",
            "scenario": f"projects/{pid}/scenario.json", "evaluator": f"hidden/projects/{pid}/manifest.v2.json",
            "cases": f"hidden/projects/{pid}/cases.json", "solution": f"hidden/projects/{pid}/solution.json"})
    for name, text in NATIVE_SKILLS.items():
        _text(out / "native_bank" / name / "SKILL.md", text)
    write_manifest(out / "native_bank")
    _json(out / "study.json", study)


if __name__ == "__main__":
    author(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures" / "transfer-v1")
