"""Warm-up sessions (S1/S2) of the hygiene-v1 pack: small, memory-free tasks on each repository.
Each creates its own new module, so any two can follow each other in a sequence."""

W = {}

W["tabular"] = [
    ("In tabular/text.py add slug(name) turning a column name into a lowercase, underscore-separated identifier ('Unit Price' -> 'unit_price').",
     {"tabular/text.py": '"""Text helpers."""\n\nimport re\n\n\ndef slug(name):\n    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")\n'},
     "from tabular.text import slug\n\n\ndef test_slug():\n    assert slug('Unit Price') == 'unit_price'\n    assert slug('  SKU-id ') == 'sku_id'\n"),
    ("In tabular/widths.py add column_widths(rows, columns) returning, per column, the widest rendered value (header included; None renders as '').",
     {"tabular/widths.py": '"""Column widths for fixed-width previews."""\n\n\ndef column_widths(rows, columns):\n    out = {}\n    for c in columns:\n        values = ["" if r.get(c) is None else str(r.get(c)) for r in rows]\n        out[c] = max([len(c)] + [len(v) for v in values])\n    return out\n'},
     "from tabular.widths import column_widths\n\n\ndef test_widths():\n    assert column_widths([{'a': 12345, 'bb': None}], ['a', 'bb']) == {'a': 5, 'bb': 2}\n"),
    ("In tabular/dedupe.py add dedupe(rows, key) keeping the first row for each value of key, in input order.",
     {"tabular/dedupe.py": '"""Duplicate removal."""\n\n\ndef dedupe(rows, key):\n    seen, out = set(), []\n    for row in rows:\n        if row.get(key) not in seen:\n            seen.add(row.get(key))\n            out.append(row)\n    return out\n'},
     "from tabular.dedupe import dedupe\n\n\ndef test_dedupe():\n    rows = [{'k': 1, 'v': 'a'}, {'k': 2, 'v': 'b'}, {'k': 1, 'v': 'c'}]\n    assert dedupe(rows, 'k') == rows[:2]\n"),
    ("In tabular/totals.py add column_total(rows, column) summing the numeric values of a column and ignoring missing cells.",
     {"tabular/totals.py": '"""Column totals."""\n\n\ndef column_total(rows, column):\n    return sum(r[column] for r in rows if r.get(column) is not None)\n'},
     "from tabular.totals import column_total\n\n\ndef test_total():\n    assert column_total([{'a': 2}, {'a': None}, {}, {'a': 5}], 'a') == 7\n"),
]

W["httpmini"] = [
    ("In httpmini/query.py add encode_query(params) returning 'a=1&b=x' style text with keys sorted and values URL-encoded.",
     {"httpmini/query.py": '"""Query strings."""\n\nfrom urllib.parse import quote\n\n\ndef encode_query(params):\n    return "&".join(f"{quote(str(k))}={quote(str(v))}" for k, v in sorted(params.items()))\n'},
     "from httpmini.query import encode_query\n\n\ndef test_encode_query():\n    assert encode_query({'b': 'x y', 'a': 1}) == 'a=1&b=x%20y'\n"),
    ("In httpmini/paths.py add join_path(*parts) joining URL path segments with single slashes and a leading slash.",
     {"httpmini/paths.py": '"""URL paths."""\n\n\ndef join_path(*parts):\n    return "/" + "/".join(p.strip("/") for p in parts if p.strip("/"))\n'},
     "from httpmini.paths import join_path\n\n\ndef test_join_path():\n    assert join_path('/a/', 'b', '/c') == '/a/b/c'\n    assert join_path() == '/'\n"),
    ("In httpmini/status.py add is_retryable(status) that is true for 429 and for every 5xx status code.",
     {"httpmini/status.py": '"""Status code classes."""\n\n\ndef is_retryable(status):\n    return status == 429 or 500 <= status <= 599\n'},
     "from httpmini.status import is_retryable\n\n\ndef test_retryable():\n    assert is_retryable(429) and is_retryable(503)\n    assert not is_retryable(404)\n"),
    ("In httpmini/ctype.py add json_headers() returning DEFAULT_HEADERS plus Content-Type: application/json.",
     {"httpmini/ctype.py": '"""Content types."""\n\nfrom httpmini.headers import DEFAULT_HEADERS, merge_headers\n\n\ndef json_headers():\n    return merge_headers(DEFAULT_HEADERS, {"Content-Type": "application/json"})\n'},
     "from httpmini.ctype import json_headers\n\n\ndef test_json_headers():\n    assert json_headers() == {'Accept': 'application/json', 'Content-Type': 'application/json'}\n"),
]

W["taskq"] = [
    ("In taskq/stats.py add count_by_priority(jobs) returning a dict {priority: number of jobs}.",
     {"taskq/stats.py": '"""Queue statistics."""\n\nfrom collections import Counter\n\n\ndef count_by_priority(jobs):\n    return dict(Counter(job.priority for job in jobs))\n'},
     "from taskq import make_job\nfrom taskq.stats import count_by_priority\n\n\ndef test_count():\n    jobs = [make_job('a', priority=1), make_job('b', priority=1), make_job('c')]\n    assert count_by_priority(jobs) == {1: 2, 0: 1}\n"),
    ("In taskq/naming.py add normalize_name(name) lowercasing a job name and replacing runs of spaces with single dashes.",
     {"taskq/naming.py": '"""Job names."""\n\n\ndef normalize_name(name):\n    return "-".join(name.lower().split())\n'},
     "from taskq.naming import normalize_name\n\n\ndef test_normalize():\n    assert normalize_name('Resize  Big Image') == 'resize-big-image'\n"),
    ("In taskq/limits.py add clamp_priority(p) clamping a priority into the range 0..9.",
     {"taskq/limits.py": '"""Priority limits."""\n\n\ndef clamp_priority(p):\n    return max(0, min(9, p))\n'},
     "from taskq.limits import clamp_priority\n\n\ndef test_clamp():\n    assert [clamp_priority(p) for p in (-3, 4, 12)] == [0, 4, 9]\n"),
    ("In taskq/drain.py add drain(queue) popping every job of a JobQueue and returning them in pop order.",
     {"taskq/drain.py": '"""Draining a queue."""\n\n\ndef drain(queue):\n    out = []\n    while len(queue):\n        out.append(queue.pop())\n    return out\n'},
     "from membench_oracle import length\nfrom taskq import JobQueue, make_job\nfrom taskq.drain import drain\n\n\ndef test_drain():\n    q = JobQueue()\n    q.push(make_job('a'))\n    q.push(make_job('b', priority=3))\n    assert [j.name for j in drain(q)] == ['b', 'a']\n    assert length(q) == 0  # production's len(q), asked explicitly: len() of a reference raises\n"),
]
