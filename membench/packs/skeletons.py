"""The skeleton `membench pack new NAME DIR` writes: docs/authoring.md's minimal example pack (one C1
trap, a secret placeholder, two sessions), under the pack name NAME. tests/formats/test_authoring_guide.py
keeps the guide's file blocks equal to these texts, and finalizes and gates them, so both stay runnable."""

from __future__ import annotations

import json
from pathlib import Path

from membench.formats.fields import PLAIN_NAME_RULE, is_plain_name
from membench.formats.pack_format import PackError

EXAMPLE_NAME = "tiny"

EXAMPLE_PACK = {
    'manifest.json': (
        '{\n'
        ' "format": "membench-pack",\n'
        ' "format_version": 2,\n'
        ' "pack": "tiny",\n'
        ' "description": "One C1 trap: a tag prefix stated once, in a review after the first session.",\n'
        ' "repos": {"app": "repos/app"},\n'
        ' "sequences": [\n'
        '  {\n'
        '   "seq_id": "tiny-tag-prefix",\n'
        '   "construct": "C1",\n'
        '   "family": "reviewer-rule",\n'
        '   "repo": "app",\n'
        '   "sessions": [\n'
        '    {"index": 1, "instruction": "In app/tags.py add slug(text): text lower-cased, spaces replaced by \'-\'.", "visible_files": ["app/tags.py"], "oracle_id": "s1_slug"},\n'
        '    {"index": 2, "instruction": "In app/tags.py add tag(text): the project\'s tag prefix followed by slug(text).", "visible_files": ["app/tags.py"], "oracle_id": "s2_tag"}\n'
        '   ],\n'
        '   "events": [\n'
        '    {"event_id": "tiny-e1", "after_session": 1, "kind": "review", "content": "Review of slug: every tag we emit starts with the prefix t{{SECRET:prefix:hex8}}- and then the slug.", "scope": {"files": ["app/tags.py"], "symbols": ["tag"]}}\n'
        '   ],\n'
        '   "oracle_labels": [\n'
        '    {"label_id": "tiny-l1", "type": "human-feedback", "active_session": 2, "required_memory": "the tag prefix"}\n'
        '   ],\n'
        '   "decisive_literals": ["t{{SECRET:prefix:hex8}}-"],\n'
        '   "required_fact_ids": ["tag-prefix"],\n'
        '   "event_fact_map": {"tiny-e1": ["tag-prefix"]},\n'
        '   "secrets": {"prefix": "hex8"}\n'
        '  }\n'
        ' ]\n'
        '}\n'
    ),
    'repos/app/app/__init__.py': (
        '"""The example application."""\n'
    ),
    'repos/app/app/tags.py': (
        '"""Tags."""\n'
    ),
    'hidden/tiny-tag-prefix/s1_slug.py': (
        'from app.tags import slug\n'
        '\n'
        '\n'
        'def test_slug():\n'
        '    assert slug("Big Sale") == "big-sale"\n'
    ),
    'hidden/tiny-tag-prefix/s1.solution.json': (
        '{"files": {"app/tags.py": "\\"\\"\\"Tags.\\"\\"\\"\\n\\n\\ndef slug(text):\\n    return text.lower().replace(\\" \\", \\"-\\")\\n"}, "slots": {}}\n'
    ),
    'hidden/tiny-tag-prefix/s2_tag.py': (
        'from app.tags import slug, tag\n'
        '\n'
        'PREFIX = "t{{SECRET:prefix:hex8}}-"\n'
        '\n'
        '\n'
        'def test_slug_kept():\n'
        '    assert slug("A b") == "a-b"\n'
        '\n'
        '\n'
        'def test_tag_has_the_reviewed_prefix():\n'
        '    assert tag("Big Sale") == PREFIX + "big-sale"\n'
    ),
    'hidden/tiny-tag-prefix/s2.solution.json': (
        '{\n'
        ' "files": {"app/tags.py": "\\"\\"\\"Tags.\\"\\"\\"\\n\\nPREFIX = \\"{{SLOT:prefix}}\\"\\n\\n\\ndef slug(text):\\n    return text.lower().replace(\\" \\", \\"-\\")\\n\\n\\ndef tag(text):\\n    return PREFIX + slug(text)\\n"},\n'
        ' "slots": {"prefix": {"answer": "t{{SECRET:prefix:hex8}}-", "pattern": "prefix (t[0-9a-f]{8}-)", "default": "tag-"}}\n'
        '}\n'
    ),
}


def write_example_pack(name: str, out: Path) -> Path:
    """Write the example skeleton into OUT (which must not exist or be empty), named NAME."""
    if not is_plain_name(name):
        raise PackError(f"pack name {name!r} must be a plain name ({PLAIN_NAME_RULE})")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PackError(f"{out}: already exists and is not an empty directory")
    for rel, text in EXAMPLE_PACK.items():
        if rel == "manifest.json":
            manifest = json.loads(text)
            manifest["pack"] = name
            text = json.dumps(manifest, indent=1) + "\n"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    return out
