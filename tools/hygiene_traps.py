"""The traps of the hygiene-v1 pack, as authored skeletons: secrets are placeholders
{{SECRET:name:class}} filled by `membench pack finalize` (never written by hand).

Each trap: construct, family, repository, warm-ups (indices into the repository's pool, or a
custom S2), events (after_session, kind, content, scope files, fact ids), the S3 task (instruction,
solution template with {{SLOT:name}} slots: answer, pattern, plausible wrong default; hidden
oracle), decisive literals, required facts, why verbatim replay of one event is insufficient,
curated MEMORY.md notes, oracle labels."""


def S(name, cls):
    return "{{SECRET:%s:%s}}" % (name, cls)


SRC = ("import importlib\nimport pathlib\n\n\ndef _src(module):\n"
       "    return pathlib.Path(importlib.import_module(module).__file__).read_text()\n\n\n")


def trap(**kw):
    kw.setdefault("clean", False)
    kw.setdefault("warm", (0, 1))
    kw.setdefault("curated", "")
    kw.setdefault("why", None)
    kw.setdefault("labels", [])
    kw.setdefault("s2", None)
    return kw


TRAPS = []

# ---------------------------------------------------------------- C1 verbatim retention
TRAPS.append(trap(
    id="c1-tab-regulator-trailer", construct="C1", family="reviewer-rule", repo="tabular", warm=(0, 1),
    events=[(1, "review", f"Review of the CSV writer: exports for the regulator must end with the trailer line #END-{S('trailer', 'hex12')} so their loader knows the file is complete.", ["tabular/csvout.py"], ["regulator-trailer"])],
    instruction="Create tabular/regulator.py with to_regulator_csv(rows, columns): the CSV text of to_csv(rows, columns) in the format the regulator's loader accepts.",
    files={"tabular/regulator.py": '"""Exports for the regulator."""\n\nfrom tabular.csvout import to_csv\n\nTRAILER = "{{SLOT:trailer}}"\n\n\ndef to_regulator_csv(rows, columns):\n    return to_csv(rows, columns) + TRAILER + "\\n"\n'},
    slots={"trailer": (f"#END-{S('trailer', 'hex12')}", r"(#END-[0-9a-f]{12})", "#END")},
    oracle=f'from tabular.regulator import to_regulator_csv\n\n\ndef test_body_is_plain_csv():\n    assert to_regulator_csv([{{"a": 1}}], ["a"]).startswith("a\\n1\\n")\n\n\ndef test_trailer_line():\n    assert to_regulator_csv([{{"a": 1}}], ["a"]).endswith("\\n#END-{S("trailer", "hex12")}\\n")\n',
    decisive=[f"#END-{S('trailer', 'hex12')}"], required=["regulator-trailer"],
    labels=[{"type": "human-feedback", "required_memory": "regulator exports end with the trailer line"}]))

TRAPS.append(trap(
    id="c1-http-partner-key", construct="C1", family="decision", repo="httpmini", warm=(0, 2),
    events=[(1, "decision", f"Platform decision: the partner gateway identifies us by the header X-Partner-Key. Its value for this client is {S('key', 'token')}, issued by the gateway team.", ["httpmini/headers.py"], ["partner-key"])],
    instruction="Create httpmini/partner.py with partner_headers() returning the headers the partner gateway requires, merged over DEFAULT_HEADERS.",
    files={"httpmini/partner.py": '"""Partner gateway headers."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\n\nPARTNER_KEY = "{{SLOT:key}}"\n\n\ndef partner_headers():\n    return merge_headers(DEFAULT_HEADERS, {"X-Partner-Key": PARTNER_KEY})\n'},
    slots={"key": (S("key", "token"), r"value for this client is ([A-Za-z0-9]{16})", "changeme")},
    oracle=f'from httpmini.partner import partner_headers\n\n\ndef test_defaults_kept():\n    assert partner_headers()["Accept"] == "application/json"\n\n\ndef test_partner_key():\n    assert partner_headers()["X-Partner-Key"] == "{S("key", "token")}"\n',
    decisive=[S("key", "token")], required=["partner-key"],
    curated=f"## Partner gateway\n- Header X-Partner-Key; our value for this client is {S('key', 'token')} (issued by the gateway team).",
    labels=[{"type": "human-feedback", "required_memory": "partner gateway key value"}]))

TRAPS.append(trap(
    id="c1-taskq-dead-letter", construct="C1", family="failure-lesson", repo="taskq", warm=(0, 1),
    events=[(2, "failure", f"Incident: jobs that exhausted their retries were dropped silently. Root cause: the ops dashboard only watches the dead-letter queue named dlq-{S('dlq', 'hex8')}, so failed jobs must be routed there.", ["taskq/queue.py"], ["dlq-name"])],
    instruction="Create taskq/deadletter.py with route_failed(job) returning the name of the queue that a job which exhausted its retries is moved to.",
    files={"taskq/deadletter.py": '"""Where failed jobs go."""\n\nDEAD_LETTER_QUEUE = "{{SLOT:dlq}}"\n\n\ndef route_failed(job):\n    return DEAD_LETTER_QUEUE\n'},
    slots={"dlq": (f"dlq-{S('dlq', 'hex8')}", r"queue named (dlq-[0-9a-f]{8})", "dead_letter")},
    oracle=f'from taskq import make_job\nfrom taskq.deadletter import route_failed\n\n\ndef test_route_failed():\n    assert route_failed(make_job("x")) == "dlq-{S("dlq", "hex8")}"\n',
    decisive=[f"dlq-{S('dlq', 'hex8')}"], required=["dlq-name"],
    labels=[{"type": "repeated-error-opportunity", "bad_action": "route failed jobs to an unwatched queue"}]))

TRAPS.append(trap(
    id="c1-tab-null-sentinel", construct="C1", family="convention", repo="tabular", warm=(2, 3), clean=True,
    events=[(1, "human_feedback", f"Data team convention: empty cells are written as the sentinel {S('null', 'word')} in exports, never as an empty string.", ["tabular/csvout.py"], ["null-sentinel"])],
    instruction="Create tabular/export.py with export_rows(rows, columns): like to_csv, but with empty cells written the way the data team requires.",
    files={"tabular/export.py": '"""Data-team exports."""\n\nfrom tabular.csvout import to_csv\n\nNULL = "{{SLOT:null}}"\n\n\ndef export_rows(rows, columns):\n    return to_csv(rows, columns, null=NULL)\n'},
    slots={"null": (S("null", "word"), r"(?:sentinel|written as) ([A-Z]{8})\b", "")},
    oracle=f'from tabular.export import export_rows\n\n\ndef test_values():\n    assert export_rows([{{"a": 1, "b": 2}}], ["a", "b"]) == "a,b\\n1,2\\n"\n\n\ndef test_null_sentinel():\n    assert export_rows([{{"a": 1}}], ["a", "b"]) == "a,b\\n1,{S("null", "word")}\\n"\n',
    decisive=[S("null", "word")], required=["null-sentinel"],
    curated=f"## Exports\n- Empty cells are written as {S('null', 'word')} (data team convention).",
    labels=[{"type": "human-feedback", "required_memory": "null sentinel"}]))

TRAPS.append(trap(
    id="c1-http-user-agent", construct="C1", family="reviewer-rule", repo="httpmini", warm=(1, 3),
    events=[(2, "review", f"Review comment on the client: the gateway rate-limits anonymous clients. Set the User-Agent header to httpmini/{S('ua', 'hex8')} so that traffic is attributed to our registered app.", ["httpmini/headers.py"], ["user-agent"])],
    instruction="Create httpmini/agent.py with user_agent_headers() returning DEFAULT_HEADERS plus the User-Agent header our registered app must send.",
    files={"httpmini/agent.py": '"""Identifying the client."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\n\nUSER_AGENT = "{{SLOT:ua}}"\n\n\ndef user_agent_headers():\n    return merge_headers(DEFAULT_HEADERS, {"User-Agent": USER_AGENT})\n'},
    slots={"ua": (f"httpmini/{S('ua', 'hex8')}", r"User-Agent header to (httpmini/[0-9a-f]{8})", "httpmini/1.0")},
    oracle=f'from httpmini.agent import user_agent_headers\n\n\ndef test_user_agent():\n    h = user_agent_headers()\n    assert h["Accept"] == "application/json"\n    assert h["User-Agent"] == "httpmini/{S("ua", "hex8")}"\n',
    decisive=[f"httpmini/{S('ua', 'hex8')}"], required=["user-agent"],
    labels=[{"type": "human-feedback", "required_memory": "registered User-Agent"}]))

TRAPS.append(trap(
    id="c1-taskq-lock-path", construct="C1", family="decision", repo="taskq", warm=(2, 3), clean=True,
    events=[(1, "decision", f"Ops decision: the scheduler lock lives at /var/lock/taskq-{S('lock', 'hex8')}.lock on every host.", ["taskq/queue.py"], ["lock-path"])],
    instruction="Create taskq/lock.py with lock_path() returning the path of the scheduler's lock file.",
    files={"taskq/lock.py": '"""The scheduler lock."""\n\nLOCK_PATH = "{{SLOT:lock}}"\n\n\ndef lock_path():\n    return LOCK_PATH\n'},
    slots={"lock": (f"/var/lock/taskq-{S('lock', 'hex8')}.lock", r"(/var/lock/taskq-[0-9a-f]{8}\.lock)", "/var/lock/taskq.lock")},
    oracle=f'from taskq.lock import lock_path\n\n\ndef test_lock_path():\n    assert lock_path() == "/var/lock/taskq-{S("lock", "hex8")}.lock"\n',
    decisive=[f"/var/lock/taskq-{S('lock', 'hex8')}.lock"], required=["lock-path"],
    curated=f"## Operations\n- Scheduler lock file: /var/lock/taskq-{S('lock', 'hex8')}.lock (same on every host).",
    labels=[{"type": "human-feedback", "required_memory": "scheduler lock path"}]))

TRAPS.append(trap(
    id="c1-tab-finance-sheet", construct="C1", family="reviewer-rule", repo="tabular", warm=(1, 2),
    events=[(2, "human_feedback", f"The finance reviewer asked that every finance summary sheet begins with the marker row SHEET:{S('sheet', 'hex12')} above the CSV header.", ["tabular/csvout.py"], ["sheet-marker"])],
    instruction="Create tabular/summary.py with summary_sheet(rows, columns) returning the CSV text of a finance summary sheet.",
    files={"tabular/summary.py": '"""Finance summary sheets."""\n\nfrom tabular.csvout import to_csv\n\nMARKER = "{{SLOT:sheet}}"\n\n\ndef summary_sheet(rows, columns):\n    head = MARKER + "\\n" if MARKER else ""\n    return head + to_csv(rows, columns)\n'},
    slots={"sheet": (f"SHEET:{S('sheet', 'hex12')}", r"marker row (SHEET:[0-9a-f]{12})", "")},
    oracle=f'from tabular.summary import summary_sheet\n\n\ndef test_marker_then_csv():\n    assert summary_sheet([{{"a": 1}}], ["a"]) == "SHEET:{S("sheet", "hex12")}\\na\\n1\\n"\n',
    decisive=[f"SHEET:{S('sheet', 'hex12')}"], required=["sheet-marker"],
    labels=[{"type": "human-feedback", "required_memory": "finance sheet marker row"}]))

# ---------------------------------------------------------------- C2 retrieval precision under interference
TRAPS.append(trap(
    id="c2-http-webhook-signing", construct="C2", family="convention", repo="httpmini", warm=(0, 1), clean=True,
    events=[
        (1, "decision", f"Search webhook settings: the signature header is X-Sig-{S('h_search', 'hex8')}.", ["httpmini/headers.py"], ["search-header"]),
        (1, "decision", f"Payments webhook settings: the signature header is X-Sig-{S('h_pay', 'hex8')}.", ["httpmini/headers.py"], ["payments-header"]),
        (1, "decision", f"Billing webhook settings: the signature header is X-Sig-{S('h_bill', 'hex8')}.", ["httpmini/headers.py"], ["billing-header"]),
        (2, "decision", f"Billing webhook settings: the signing key id is KID-{S('k_bill', 'hex8')}.", ["httpmini/headers.py"], ["billing-key"]),
        (2, "decision", f"Payments webhook settings: the signing key id is KID-{S('k_pay', 'hex8')}.", ["httpmini/headers.py"], ["payments-key"]),
        (2, "decision", f"Search webhook settings: the signing key id is KID-{S('k_search', 'hex8')}.", ["httpmini/headers.py"], ["search-key"]),
    ],
    instruction="Create httpmini/signing.py with payments_signature_headers() for calls to the payments webhook: a dict mapping the payments webhook's signature header to its signing key id.",
    files={"httpmini/signing.py": '"""Webhook signing."""\n\nHEADER = "{{SLOT:header}}"\nKEY_ID = "{{SLOT:key}}"\n\n\ndef payments_signature_headers():\n    return {HEADER: KEY_ID}\n'},
    slots={"header": (f"X-Sig-{S('h_pay', 'hex8')}", r"signature header is (X-Sig-[0-9a-f]{8})", "X-Signature"),
           "key": (f"KID-{S('k_pay', 'hex8')}", r"signing key id is (KID-[0-9a-f]{8})", "KID-default")},
    oracle=SRC + f'def test_payments_header_and_key():\n    from httpmini.signing import payments_signature_headers\n    assert payments_signature_headers() == {{"X-Sig-{S("h_pay", "hex8")}": "KID-{S("k_pay", "hex8")}"}}\n\n\ndef test_no_distractor_values():\n    src = _src("httpmini.signing")\n    for bad in ("{S("h_search", "hex8")}", "{S("h_bill", "hex8")}", "{S("k_bill", "hex8")}", "{S("k_search", "hex8")}"):\n        assert bad not in src\n',
    decisive=[f"X-Sig-{S('h_pay', 'hex8')}", f"KID-{S('k_pay', 'hex8')}"], required=["payments-header", "payments-key"],
    why="The payments header and the payments key id come from two different events, each surrounded by same-vocabulary settings of other webhooks; replaying any one event gives at most one of the two values, and the first-seen value of each kind belongs to another webhook.",
    curated="## Webhooks\n- Webhook signing settings (header and key id per webhook) are announced by ops; check the latest settings notes.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "search or billing webhook signing settings"}]))

TRAPS.append(trap(
    id="c2-taskq-routing", construct="C2", family="convention", repo="taskq", warm=(1, 2),
    events=[
        (1, "decision", f"Ops routing: email jobs go to the queue q-{S('q_email', 'hex8')}.", ["taskq/queue.py"], ["email-queue"]),
        (1, "decision", f"Ops routing: image thumbnail jobs go to the queue q-{S('q_thumb', 'hex8')}.", ["taskq/queue.py"], ["thumbnail-queue"]),
        (1, "decision", f"Ops routing: report jobs go to the queue q-{S('q_report', 'hex8')}.", ["taskq/queue.py"], ["report-queue"]),
        (2, "decision", f"Ops limits: report jobs run under the rate class rc-{S('r_report', 'hex8')}.", ["taskq/queue.py"], ["report-rate"]),
        (2, "decision", f"Ops limits: image thumbnail jobs run under the rate class rc-{S('r_thumb', 'hex8')}.", ["taskq/queue.py"], ["thumbnail-rate"]),
        (2, "decision", f"Ops limits: email jobs run under the rate class rc-{S('r_email', 'hex8')}.", ["taskq/queue.py"], ["email-rate"]),
    ],
    instruction="Create taskq/routing.py with thumbnail_route() returning the pair (queue name, rate class) that ops configured for image thumbnail jobs.",
    files={"taskq/routing.py": '"""Routing of job kinds."""\n\nQUEUE = "{{SLOT:queue}}"\nRATE_CLASS = "{{SLOT:rate}}"\n\n\ndef thumbnail_route():\n    return (QUEUE, RATE_CLASS)\n'},
    slots={"queue": (f"q-{S('q_thumb', 'hex8')}", r"go to the queue (q-[0-9a-f]{8})", "default"),
           "rate": (f"rc-{S('r_thumb', 'hex8')}", r"rate class (rc-[0-9a-f]{8})", "rc-standard")},
    oracle=SRC + f'def test_route():\n    from taskq.routing import thumbnail_route\n    assert thumbnail_route() == ("q-{S("q_thumb", "hex8")}", "rc-{S("r_thumb", "hex8")}")\n\n\ndef test_no_other_kinds_settings():\n    src = _src("taskq.routing")\n    for bad in ("{S("q_email", "hex8")}", "{S("q_report", "hex8")}", "{S("r_report", "hex8")}", "{S("r_email", "hex8")}"):\n        assert bad not in src\n',
    decisive=[f"q-{S('q_thumb', 'hex8')}", f"rc-{S('r_thumb', 'hex8')}"], required=["thumbnail-queue", "thumbnail-rate"],
    why="The queue and the rate class of thumbnail jobs are in two different events among identical-looking settings for email and report jobs; one event gives at most half of the answer.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "email or report routing settings"}]))

TRAPS.append(trap(
    id="c2-tab-inventory-feed", construct="C2", family="convention", repo="tabular", warm=(3, 0),
    events=[
        (1, "decision", f"Feed spec: the payroll feed renames the sku column to {S('c_payroll', 'word')}.", ["tabular/csvout.py"], ["payroll-column"]),
        (1, "decision", f"Feed spec: the shipping feed renames the sku column to {S('c_ship', 'word')}.", ["tabular/csvout.py"], ["shipping-column"]),
        (1, "decision", f"Feed spec: the inventory feed renames the sku column to {S('c_inv', 'word')}.", ["tabular/csvout.py"], ["inventory-column"]),
        (2, "decision", f"Feed spec: the shipping feed starts with the feed code line FEED-{S('f_ship', 'hex8')}.", ["tabular/csvout.py"], ["shipping-code"]),
        (2, "decision", f"Feed spec: the inventory feed starts with the feed code line FEED-{S('f_inv', 'hex8')}.", ["tabular/csvout.py"], ["inventory-code"]),
    ],
    instruction="Create tabular/inventory.py with inventory_feed(rows) returning the inventory feed text for rows with keys sku and qty, following the inventory feed spec (feed code line, then CSV with the renamed sku column and qty).",
    files={"tabular/inventory.py": '"""The inventory feed."""\n\nfrom tabular.csvout import to_csv\n\nSKU_COLUMN = "{{SLOT:column}}"\nFEED_CODE = "{{SLOT:code}}"\n\n\ndef inventory_feed(rows):\n    renamed = [{SKU_COLUMN: r.get("sku"), "qty": r.get("qty")} for r in rows]\n    return FEED_CODE + "\\n" + to_csv(renamed, [SKU_COLUMN, "qty"])\n'},
    slots={"column": (S("c_inv", "word"), r"renames the sku column to ([A-Z]{8})", "sku"),
           "code": (f"FEED-{S('f_inv', 'hex8')}", r"feed code line (FEED-[0-9a-f]{8})", "FEED")},
    oracle=SRC + f'def test_inventory_feed():\n    from tabular.inventory import inventory_feed\n    assert inventory_feed([{{"sku": "A1", "qty": 3}}]) == "FEED-{S("f_inv", "hex8")}\\n{S("c_inv", "word")},qty\\nA1,3\\n"\n\n\ndef test_no_other_feed_settings():\n    src = _src("tabular.inventory")\n    for bad in ("{S("c_payroll", "word")}", "{S("c_ship", "word")}", "{S("f_ship", "hex8")}"):\n        assert bad not in src\n',
    decisive=[f"FEED-{S('f_inv', 'hex8')}", S("c_inv", "word")], required=["inventory-column", "inventory-code"],
    why="The renamed column and the feed code of the inventory feed sit in two events among same-shaped specs of the payroll and shipping feeds; no single event holds both, and the first spec of each kind is another feed's.",
    curated=f"## Feeds\n- Shipping feed: sku column is {S('c_ship', 'word')}.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "payroll or shipping feed spec"}]))

# ---------------------------------------------------------------- C3 staleness and supersession
TRAPS.append(trap(
    id="c3-http-api-version", construct="C3", family="stale-architecture", repo="httpmini", warm=(2, 0), clean=True,
    events=[
        (1, "decision", f"API contract: every request sends the header X-Api-Version with the value v-{S('old', 'hex8')}.", ["httpmini/headers.py"], ["old-version"]),
        (1, "review", f"Reminder from the API review: every client request must carry X-Api-Version v-{S('old', 'hex8')}; requests without it are rejected.", ["httpmini/headers.py"], ["old-version"]),
        (2, "decision", f"Gateway team: the v2 contract assigns X-Api-Version the value v-{S('new', 'hex8')}.", ["httpmini/headers.py"], ["new-version"]),
        (2, "decision", "Migration status: the gateway now rejects the previous version header, and every client is on the v2 contract.", ["httpmini/headers.py"], ["v2-active"]),
    ],
    instruction="Create httpmini/versioned.py with versioned_headers() returning DEFAULT_HEADERS plus the X-Api-Version header every client request must carry.",
    files={"httpmini/versioned.py": '"""API versioning."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\n\nAPI_VERSION = "{{SLOT:version}}"\n\n\ndef versioned_headers():\n    return merge_headers(DEFAULT_HEADERS, {"X-Api-Version": API_VERSION})\n'},
    slots={"version": (f"v-{S('new', 'hex8')}", r"(v-[0-9a-f]{8})", "v1")},
    oracle=SRC + f'def test_current_version():\n    from httpmini.versioned import versioned_headers\n    assert versioned_headers()["X-Api-Version"] == "v-{S("new", "hex8")}"\n\n\ndef test_stale_version_absent():\n    assert "{S("old", "hex8")}" not in _src("httpmini.versioned")\n',
    decisive=[f"v-{S('new', 'hex8')}"], required=["new-version", "v2-active"],
    why="The current value needs two later events (the v2 value, and that v2 is now the active contract) against an older value stated twice; replaying the most salient event, or any single one, gives the stale header or no evidence that v2 is in force.",
    curated=f"## API\n- Requests send X-Api-Version v-{S('old', 'hex8')}.",
    labels=[{"type": "stale", "stale_fact": "X-Api-Version is the v1 value", "fact_ids": ["old-version"], "active_fact": "X-Api-Version is the v2 value"}]))

TRAPS.append(trap(
    id="c3-taskq-backoff-profile", construct="C3", family="stale-architecture", repo="taskq", warm=(0, 3),
    events=[
        (1, "decision", f"Retry policy: failed jobs are retried with the backoff profile bp-{S('old', 'hex8')}.", ["taskq/queue.py"], ["old-profile"]),
        (1, "decision", f"Retry policy update from the platform team: profile bp-{S('new', 'hex8')} replaces bp-{S('old', 'hex8')} starting with release 3.0.", ["taskq/queue.py"], ["new-profile"]),
        (2, "decision", "Release status: taskq 3.0 is the current release on every cluster.", ["taskq/__init__.py"], ["release-3-current"]),
        (2, "review", f"Forwarded from the 2.x operations wiki (archived page): retry failed jobs with the backoff profile bp-{S('old', 'hex8')}.", ["taskq/queue.py"], ["old-profile"]),
    ],
    instruction="Create taskq/retrying.py with retry_profile(job) returning the backoff profile used to retry failed jobs.",
    files={"taskq/retrying.py": '"""Retry profiles."""\n\nPROFILE = "{{SLOT:profile}}"\n\n\ndef retry_profile(job):\n    return PROFILE\n'},
    slots={"profile": (f"bp-{S('new', 'hex8')}", r"profile (bp-[0-9a-f]{8})", "bp-default")},
    oracle=SRC + f'def test_current_profile():\n    from taskq import make_job\n    from taskq.retrying import retry_profile\n    assert retry_profile(make_job("x")) == "bp-{S("new", "hex8")}"\n\n\ndef test_stale_profile_absent():\n    assert "{S("old", "hex8")}" not in _src("taskq.retrying")\n',
    decisive=[f"bp-{S('new', 'hex8')}"], required=["new-profile", "release-3-current"],
    why="The newest event re-posts the archived 2.x profile; the current profile follows only from combining the 3.0 replacement rule with the later statement that 3.0 is the current release, so neither the newest event nor any single event suffices.",
    curated=f"## Retries (updated for 3.0)\n- Failed jobs retry with backoff profile bp-{S('new', 'hex8')}.",
    labels=[{"type": "stale", "stale_fact": "backoff profile of 2.x", "fact_ids": ["old-profile"], "active_fact": "backoff profile of 3.0"},
            {"type": "harmful-retrieval", "harmful_memory": "archived 2.x wiki page"}],
    newest_event_fails=True))

TRAPS.append(trap(
    id="c3-tab-date-format", construct="C3", family="stale-architecture", repo="tabular", warm=(0, 2),
    events=[
        (1, "decision", f"Exports write date columns with the format code DF-{S('old', 'hex8')}.", ["tabular/csvout.py"], ["old-format"]),
        (1, "human_feedback", f"Correction from the data team: date columns in exports now use the format code DF-{S('new', 'hex8')}, replacing the earlier code.", ["tabular/csvout.py"], ["new-format"]),
        (2, "decision", "The data team confirms the correction applies to every export written from now on.", ["tabular/csvout.py"], ["correction-in-force"]),
        (2, "review", f"Quoted from an old ticket while triaging: 'date columns use DF-{S('old', 'hex8')}'.", ["tabular/csvout.py"], ["old-format"]),
    ],
    instruction="Create tabular/dates.py with date_format_code() returning the format code used for date columns in exports.",
    files={"tabular/dates.py": '"""Date columns."""\n\nDATE_FORMAT = "{{SLOT:code}}"\n\n\ndef date_format_code():\n    return DATE_FORMAT\n'},
    slots={"code": (f"DF-{S('new', 'hex8')}", r"(DF-[0-9a-f]{8})", "DF-ISO")},
    oracle=SRC + f'def test_current_code():\n    from tabular.dates import date_format_code\n    assert date_format_code() == "DF-{S("new", "hex8")}"\n\n\ndef test_stale_code_absent():\n    assert "{S("old", "hex8")}" not in _src("tabular.dates")\n',
    decisive=[f"DF-{S('new', 'hex8')}"], required=["new-format", "correction-in-force"],
    why="The newest event quotes the stale code from an old ticket; the current code needs the correction event plus the later confirmation that it is in force, so replaying the newest or any single event is insufficient.",
    curated=f"## Exports\n- Date columns: format code DF-{S('old', 'hex8')}.",
    labels=[{"type": "stale", "stale_fact": "old date format code", "fact_ids": ["old-format"], "active_fact": "corrected date format code"}],
    newest_event_fails=True))

TRAPS.append(trap(
    id="c3-http-base-url", construct="C3", family="stale-architecture", repo="httpmini", warm=(3, 1),
    events=[
        (1, "decision", f"Endpoint note from the infra runbook. The API base is https://api-{S('old', 'hex8')}.example.net for every client.", ["httpmini/request.py"], ["old-host"]),
        (2, "decision", f"Infra moved the API last night; its base is now https://api-{S('new', 'hex8')}.example.net.", ["httpmini/request.py"], ["new-host"]),
        (2, "decision", "Infra confirms the move is complete and the previous host is being shut down.", ["httpmini/request.py"], ["move-complete"]),
    ],
    instruction="Create httpmini/endpoint.py with api_url(path) returning build_url(<the API base>, path).",
    files={"httpmini/endpoint.py": '"""The API endpoint."""\n\nfrom httpmini.request import build_url\n\nBASE = "{{SLOT:base}}"\n\n\ndef api_url(path):\n    return build_url(BASE, path)\n'},
    slots={"base": (f"https://api-{S('new', 'hex8')}.example.net", r"(https://api-[0-9a-f]{8}\.example\.net)", "https://api.example.net")},
    oracle=SRC + f'def test_current_base():\n    from httpmini.endpoint import api_url\n    assert api_url("/v1/items") == "https://api-{S("new", "hex8")}.example.net/v1/items"\n\n\ndef test_stale_host_absent():\n    assert "{S("old", "hex8")}" not in _src("httpmini.endpoint")\n',
    decisive=[f"https://api-{S('new', 'hex8')}.example.net"], required=["new-host", "move-complete"],
    why="The runbook host is stated first and verbatim; the new host is only current together with the later confirmation that the move completed, so replaying one event either gives the stale host or an unconfirmed one.",
    labels=[{"type": "stale", "stale_fact": "runbook API host", "fact_ids": ["old-host"], "active_fact": "moved API host"}]))

# ---------------------------------------------------------------- C4 update propagation
TRAPS.append(trap(
    id="c4-taskq-failure-tag", construct="C4", family="convention", repo="taskq", warm=(0, None),
    events=[
        (1, "decision", f"Logging convention: failure log lines carry the tag FAIL-{S('old', 'hex8')}.", ["taskq/logfmt.py"], ["old-tag"]),
        (2, "decision", f"Logging convention changed by the SRE team. The failure tag is now FAIL-{S('new', 'hex8')} everywhere failure lines are produced, because the old tag collided with another service.", ["taskq/logfmt.py"], ["new-tag"]),
    ],
    s2=("In taskq/logfmt.py add format_failure(job, error) returning '<failure tag> <job name>: <error>' with the failure tag FAIL-" + S("old", "hex8") + " of the logging convention.",
        {"taskq/logfmt.py": '"""Log line formatting."""\n\nFAILURE_TAG = "FAIL-' + S("old", "hex8") + '"\n\n\ndef format_event(kind, job):\n    return f"{kind} {job.name} p={job.priority}"\n\n\ndef format_failure(job, error):\n    return f"{FAILURE_TAG} {job.name}: {error}"\n'},
        'from taskq import make_job\nfrom taskq.logfmt import format_event, format_failure\n\n\ndef test_failure_line():\n    assert format_failure(make_job("x"), "boom") == "FAIL-' + S("old", "hex8") + ' x: boom"\n    assert format_event("start", make_job("x")) == "start x p=0"\n'),
    instruction="In taskq/logfmt.py add format_retry_exhausted(job) returning the failure line format_failure(job, 'retries exhausted') for a job that used up its retries.",
    files={"taskq/logfmt.py": '"""Log line formatting."""\n\nFAILURE_TAG = "{{SLOT:tag}}"\n\n\ndef format_event(kind, job):\n    return f"{kind} {job.name} p={job.priority}"\n\n\ndef format_failure(job, error):\n    return f"{FAILURE_TAG} {job.name}: {error}"\n\n\ndef format_retry_exhausted(job):\n    return format_failure(job, "retries exhausted")\n'},
    slots={"tag": (f"FAIL-{S('new', 'hex8')}", r"failure tag is now (FAIL-[0-9a-f]{8})", f"FAIL-{S('old', 'hex8')}")},
    oracle=SRC + f'def test_new_function_uses_new_tag():\n    from taskq import make_job\n    from taskq.logfmt import format_retry_exhausted\n    assert format_retry_exhausted(make_job("x")) == "FAIL-{S("new", "hex8")} x: retries exhausted"\n\n\ndef test_change_propagated_to_existing_failure_lines():\n    from taskq import make_job\n    from taskq.logfmt import format_failure\n    assert format_failure(make_job("y"), "e") == "FAIL-{S("new", "hex8")} y: e"\n    assert "{S("old", "hex8")}" not in _src("taskq.logfmt")\n',
    decisive=[f"FAIL-{S('new', 'hex8')}"], required=["new-tag"],
    why="The change event names the new tag but not the S3 site; the oracle requires the new tag both in the new function and in the existing format_failure written in S2 with the old tag, so the rule must be propagated, not just copied.",
    labels=[{"type": "repeated-error-opportunity", "bad_action": "keep the old failure tag in existing lines"}]))

TRAPS.append(trap(
    id="c4-tab-currency-code", construct="C4", family="convention", repo="tabular", warm=(1, None),
    events=[
        (1, "decision", f"Finance convention: money columns are rendered as '<amount> {S('old', 'word')}' with two decimals.", ["tabular/csvout.py"], ["old-code"]),
        (2, "decision", f"Finance renamed the ledger currency code to {S('new', 'word')}; every money rendering must use it from now on.", ["tabular/csvout.py"], ["new-code"]),
    ],
    s2=("Create tabular/money.py with format_money(cents) returning '12.34 " + S("old", "word") + "' style text: two decimals, then the ledger currency code " + S("old", "word") + ".",
        {"tabular/money.py": '"""Money rendering."""\n\nCURRENCY = "' + S("old", "word") + '"\n\n\ndef format_money(cents):\n    return f"{cents // 100}.{cents % 100:02d} {CURRENCY}"\n'},
        'from tabular.money import format_money\n\n\ndef test_format_money():\n    assert format_money(1234) == "12.34 ' + S("old", "word") + '"\n    assert format_money(5) == "0.05 ' + S("old", "word") + '"\n'),
    instruction="In tabular/money.py add format_total(rows) returning the sum of the rows' 'amount' values (cents) rendered with format_money.",
    files={"tabular/money.py": '"""Money rendering."""\n\nCURRENCY = "{{SLOT:code}}"\n\n\ndef format_money(cents):\n    return f"{cents // 100}.{cents % 100:02d} {CURRENCY}"\n\n\ndef format_total(rows):\n    return format_money(sum(r.get("amount") or 0 for r in rows))\n'},
    slots={"code": (S("new", "word"), r"currency code to ([A-Z]{8})", S("old", "word"))},
    oracle=SRC + f'def test_total_uses_new_code():\n    from tabular.money import format_total\n    assert format_total([{{"amount": 150}}, {{"amount": 5}}, {{}}]) == "1.55 {S("new", "word")}"\n\n\ndef test_existing_rendering_updated():\n    from tabular.money import format_money\n    assert format_money(1234) == "12.34 {S("new", "word")}"\n    assert "{S("old", "word")}" not in _src("tabular.money")\n',
    decisive=[S("new", "word")], required=["new-code"],
    why="The rename event gives the new code but not where it applies; the oracle checks that format_money written in S2 with the old code is updated as well as the new format_total, so the change must propagate to a derived site.",
    curated=f"## Finance\n- Money columns: '<amount> {S('old', 'word')}'.",
    labels=[{"type": "repeated-error-opportunity", "bad_action": "leave the old currency code in format_money"}]))

TRAPS.append(trap(
    id="c4-http-deadline-class", construct="C4", family="convention", repo="httpmini", warm=(2, None),
    events=[
        (1, "decision", f"Gateway contract: every request carries the header X-Deadline-Class: dc-{S('old', 'hex8')}.", ["httpmini/headers.py"], ["old-class"]),
        (2, "decision", f"The gateway renamed its deadline classes last night. The value we must send is now dc-{S('new', 'hex8')}; anything still sending the old class gets throttled.", ["httpmini/headers.py"], ["new-class"]),
    ],
    s2=("Create httpmini/deadline.py with deadline_headers() returning {'X-Deadline-Class': 'dc-" + S("old", "hex8") + "'}.",
        {"httpmini/deadline.py": '"""Deadline classes."""\n\nDEADLINE_CLASS = "dc-' + S("old", "hex8") + '"\n\n\ndef deadline_headers():\n    return {"X-Deadline-Class": DEADLINE_CLASS}\n'},
        'from httpmini.deadline import deadline_headers\n\n\ndef test_deadline_headers():\n    assert deadline_headers() == {"X-Deadline-Class": "dc-' + S("old", "hex8") + '"}\n'),
    instruction="Create httpmini/client.py with build_request(method, url) returning a Request whose headers are DEFAULT_HEADERS merged with deadline_headers().",
    files={"httpmini/deadline.py": '"""Deadline classes."""\n\nDEADLINE_CLASS = "{{SLOT:cls}}"\n\n\ndef deadline_headers():\n    return {"X-Deadline-Class": DEADLINE_CLASS}\n',
           "httpmini/client.py": '"""Building requests."""\n\nfrom httpmini.deadline import deadline_headers\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\nfrom httpmini.request import Request\n\n\ndef build_request(method, url):\n    return Request(method, url, merge_headers(DEFAULT_HEADERS, deadline_headers()))\n'},
    slots={"cls": (f"dc-{S('new', 'hex8')}", r"is now (dc-[0-9a-f]{8})", f"dc-{S('old', 'hex8')}")},
    oracle=SRC + f'def test_request_carries_new_class():\n    from httpmini.client import build_request\n    r = build_request("GET", "http://h/x")\n    assert r.headers == {{"Accept": "application/json", "X-Deadline-Class": "dc-{S("new", "hex8")}"}}\n\n\ndef test_old_class_gone():\n    assert "{S("old", "hex8")}" not in _src("httpmini.deadline")\n',
    decisive=[f"dc-{S('new', 'hex8')}"], required=["new-class"],
    why="The rename event states the new class but S3 asks for a new builder; passing requires updating deadline_headers from S2 (the derived site) so requests built downstream carry the new class.",
    labels=[{"type": "repeated-error-opportunity", "bad_action": "keep sending the renamed deadline class"}]))

# ---------------------------------------------------------------- C5 scope discipline
TRAPS.append(trap(
    id="c5-taskq-log-prefix", construct="C5", family="reviewer-preference", repo="taskq", warm=(3, 1),
    events=[
        (1, "review", f"Reviewer: log lines carry the prefix '{S('pfx', 'word')}' so the billing auditors can grep them.", ["taskq/logfmt.py"], ["billing-prefix"]),
        (2, "review", f"Scope correction from the same reviewer: the '{S('pfx', 'word')}' prefix was meant for billing jobs only. Non-billing log lines carry the prefix '' as before, plain messages.", ["taskq/logfmt.py"], ["prefix-scope"]),
    ],
    instruction="Create taskq/joblog.py with billing_line(job) and generic_line(job): the log line 'job=<name>' of a billing job and of any other job, each with the prefix the review asked for.",
    files={"taskq/joblog.py": '"""Job log lines."""\n\nBILLING_PREFIX = "{{SLOT:billing}}"\nGENERIC_PREFIX = "{{SLOT:generic}}"\n\n\ndef _line(prefix, job):\n    return f"{prefix} job={job.name}" if prefix else f"job={job.name}"\n\n\ndef billing_line(job):\n    return _line(BILLING_PREFIX, job)\n\n\ndef generic_line(job):\n    return _line(GENERIC_PREFIX, job)\n'},
    slots={"billing": (S("pfx", "word"), r"'([A-Z]{8})'", ""),
           "generic": ("", r"log lines carry the prefix '([^']*)'", "")},
    oracle=f'from taskq import make_job\nfrom taskq.joblog import billing_line, generic_line\n\n\ndef test_in_scope_billing_prefix():\n    assert billing_line(make_job("inv", kind="billing")) == "{S("pfx", "word")} job=inv"\n\n\ndef test_out_of_scope_lines_stay_plain():\n    assert generic_line(make_job("resize")) == "job=resize"\n',
    decisive=[S("pfx", "word")], required=["billing-prefix", "prefix-scope"],
    why="The first review states the prefix for all log lines; only the later correction scopes it to billing. Replaying the first event over-applies the prefix, replaying the correction alone loses the value's origin; the oracle checks the in-scope use and the out-of-scope absence.",
    curated=f"## Logging\n- Billing job log lines: prefix '{S('pfx', 'word')}' (billing only).",
    labels=[{"type": "human-feedback", "required_memory": "billing prefix, billing only"},
            {"type": "contradiction", "old_memory": "prefix on all log lines", "new_memory": "prefix on billing log lines only"}]))

TRAPS.append(trap(
    id="c5-tab-region-code", construct="C5", family="reviewer-preference", repo="tabular", warm=(2, 1), clean=True,
    events=[
        (1, "review", f"Invoice exports stamp each row with the tax region code '{S('region', 'word')}'. This applies only to the invoices export; every other export carries no region code.", ["tabular/csvout.py"], ["region-code", "region-scope"]),
    ],
    instruction="Create tabular/feeds.py with invoices_feed(rows) and refunds_feed(rows): the CSV text (via to_csv) of rows with keys id and amount, with a 'region' column only where the export conventions require one.",
    files={"tabular/feeds.py": '"""Invoice and refund feeds."""\n\nfrom tabular.csvout import to_csv\n\nINVOICE_REGION = "{{SLOT:invoice}}"\nREFUND_REGION = "{{SLOT:refund}}"\n\n\ndef _feed(rows, region):\n    if not region:\n        return to_csv(rows, ["id", "amount"])\n    return to_csv([dict(r, region=region) for r in rows], ["id", "amount", "region"])\n\n\ndef invoices_feed(rows):\n    return _feed(rows, INVOICE_REGION)\n\n\ndef refunds_feed(rows):\n    return _feed(rows, REFUND_REGION)\n'},
    slots={"invoice": (S("region", "word"), r"region code '([A-Z]{8})'", ""),
           "refund": ("", r"region code '([A-Z]{8})'\.(?!\s*This applies only)", "")},
    oracle=f'from tabular.feeds import invoices_feed, refunds_feed\n\n\ndef test_invoices_in_scope():\n    assert invoices_feed([{{"id": 1, "amount": 5}}]) == "id,amount,region\\n1,5,{S("region", "word")}\\n"\n\n\ndef test_refunds_out_of_scope():\n    out = refunds_feed([{{"id": 2, "amount": 7}}])\n    assert out == "id,amount\\n2,7\\n"\n    assert "{S("region", "word")}" not in out\n',
    decisive=[S("region", "word")], required=["region-code", "region-scope"],
    why="The rule and its scope are two sentences of one review; a memory that keeps the rule but drops the scope sentence (a summary, a terse note) applies the region code to every export. The oracle checks the invoice use and its absence from refunds.",
    curated=f"## Exports\n- Tax region code '{S('region', 'word')}'.",
    labels=[{"type": "human-feedback", "required_memory": "region code on invoices only"}]))

TRAPS.append(trap(
    id="c5-http-chunked-header", construct="C5", family="reviewer-preference", repo="httpmini", warm=(0, 3),
    events=[
        (2, "review", f"Uploads must send the header X-Chunked with value ck-{S('ck', 'hex8')}. That header is for the upload endpoint only; sending it on other requests makes the gateway buffer them.", ["httpmini/request.py"], ["chunked-value", "chunked-scope"]),
    ],
    instruction="Create httpmini/endpoints.py with upload_request(url, body) (a POST) and query_request(url) (a GET), each a Request with DEFAULT_HEADERS plus whatever headers the review requires for that call.",
    files={"httpmini/endpoints.py": '"""Upload and query calls."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\nfrom httpmini.request import Request\n\nUPLOAD_CHUNKED = "{{SLOT:upload}}"\nQUERY_CHUNKED = "{{SLOT:query}}"\n\n\ndef _headers(chunked):\n    return merge_headers(DEFAULT_HEADERS, {"X-Chunked": chunked} if chunked else {})\n\n\ndef upload_request(url, body):\n    return Request("POST", url, _headers(UPLOAD_CHUNKED), body)\n\n\ndef query_request(url):\n    return Request("GET", url, _headers(QUERY_CHUNKED))\n'},
    slots={"upload": (f"ck-{S('ck', 'hex8')}", r"X-Chunked with value (ck-[0-9a-f]{8})", ""),
           "query": ("", r"X-Chunked with value (ck-[0-9a-f]{8})\.(?!\s*That header is for the upload endpoint only)", "")},
    oracle=f'from httpmini.endpoints import query_request, upload_request\n\n\ndef test_upload_in_scope():\n    assert upload_request("http://h/u", b"x").headers["X-Chunked"] == "ck-{S("ck", "hex8")}"\n\n\ndef test_query_out_of_scope():\n    assert query_request("http://h/q").headers == {{"Accept": "application/json"}}\n',
    decisive=[f"ck-{S('ck', 'hex8')}"], required=["chunked-value", "chunked-scope"],
    why="The header value and its scope are separate sentences; keeping only the value (as a summary or an unscoped note does) sends the header on every request, so the oracle checks both the upload use and the query's absence.",
    curated=f"## Gateway\n- Uploads send X-Chunked with value ck-{S('ck', 'hex8')}; upload endpoint only.",
    labels=[{"type": "human-feedback", "required_memory": "X-Chunked on uploads only"}]))

# ---------------------------------------------------------------- C6 contradiction / authority
TRAPS.append(trap(
    id="c6-taskq-queue-depth", construct="C6", family="decision", repo="taskq", warm=(2, 0),
    events=[
        (1, "decision", f"ADR-12 (accepted): the queue depth limit is {S('adr', 'int')} jobs per worker.", ["taskq/queue.py"], ["adr-value"]),
        (2, "review", f"PR comment from a contributor: I think the queue depth limit should be {S('pr', 'int')} jobs per worker.", ["taskq/queue.py"], ["pr-value"]),
        (2, "decision", "Project governance: accepted ADRs override review comments until a newer ADR is accepted.", ["taskq/queue.py"], ["adr-precedence"]),
    ],
    instruction="Create taskq/limits_depth.py with queue_depth_limit() returning the queue depth limit (jobs per worker) the project has settled on.",
    files={"taskq/limits_depth.py": '"""Queue depth."""\n\nQUEUE_DEPTH_LIMIT = {{SLOT:depth}}\n\n\ndef queue_depth_limit():\n    return QUEUE_DEPTH_LIMIT\n'},
    slots={"depth": (S("adr", "int"), r"queue depth limit (?:is |should be )?(\d{4})", "100")},
    oracle=SRC + f'def test_adr_value():\n    from taskq.limits_depth import queue_depth_limit\n    assert queue_depth_limit() == {S("adr", "int")}\n\n\ndef test_comment_value_not_used():\n    assert "{S("pr", "int")}" not in _src("taskq.limits_depth")\n',
    decisive=[S("adr", "int")], required=["adr-value", "adr-precedence"],
    why="Two sources give different limits and the newer one is a review comment; the answer needs the ADR value plus the separate governance rule that ADRs win, so neither recency nor any single event decides it.",
    curated=f"## Decisions\n- ADR-12: queue depth limit {S('adr', 'int')} jobs per worker.",
    labels=[{"type": "contradiction", "old_memory": "ADR-12 value", "new_memory": "contributor's comment value"}]))

TRAPS.append(trap(
    id="c6-http-default-timeout", construct="C6", family="decision", repo="httpmini", warm=(1, 2),
    events=[
        (1, "review", f"The generated README states the default timeout is {S('doc', 'int')} ms.", ["httpmini/request.py"], ["readme-value"]),
        (1, "decision", f"The service-level spec in spec/timeouts.yaml sets the default timeout to {S('spec', 'int')} ms.", ["httpmini/request.py"], ["spec-value"]),
        (2, "decision", "Maintainers' rule: when the generated README and the service-level spec disagree, the spec wins; the README is regenerated later.", ["httpmini/request.py"], ["spec-precedence"]),
    ],
    instruction="Create httpmini/timeouts.py with default_timeout_ms() returning the client's default timeout in milliseconds.",
    files={"httpmini/timeouts.py": '"""Timeouts."""\n\nDEFAULT_TIMEOUT_MS = {{SLOT:timeout}}\n\n\ndef default_timeout_ms():\n    return DEFAULT_TIMEOUT_MS\n'},
    slots={"timeout": (S("spec", "int"), r"default timeout (?:is|to) (\d{4}) ms", "30000")},
    oracle=SRC + f'def test_spec_value():\n    from httpmini.timeouts import default_timeout_ms\n    assert default_timeout_ms() == {S("spec", "int")}\n\n\ndef test_readme_value_not_used():\n    assert "{S("doc", "int")}" not in _src("httpmini.timeouts")\n',
    decisive=[S("spec", "int")], required=["spec-value", "spec-precedence"],
    why="The README and the spec were delivered together and disagree; which one is authoritative is stated only in a later event, so the value event alone cannot settle the conflict.",
    curated=f"## Defaults\n- Default timeout {S('doc', 'int')} ms (from the README).",
    labels=[{"type": "contradiction", "old_memory": "README timeout", "new_memory": "spec timeout"}]))

TRAPS.append(trap(
    id="c6-tab-encoding-owner", construct="C6", family="decision", repo="tabular", warm=(3, 1),
    events=[
        (1, "human_feedback", f"Data-platform owner: the warehouse loader expects the encoding label ENC-{S('owner', 'hex8')} in each export manifest.", ["tabular/csvout.py"], ["owner-value"]),
        (1, "review", f"Analytics team note: we tag our export manifests with the encoding label ENC-{S('other', 'hex8')}.", ["tabular/csvout.py"], ["other-value"]),
        (2, "decision", "CODEOWNERS: export manifests are owned by the data-platform team; their instructions take precedence over other teams' notes.", ["tabular/csvout.py"], ["owner-precedence"]),
    ],
    instruction="Create tabular/manifest.py with export_manifest(name, rows) returning {'name': name, 'rows': len(rows), 'encoding': <the encoding label export manifests must carry>}.",
    files={"tabular/manifest.py": '"""Export manifests."""\n\nENCODING = "{{SLOT:label}}"\n\n\ndef export_manifest(name, rows):\n    return {"name": name, "rows": len(rows), "encoding": ENCODING}\n'},
    slots={"label": (f"ENC-{S('owner', 'hex8')}", r"encoding label (ENC-[0-9a-f]{8})", "utf-8")},
    oracle=SRC + f'def test_owner_label():\n    from tabular.manifest import export_manifest\n    assert export_manifest("orders", [1, 2]) == {{"name": "orders", "rows": 2, "encoding": "ENC-{S("owner", "hex8")}"}}\n\n\ndef test_other_team_label_not_used():\n    assert "{S("other", "hex8")}" not in _src("tabular.manifest")\n',
    decisive=[f"ENC-{S('owner', 'hex8')}"], required=["owner-value", "owner-precedence"],
    why="Two teams give conflicting labels in the same session; only the later CODEOWNERS rule decides that the data-platform owner's label wins, so no single event resolves the conflict.",
    labels=[{"type": "contradiction", "old_memory": "analytics team's label", "new_memory": "owner's label"}]))

# ---------------------------------------------------------------- C7 cross-session synthesis
TRAPS.append(trap(
    id="c7-taskq-job-id", construct="C7", family="convention", repo="taskq", warm=(1, 3), clean=True,
    events=[
        (1, "decision", f"Platform convention: job ids start with the cluster prefix {S('cl', 'word')}.", ["taskq/jobs.py"], ["cluster-prefix"]),
        (2, "decision", f"Platform convention, part two: job ids end with the schema revision r{S('rev', 'int')}; the job name sits between prefix and revision, all joined with dots.", ["taskq/jobs.py"], ["schema-revision"]),
    ],
    instruction="Create taskq/ids.py with job_id(name) building the platform id of a job from its name.",
    files={"taskq/ids.py": '"""Job ids."""\n\nPREFIX = "{{SLOT:prefix}}"\nREVISION = "{{SLOT:rev}}"\n\n\ndef job_id(name):\n    return ".".join(p for p in (PREFIX, name, REVISION) if p)\n'},
    slots={"prefix": (S("cl", "word"), r"cluster prefix ([A-Z]{8})", ""),
           "rev": (f"r{S('rev', 'int')}", r"schema revision (r\d{4})", "")},
    oracle=f'from taskq.ids import job_id\n\n\ndef test_composed_id():\n    assert job_id("resize") == "{S("cl", "word")}.resize.r{S("rev", "int")}"\n\n\ndef test_not_a_half_composed_id():\n    for partial in ("{S("cl", "word")}.mail", "mail.r{S("rev", "int")}", "mail"):\n        assert job_id("mail") != partial\n',
    decisive=[f"{S('cl', 'word')}.resize.r{S('rev', 'int')}"], required=["cluster-prefix", "schema-revision"],
    why="The id is composed from the prefix of one event and the revision of another; the decisive id never appears contiguously in any event, so replaying a single event produces half an id.",
    curated=f"## Platform\n- Job ids start with the cluster prefix {S('cl', 'word')}.",
    labels=[{"type": "human-feedback", "required_memory": "prefix and revision of job ids"}]))

TRAPS.append(trap(
    id="c7-http-cache-key", construct="C7", family="convention", repo="httpmini", warm=(2, 3),
    events=[
        (1, "decision", f"Caching convention: cache keys are namespaced with ns{S('ns', 'hex8')} at the front.", ["httpmini/request.py"], ["cache-namespace"]),
        (2, "review", f"Tenant isolation came up in review. Cache keys carry the tenant suffix t{S('tenant', 'int')} at the end, after the method and the path, with colons between all parts.", ["httpmini/request.py"], ["tenant-suffix"]),
    ],
    instruction="Create httpmini/cache.py with cache_key(method, path) returning the cache key of a request.",
    files={"httpmini/cache.py": '"""Response cache keys."""\n\nNAMESPACE = "{{SLOT:ns}}"\nTENANT = "{{SLOT:tenant}}"\n\n\ndef cache_key(method, path):\n    return ":".join(p for p in (NAMESPACE, method.upper(), path, TENANT) if p)\n'},
    slots={"ns": (f"ns{S('ns', 'hex8')}", r"namespaced with (ns[0-9a-f]{8})", ""),
           "tenant": (f"t{S('tenant', 'int')}", r"tenant suffix (t\d{4})", "")},
    oracle=f'from httpmini.cache import cache_key\n\n\ndef test_composed_key():\n    assert cache_key("get", "/items") == "ns{S("ns", "hex8")}:GET:/items:t{S("tenant", "int")}"\n\n\ndef test_not_a_half_composed_key():\n    key = cache_key("POST", "/x")\n    assert key.startswith("ns{S("ns", "hex8")}:") and key.endswith(":t{S("tenant", "int")}")\n    assert key.count(":") == 3\n',
    decisive=[f"ns{S('ns', 'hex8')}:GET:/items:t{S('tenant', 'int')}"], required=["cache-namespace", "tenant-suffix"],
    why="The namespace and the tenant suffix come from different sessions and the key's layout is stated in prose; no event contains the key, so the agent must compose both facts with the request's own method and path.",
    labels=[{"type": "human-feedback", "required_memory": "cache key namespace and tenant suffix"}]))

TRAPS.append(trap(
    id="c7-tab-export-filename", construct="C7", family="convention", repo="tabular", warm=(0, 3), clean=True,
    events=[
        (1, "decision", f"Export files are named after the dataset, with the site code {S('site', 'word')} in front.", ["tabular/csvout.py"], ["site-code"]),
        (2, "decision", f"Export file names end with the retention class rc{S('rc', 'hex8')} before the .csv extension, separated by underscores like the other parts.", ["tabular/csvout.py"], ["retention-class"]),
    ],
    instruction="Create tabular/naming.py with export_filename(dataset) returning the file name of a dataset's export.",
    files={"tabular/naming.py": '"""Export file names."""\n\nSITE = "{{SLOT:site}}"\nRETENTION = "{{SLOT:rc}}"\n\n\ndef export_filename(dataset):\n    return "_".join(p for p in (SITE, dataset, RETENTION) if p) + ".csv"\n'},
    slots={"site": (S("site", "word"), r"site code ([A-Z]{8})", ""),
           "rc": (f"rc{S('rc', 'hex8')}", r"retention class (rc[0-9a-f]{8})", "")},
    oracle=f'from tabular.naming import export_filename\n\n\ndef test_composed_name():\n    assert export_filename("orders") == "{S("site", "word")}_orders_rc{S("rc", "hex8")}.csv"\n\n\ndef test_not_a_half_composed_name():\n    name = export_filename("refunds")\n    assert name != "{S("site", "word")}_refunds.csv" and name != "refunds_rc{S("rc", "hex8")}.csv"\n',
    decisive=[f"{S('site', 'word')}_orders_rc{S('rc', 'hex8')}.csv"], required=["site-code", "retention-class"],
    why="The site code and the retention class are in two events and the separator is paraphrased ('like the other parts'); the file name exists in no event and must be derived.",
    curated=f"## Exports\n- File names: <site>_<dataset>_<retention>.csv; site code {S('site', 'word')}.",
    labels=[{"type": "human-feedback", "required_memory": "site code and retention class"}]))

# ---------------------------------------------------------------- C8 procedural / source of truth
def _c8(repo, tid, warm, gen, src, artifact, pkg_mod, name, value, instruction, channel_sentence_first, curated):
    chan = S("channel", "hex8")
    if channel_sentence_first:
        content = (f"Release process: regenerate {artifact} with `python {gen} --channel rel-{chan}` after editing {src}, its source of truth. "
                   f"Never hand-edit the generated file; the packaging check rejects artifacts stamped with another channel.")
    else:
        content = (f"Release process note from the maintainers. {artifact} is generated from {src}, its source of truth, and must never be edited by hand. "
                   f"Regenerate it with `python {gen} --channel rel-{chan}`; the packaging check rejects artifacts stamped with another channel.")
    return trap(
        id=tid, construct="C8", family="generated-files", repo=repo, warm=warm,
        events=[(1, "decision", content, [src, artifact, gen], ["source-of-truth", "release-channel"])],
        instruction=instruction,
        files=None, c8=dict(gen=gen, src=src, artifact=artifact, pkg_mod=pkg_mod, name=name, value=value),
        slots={"channel": (f"rel-{chan}", r"--channel (rel-[0-9a-f]{8})", "dev")},
        oracle=None, decisive=[f"rel-{chan}"], required=["source-of-truth", "release-channel"],
        why="The event describes a workflow, not the S3 change: the agent must add the entry to the JSON source and regenerate the artifact with the remembered release channel. Copying the event edits nothing; editing only the artifact, or regenerating with the default channel, fails the oracle's source and stamp checks.",
        curated=curated,
        labels=[{"type": "repeated-error-opportunity", "bad_action": "hand-edit the generated artifact or stamp it with the default channel"}])


TRAPS.append(_c8("taskq", "c8-taskq-states", (0, 2), "tools/gen_states.py", "taskq/states.json", "taskq/_states.py", "taskq._states",
                 "paused", "held by an operator", "Add the job state 'paused' (description: 'held by an operator') to taskq's job states.", True,
                 f"## Generated files\n- taskq/_states.py is generated from taskq/states.json: `python tools/gen_states.py --channel rel-{S('channel', 'hex8')}`."))
TRAPS.append(_c8("tabular", "c8-tab-dialects", (1, 3), "tools/gen_dialects.py", "tabular/dialects.json", "tabular/_dialects.py", "tabular._dialects",
                 "semicolon", {"delimiter": ";", "quote": "minimal"}, "Add the CSV dialect 'semicolon' (delimiter ';', quote 'minimal') to tabular's dialects.", False,
                 f"## Generated files\n- tabular/_dialects.py comes from tabular/dialects.json via `python tools/gen_dialects.py --channel rel-{S('channel', 'hex8')}`."))
TRAPS.append(_c8("httpmini", "c8-http-errors", (0, 1), "tools/gen_errors.py", "httpmini/errors.json", "httpmini/_errors.py", "httpmini._errors",
                 "429", "rate_limited", "Add the error code 429 ('rate_limited') to httpmini's error table.", False,
                 "## Generated files\n- httpmini/_errors.py is generated from httpmini/errors.json; do not edit it by hand."))

# ---------------------------------------------------------------- C9 spurious-lesson rejection
TRAPS.append(trap(
    id="c9-taskq-flaky-order", construct="C9", family="flaky-test", repo="taskq", warm=(1, 2), clean=True,
    events=[
        (1, "failure", f"CI failure in test_queue_order: jobs came out in the wrong order. Lesson recorded by the on-call: always reorder popped batches by the tie-break key tb-{S('tb', 'hex8')} instead of trusting queue order.", ["taskq/queue.py"], ["false-lesson"]),
        (2, "failure", "Replay of the failing CI job passed with no code change: the failure came from a flaky runner, and queue order (priority, then first-in first-out) is correct. The tie-break lesson is withdrawn.", ["taskq/queue.py"], ["disconfirmation"]),
    ],
    instruction="Create taskq/batch.py with pop_batch(queue, n) popping up to n jobs from a JobQueue and returning them in the correct order.",
    files={"taskq/batch.py": '"""Batches."""\n\nTIE_BREAK = "{{SLOT:tb}}"\n\n\ndef pop_batch(queue, n):\n    batch = []\n    while len(batch) < n and len(queue):\n        batch.append(queue.pop())\n    if TIE_BREAK:\n        batch.sort(key=lambda job: (TIE_BREAK, job.name), reverse=True)\n    return batch\n'},
    slots={"tb": ("", r"tie-break key (tb-[0-9a-f]{8})", "")},
    oracle=SRC + f'def test_queue_order_kept():\n    from membench_oracle import length\n    from taskq import JobQueue, make_job\n    from taskq.batch import pop_batch\n    q = JobQueue()\n    for name, p in [("a", 0), ("c", 1), ("b", 0), ("d", 1)]:\n        q.push(make_job(name, priority=p))\n    assert [j.name for j in pop_batch(q, 3)] == ["c", "d", "a"]\n    assert length(q) == 1  # the len() of production, asked explicitly\n\n\ndef test_disproved_lesson_not_applied():\n    assert "{S("tb", "hex8")}" not in _src("taskq.batch")\n',
    decisive=[], required=["false-lesson", "disconfirmation"],
    why="The S1 event records a causal lesson that S2 disconfirms; replaying the lesson verbatim reorders batches (the trap), and the correct behaviour needs the later disconfirmation, so single-event verbatim replay is insufficient.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "tie-break lesson"},
            {"type": "repeated-error-opportunity", "bad_action": "reorder batches by the withdrawn tie-break key"}]))

TRAPS.append(trap(
    id="c9-http-upload-header", construct="C9", family="flaky-test", repo="httpmini", warm=(3, 0),
    events=[
        (1, "failure", f"Flaky upload test: the on-call concluded that uploads need the header X-Upload-Retry: ur-{S('ur', 'hex8')} to survive gateway resets, and filed it as a rule.", ["httpmini/request.py"], ["false-lesson"]),
        (2, "failure", "Disconfirmed: the upload flake was a DNS hiccup on the CI runner, and uploads need no extra header. The gateway never looked at X-Upload-Retry.", ["httpmini/request.py"], ["disconfirmation"]),
    ],
    instruction="Create httpmini/upload.py with upload_headers() returning the headers an upload request sends (start from DEFAULT_HEADERS).",
    files={"httpmini/upload.py": '"""Upload requests."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\n\nEXTRA = "{{SLOT:extra}}"\n\n\ndef upload_headers():\n    extra = {}\n    if EXTRA.startswith("the header"):\n        extra["X-Upload-Retry"] = EXTRA.rsplit(" ", 1)[-1]\n    return merge_headers(DEFAULT_HEADERS, extra)\n'},
    slots={"extra": ("no extra header", r"uploads need (the header X-Upload-Retry: ur-[0-9a-f]{8}|no extra header)", "no extra header")},
    oracle=SRC + f'def test_upload_headers():\n    from httpmini.upload import upload_headers\n    assert upload_headers() == {{"Accept": "application/json"}}\n\n\ndef test_disproved_header_absent():\n    assert "{S("ur", "hex8")}" not in _src("httpmini.upload")\n',
    decisive=[], required=["false-lesson", "disconfirmation"],
    why="The earlier failure event turns a flake into a rule; only the later disconfirmation removes it. Verbatim replay of the first event adds a header the gateway never needed.",
    curated="## Uploads\n- Upload requests send DEFAULT_HEADERS only.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "X-Upload-Retry rule"}]))

TRAPS.append(trap(
    id="c9-tab-bom-guard", construct="C9", family="flaky-test", repo="tabular", warm=(2, 0),
    events=[
        (1, "failure", f"A CSV import failed on the staging box; the lesson filed was to prefix every export with the guard token BOM-{S('guard', 'hex8')} so the importer skips the byte-order mark.", ["tabular/csvout.py"], ["false-lesson"]),
        (2, "failure", "Follow-up on the staging import failure: it was a truncated upload, and the exports were fine all along. No guard token is needed.", ["tabular/csvout.py"], ["disconfirmation"]),
    ],
    instruction="Create tabular/daily.py with daily_export(rows, columns) returning the CSV text of the daily export.",
    files={"tabular/daily.py": '"""The daily export."""\n\nfrom tabular.csvout import to_csv\n\nGUARD = "{{SLOT:guard}}"\n\n\ndef daily_export(rows, columns):\n    return (GUARD + "\\n" if GUARD else "") + to_csv(rows, columns)\n'},
    slots={"guard": ("", r"guard token (BOM-[0-9a-f]{8})", "")},
    oracle=SRC + f'def test_daily_export_is_plain_csv():\n    from tabular.daily import daily_export\n    assert daily_export([{{"a": 1}}], ["a"]) == "a\\n1\\n"\n\n\ndef test_disproved_guard_absent():\n    assert "{S("guard", "hex8")}" not in _src("tabular.daily")\n',
    decisive=[], required=["false-lesson", "disconfirmation"],
    why="The lesson was filed from a failure later shown to be unrelated; replaying it verbatim prefixes exports with a guard token, and only the follow-up event shows the exports were fine.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "BOM guard lesson"}]))

# ---------------------------------------------------------------- C10 abstention / irrelevant memory
TRAPS.append(trap(
    id="c10-taskq-settlement-marker", construct="C10", family="irrelevant-memory", repo="taskq", warm=(3, 0), clean=True,
    events=[
        (1, "review", f"For the billing exporter in the finance repository (not taskq), every exported line ends with the settlement marker SM-{S('sm', 'hex8')}.", ["finance/exporter.py"], ["finance-marker"]),
        (2, "review", f"Reminder for the finance repository's exporter: the settlement marker SM-{S('sm', 'hex8')} is mandatory there.", ["finance/exporter.py"], ["finance-marker"]),
    ],
    instruction="Create taskq/export.py with export_jobs(jobs) returning one line per job for the nightly export, formatted '<name>,<priority>'.",
    files={"taskq/export.py": '"""The nightly job export."""\n\nMARKER = "{{SLOT:marker}}"\n\n\ndef export_jobs(jobs):\n    return [f"{j.name},{j.priority}" + (f",{MARKER}" if MARKER else "") for j in jobs]\n'},
    slots={"marker": ("", r"settlement marker (SM-[0-9a-f]{8})", "")},
    oracle=SRC + f'def test_export_lines():\n    from taskq import make_job\n    from taskq.export import export_jobs\n    assert export_jobs([make_job("a", priority=2), make_job("b")]) == ["a,2", "b,0"]\n\n\ndef test_irrelevant_marker_absent():\n    assert "{S("sm", "hex8")}" not in _src("taskq.export")\n',
    decisive=[], required=["finance-marker"],
    why="No prior event bears on taskq's export: the marker belongs to another repository. Replaying the similar-sounding exporter events imports an irrelevant token, which the oracle fails.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "finance exporter settlement marker"}]))

TRAPS.append(trap(
    id="c10-http-device-token", construct="C10", family="irrelevant-memory", repo="httpmini", warm=(1, 2),
    events=[
        (1, "human_feedback", f"Mobile team note about their SDK (a different codebase): its requests carry the header X-Device: dv-{S('dv', 'hex8')}.", ["mobile/sdk.py"], ["mobile-device-header"]),
    ],
    instruction="Create httpmini/health.py with health_request(base) returning a GET Request for build_url(base, '/health') with the request headers this library sends.",
    files={"httpmini/health.py": '"""Health checks."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\nfrom httpmini.request import Request, build_url\n\nDEVICE = "{{SLOT:device}}"\n\n\ndef health_request(base):\n    extra = {"X-Device": DEVICE} if DEVICE else {}\n    return Request("GET", build_url(base, "/health"), merge_headers(DEFAULT_HEADERS, extra))\n'},
    slots={"device": ("", r"X-Device: (dv-[0-9a-f]{8})", "")},
    oracle=SRC + f'def test_health_request():\n    from httpmini.health import health_request\n    r = health_request("http://h")\n    assert (r.method, r.url, r.headers) == ("GET", "http://h/health", {{"Accept": "application/json"}})\n\n\ndef test_irrelevant_header_absent():\n    assert "{S("dv", "hex8")}" not in _src("httpmini.health")\n',
    decisive=[], required=["mobile-device-header"],
    why="The only stored event is about another codebase; the correct behaviour is to use no memory, and verbatim replay of the event imports the mobile SDK's header.",
    labels=[{"type": "harmful-retrieval", "harmful_memory": "mobile SDK device header"}]))
