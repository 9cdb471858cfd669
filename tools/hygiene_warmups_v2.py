"""Warm-up sessions (S1/S2) on hygiene-v2's new repositories: small, memory-free tasks, each in its
own new module (as tools/hygiene_warmups.py does for v1's)."""

W2 = {}

W2["notecli"] = [
    ("In notecli/words.py add word_count(text) returning the number of whitespace-separated words.",
     {"notecli/words.py": '"""Word counts."""\n\n\ndef word_count(text):\n    return len(text.split())\n'},
     "from notecli.words import word_count\n\n\ndef test_word_count():\n    assert word_count('  buy  milk now ') == 3 and word_count('') == 0\n"),
    ("In notecli/tags.py add parse_tags(text) returning the words that start with '#', without the '#', in order.",
     {"notecli/tags.py": '"""Tags in note text."""\n\n\ndef parse_tags(text):\n    return [w[1:] for w in text.split() if w.startswith("#") and len(w) > 1]\n'},
     "from notecli.tags import parse_tags\n\n\ndef test_parse_tags():\n    assert parse_tags('call #home about #bills #') == ['home', 'bills']\n"),
    ("In notecli/short.py add shorten(text, width) returning text cut to width characters, ending with '...' when cut.",
     {"notecli/short.py": '"""Short previews."""\n\n\ndef shorten(text, width):\n    return text if len(text) <= width else text[: max(0, width - 3)] + "..."\n'},
     "from notecli.short import shorten\n\n\ndef test_shorten():\n    assert shorten('abcdef', 10) == 'abcdef' and shorten('abcdefghij', 6) == 'abc...'\n"),
    ("In notecli/numbering.py add renumber(notes) returning the notes' texts as '<n>. <text>' lines numbered from 1.",
     {"notecli/numbering.py": '"""Numbered listings."""\n\n\ndef renumber(notes):\n    return [f"{i}. {n.text}" for i, n in enumerate(notes, 1)]\n'},
     "from notecli.numbering import renumber\nfrom notecli.store import Note\n\n\ndef test_renumber():\n    assert renumber([Note(4, 'a'), Note(9, 'b')]) == ['1. a', '2. b']\n"),
]

W2["cfgsys"] = [
    ("In cfgsys/flatten.py add flatten(config) turning nested dicts into dotted keys ({'db': {'host': 'h'}} -> {'db.host': 'h'}).",
     {"cfgsys/flatten.py": '"""Dotted keys."""\n\n\ndef flatten(config, prefix=""):\n    out = {}\n    for key, value in config.items():\n        name = f"{prefix}{key}"\n        if isinstance(value, dict):\n            out.update(flatten(value, name + "."))\n        else:\n            out[name] = value\n    return out\n'},
     "from cfgsys.flatten import flatten\n\n\ndef test_flatten():\n    assert flatten({'db': {'host': 'h', 'x': {'y': 1}}, 'n': 2}) == {'db.host': 'h', 'db.x.y': 1, 'n': 2}\n"),
    ("In cfgsys/booleans.py add to_bool(text) that is True for 'true', 'yes', 'on', '1' (any case) and False otherwise.",
     {"cfgsys/booleans.py": '"""Boolean settings."""\n\n\ndef to_bool(text):\n    return str(text).strip().lower() in ("true", "yes", "on", "1")\n'},
     "from cfgsys.booleans import to_bool\n\n\ndef test_to_bool():\n    assert to_bool('Yes') and to_bool(' on ') and not to_bool('off') and not to_bool('')\n"),
    ("In cfgsys/envvars.py add from_env(environ, prefix) returning the variables starting with prefix, prefix removed and names lowercased.",
     {"cfgsys/envvars.py": '"""Settings from the environment."""\n\n\ndef from_env(environ, prefix):\n    return {k[len(prefix):].lower(): v for k, v in environ.items() if k.startswith(prefix)}\n'},
     "from cfgsys.envvars import from_env\n\n\ndef test_from_env():\n    assert from_env({'APP_MODE': 'x', 'HOME': '/h', 'APP_N': '2'}, 'APP_') == {'mode': 'x', 'n': '2'}\n"),
    ("In cfgsys/required.py add missing_keys(config, keys) returning the keys (dotted) that config does not define, in the given order.",
     {"cfgsys/required.py": '"""Required settings."""\n\n\ndef _has(config, dotted):\n    node = config\n    for part in dotted.split("."):\n        if not isinstance(node, dict) or part not in node:\n            return False\n        node = node[part]\n    return True\n\n\ndef missing_keys(config, keys):\n    return [k for k in keys if not _has(config, k)]\n'},
     "from cfgsys.required import missing_keys\n\n\ndef test_missing_keys():\n    assert missing_keys({'db': {'host': 'h'}}, ['db.host', 'db.port', 'name']) == ['db.port', 'name']\n"),
]

W2["plugreg"] = [
    ("In plugreg/naming.py add valid_name(name) that is true for names of lowercase letters, digits and dashes starting with a letter.",
     {"plugreg/naming.py": '"""Plugin names."""\n\nimport re\n\n\ndef valid_name(name):\n    return re.fullmatch(r"[a-z][a-z0-9-]*", name) is not None\n'},
     "from plugreg.naming import valid_name\n\n\ndef test_valid_name():\n    assert valid_name('csv-2') and not valid_name('2csv') and not valid_name('Csv')\n"),
    ("In plugreg/listing.py add describe(names) returning one line '- <name>' per plugin name, sorted.",
     {"plugreg/listing.py": '"""Listings."""\n\n\ndef describe(names):\n    return [f"- {n}" for n in sorted(names)]\n'},
     "from plugreg.listing import describe\n\n\ndef test_describe():\n    assert describe(['b', 'a']) == ['- a', '- b']\n"),
    ("In plugreg/versions.py add parse_version(text) turning '1.2.3' into the tuple (1, 2, 3).",
     {"plugreg/versions.py": '"""Plugin versions."""\n\n\ndef parse_version(text):\n    return tuple(int(p) for p in text.split("."))\n'},
     "from plugreg.versions import parse_version\n\n\ndef test_parse_version():\n    assert parse_version('1.2.3') == (1, 2, 3) and parse_version('10') == (10,)\n"),
    ("In plugreg/options.py add with_defaults(options, defaults) returning a new dict of defaults overridden by options.",
     {"plugreg/options.py": '"""Plugin options."""\n\n\ndef with_defaults(options, defaults):\n    return {**defaults, **options}\n'},
     "from plugreg.options import with_defaults\n\n\ndef test_with_defaults():\n    d = {'a': 1, 'b': 2}\n    assert with_defaults({'b': 3}, d) == {'a': 1, 'b': 3} and d == {'a': 1, 'b': 2}\n"),
]
