"""The traps hygiene-v2 adds to hygiene-v1's 34 (tools/hygiene_traps.py): one per construct C2–C10
on each new repository (notecli, cfgsys, plugreg), and a fourth C10 trap on tabular, so every
construct has at least six traps. Each construct is a template; the repositories fill it with their
own domain and a different kind of evidence (a reviewer rule, a maintainer decision, human
feedback, a failure diagnosis), and the families vary: a superseded decision, a
scoped preference, an authority order, a disconfirmed lesson, a generator-vs-artefact rule, an
abstention case. Secrets are placeholders {{SECRET:name:class}} (CSPRNG values at finalize); the
trap fields are those of tools/hygiene_traps.py, plus `checks` (the commission / omission tests)."""

from hygiene_traps import SRC, S, trap

TRAPS_V2 = []


def _q(text: str) -> str:
    return repr(text)


# ---------------------------------------------------------------- C2 retrieval precision under interference
def c2(repo, tid, warm, kind, siblings, target, module, fn, clean=False):
    """Two settings of each of three sibling targets, one kind per session; the asked target is not the
    first of either list, so the first-seen value of each kind is a distractor's."""
    keys = [f"s{i}" for i in range(3)]
    stamps = {k: S(f"stamp_{k}", "hex8") for k in keys}
    folders = {k: S(f"folder_{k}", "word") for k in keys}
    t = keys[target]
    events = [(1, kind, f"Settings of the {siblings[i]}: it is stamped st-{stamps[k]}.", [f"{repo}/README.md"],
               [f"{k}-stamp"]) for i, k in enumerate(keys)]
    events += [(2, kind, f"Settings of the {siblings[i]}: its files go to the folder {folders[k]}.", [f"{repo}/README.md"],
                [f"{k}-folder"]) for i, k in reversed(list(enumerate(keys)))]
    if target == 2:  # reversed above puts target first in S2: keep a distractor first
        events[3], events[4] = events[4], events[3]
    bad = [stamps[k] for k in keys if k != t] + [folders[k] for k in keys if k != t]
    return trap(
        id=tid, construct="C2", family="interference", repo=repo, warm=warm, clean=clean, events=events,
        instruction=f"Create {module} with {fn}() returning the pair (stamp, folder) configured for the {siblings[target]}.",
        files={module: f'"""Settings of the {siblings[target]}."""\n\nSTAMP = "{{{{SLOT:stamp}}}}"\nFOLDER = "{{{{SLOT:folder}}}}"\n\n\ndef {fn}():\n    return (STAMP, FOLDER)\n'},
        slots={"stamp": (f"st-{stamps[t]}", r"stamped (st-[0-9a-f]{8})", "st-default"),
               "folder": (folders[t], r"the folder ([A-Z]{8})", "out")},
        oracle=SRC + f"def test_target_settings():\n    from {module[:-3].replace('/', '.')} import {fn}\n    assert {fn}() == (\"st-{stamps[t]}\", \"{folders[t]}\")\n\n\n"
        f"def test_no_distractor_settings():\n    src = _src({module[:-3].replace('/', '.')!r})\n    for bad in {tuple(bad)!r}:\n        assert bad not in src\n",
        decisive=[f"st-{stamps[t]}", folders[t]], required=[f"{t}-stamp", f"{t}-folder"],
        why=f"The stamp and the folder of the {siblings[target]} are stated in two events of different sessions, each among same-shaped settings of two sibling targets whose values come first; one event gives at most half of the answer and the first-seen value of each kind is a distractor's.",
        labels=[{"type": "harmful-retrieval", "harmful_memory": "a sibling target's settings"}],
        checks={"omission": ["test_target_settings"], "commission": ["test_no_distractor_settings"]})


TRAPS_V2.append(c2("notecli", "c2-note-export-settings", (0, 1), "review",
                   ["markdown export", "html export", "pdf export"], 1, "notecli/htmlexport.py", "html_export_settings"))
TRAPS_V2.append(c2("cfgsys", "c2-cfg-environment-settings", (1, 2), "decision",
                   ["staging environment", "production environment", "test environment"], 2, "cfgsys/testenv.py",
                   "test_environment_settings", clean=True))
TRAPS_V2.append(c2("plugreg", "c2-plug-cache-settings", (2, 3), "human_feedback",
                   ["auth plugin", "cache plugin", "search plugin"], 1, "plugreg/cacheplug.py", "cache_plugin_settings"))


# ---------------------------------------------------------------- C3 staleness and supersession (a superseded decision)
def c3(repo, tid, warm, what, prefix, module, fn, newest_old=False, clean=False):
    old, new = S("old", "hex8"), S("new", "hex8")
    events = [
        (1, "decision", f"Maintainers' decision: the {what} is {prefix}-{old}.", [f"{repo}/README.md"], ["old-value"]),
        (1, "review", f"Review reminder: keep the {what} {prefix}-{old} wherever it is written.", [f"{repo}/README.md"], ["old-value"]),
        (2, "decision", f"Superseding decision for release 2: the {what} becomes {prefix}-{new}, replacing the earlier value.", [f"{repo}/README.md"], ["new-value"]),
        (2, "decision", "Release status: release 2 is the only supported release from now on.", [f"{repo}/README.md"], ["release-2-active"]),
    ]
    if newest_old:
        events.append((2, "review", f"Copied from the release-1 handbook (archived): the {what} is {prefix}-{old}.", [f"{repo}/README.md"], ["old-value"]))
    mod = module[:-3].replace("/", ".")
    return trap(
        id=tid, construct="C3", family="superseded-decision", repo=repo, warm=warm, clean=clean, events=events,
        instruction=f"Create {module} with {fn}() returning the current {what}.",
        files={module: f'"""The {what}."""\n\nVALUE = "{{{{SLOT:value}}}}"\n\n\ndef {fn}():\n    return VALUE\n'},
        slots={"value": (f"{prefix}-{new}", rf"({prefix}-[0-9a-f]{{8}})", f"{prefix}-1")},
        oracle=SRC + f"def test_current_value():\n    from {mod} import {fn}\n    assert {fn}() == \"{prefix}-{new}\"\n\n\n"
        f"def test_stale_value_absent():\n    assert \"{old}\" not in _src({mod!r})\n",
        decisive=[f"{prefix}-{new}"], required=["new-value", "release-2-active"],
        why=f"The current {what} needs two later events (the superseding value, and that release 2 is the only one supported) against an older value stated more often{' and restated by the newest event' if newest_old else ''}; no single event, and not the most salient one, gives the current value with the evidence that it is in force.",
        labels=[{"type": "stale", "stale_fact": f"the release-1 {what}", "fact_ids": ["old-value"], "active_fact": f"the release-2 {what}"}],
        checks={"omission": ["test_current_value"], "commission": ["test_stale_value_absent"]},
        newest_event_fails=newest_old)


TRAPS_V2.append(c3("notecli", "c3-note-storage-marker", (2, 3), "storage format marker", "fm", "notecli/fmt.py",
                   "storage_marker", clean=True))
TRAPS_V2.append(c3("cfgsys", "c3-cfg-schema-tag", (0, 3), "config schema tag", "sv", "cfgsys/schema.py", "schema_tag",
                   newest_old=True))
TRAPS_V2.append(c3("plugreg", "c3-plug-api-level", (1, 0), "plugin API level", "api", "plugreg/apilevel.py", "api_level"))


# ---------------------------------------------------------------- C4 update propagation
def c4(repo, tid, warm1, what, prefix, module, fn_old, fn_new, arg):
    old, new = S("old", "hex8"), S("new", "hex8")
    mod = module[:-3].replace("/", ".")
    body = (f'"""Lines carrying the {what}."""\n\nTAG = "{{tag}}"\n\n\ndef {fn_old}({arg}):\n    return f"{{TAG}} {{{arg}}}"\n')
    s2_files = {module: body.replace("{tag}", f"{prefix}-{old}")}
    s3_files = {module: body.replace("{tag}", "{{SLOT:tag}}") + f'\n\ndef {fn_new}({arg}s):\n    return [{fn_old}(x) for x in {arg}s]\n'}
    return trap(
        id=tid, construct="C4", family="update-propagation", repo=repo, warm=(warm1, None),
        events=[
            (1, "decision", f"Convention: the {what} is {prefix}-{old}.", [module], ["old-tag"]),
            (2, "decision", f"Convention changed after an audit: the {what} is now {prefix}-{new}, everywhere such lines are produced.", [module], ["new-tag"]),
        ],
        s2=(f"In {module} add {fn_old}({arg}) returning '<{what}> <{arg}>' with the {what} {prefix}-{old} of the convention.",
            s2_files,
            f"from {mod} import {fn_old}\n\n\ndef test_line():\n    assert {fn_old}(\"x\") == \"{prefix}-{old} x\"\n"),
        instruction=f"In {module} add {fn_new}({arg}s) returning the list of {fn_old}(x) lines for each x of {arg}s.",
        files=s3_files,
        slots={"tag": (f"{prefix}-{new}", rf"is now ({prefix}-[0-9a-f]{{8}})", f"{prefix}-{old}")},
        oracle=SRC + f"def test_new_function_uses_new_tag():\n    from {mod} import {fn_new}\n    assert {fn_new}([\"a\", \"b\"]) == [\"{prefix}-{new} a\", \"{prefix}-{new} b\"]\n\n\n"
        f"def test_change_propagated_to_existing_lines():\n    from {mod} import {fn_old}\n    assert {fn_old}(\"y\") == \"{prefix}-{new} y\"\n    assert \"{old}\" not in _src({mod!r})\n",
        decisive=[f"{prefix}-{new}"], required=["new-tag"],
        why=f"The change event names the new {what} but not the S3 site; the oracle requires it in the new function and in the existing {fn_old} written in S2 with the old value, so the change must be propagated, not just copied.",
        labels=[{"type": "repeated-error-opportunity", "bad_action": f"keep the old {what} in existing lines"}],
        checks={"omission": ["test_new_function_uses_new_tag", "test_change_propagated_to_existing_lines"]})


TRAPS_V2.append(c4("notecli", "c4-note-footer-tag", 0, "footer tag", "ft", "notecli/footer.py", "footer_line",
                   "footer_lines", "text"))
TRAPS_V2.append(c4("cfgsys", "c4-cfg-audit-tag", 1, "audit tag", "au", "cfgsys/audit.py", "audit_line", "audit_lines", "key"))
TRAPS_V2.append(c4("plugreg", "c4-plug-signature-tag", 2, "signature tag", "sg", "plugreg/signing.py", "signed_name",
                   "signed_names", "name"))


# ---------------------------------------------------------------- C5 scope discipline (a scoped preference)
def c5(repo, tid, warm, kind, marker_of, scope, other, module, fn_in, fn_out, corrected, clean=False):
    mark = S("mark", "word")
    mod = module[:-3].replace("/", ".")
    if corrected:
        events = [
            (1, kind, f"Preference: {marker_of} carry the marker '{mark}' in front.", [module], ["marker-value"]),
            (2, kind, f"Scope correction from the same person: the '{mark}' marker was meant for {scope} only. Everything else carries the marker '' as before, plain text.", [module], ["marker-scope"]),
        ]
        out_pattern = r"carr(?:y|ies) the marker '([^']*)'"  # verbatim replay finds the unscoped rule first
    else:
        events = [
            (1, kind, f"Preference: {marker_of} carry the marker '{mark}' in front. This applies to {scope} only; {other} stay plain.", [module], ["marker-value", "marker-scope"]),
        ]
        out_pattern = r"marker '([A-Z]{8})' in front\.(?!\s*This applies)"
    return trap(
        id=tid, construct="C5", family="scoped-preference", repo=repo, warm=warm, clean=clean, events=events,
        instruction=f"Create {module} with {fn_in}(text) for {scope} and {fn_out}(text) for {other}: each returns the text with the marker the preference asks for, if any ('<marker> <text>').",
        files={module: f'"""Markers."""\n\nIN_SCOPE = "{{{{SLOT:inside}}}}"\nOUT_OF_SCOPE = "{{{{SLOT:outside}}}}"\n\n\ndef _mark(marker, text):\n    return f"{{marker}} {{text}}" if marker else text\n\n\ndef {fn_in}(text):\n    return _mark(IN_SCOPE, text)\n\n\ndef {fn_out}(text):\n    return _mark(OUT_OF_SCOPE, text)\n'},
        slots={"inside": (mark, r"marker '([A-Z]{8})'", ""), "outside": ("", out_pattern, "")},
        oracle=f"from {mod} import {fn_in}, {fn_out}\n\n\ndef test_in_scope_marker():\n    assert {fn_in}(\"a\") == \"{mark} a\"\n\n\ndef test_out_of_scope_stays_plain():\n    assert {fn_out}(\"b\") == \"b\"\n",
        decisive=[mark], required=["marker-value", "marker-scope"],
        why=("The first preference states the marker for everything; only the later correction scopes it. Replaying the first event over-applies it, replaying the correction alone loses the value; the oracle checks the in-scope use and the out-of-scope absence."
             if corrected else
             "The marker and its scope are two sentences of one event; a memory that keeps the value but drops the scope sentence applies the marker everywhere. The oracle checks the in-scope use and the out-of-scope absence."),
        labels=[{"type": "human-feedback", "required_memory": f"the marker, for {scope} only"}],
        checks={"omission": ["test_in_scope_marker"], "commission": ["test_out_of_scope_stays_plain"]})


TRAPS_V2.append(c5("notecli", "c5-note-archived-marker", (1, 2), "review", "listed notes", "archived notes",
                   "active notes", "notecli/marks.py", "archived_line", "active_line", corrected=True))
TRAPS_V2.append(c5("cfgsys", "c5-cfg-production-banner", (2, 0), "human_feedback", "rendered config files",
                   "production config files", "development config files", "cfgsys/banner.py", "production_banner",
                   "development_banner", corrected=False, clean=True))
TRAPS_V2.append(c5("plugreg", "c5-plug-third-party-flag", (3, 1), "review", "plugin descriptions",
                   "third-party plugins", "built-in plugins", "plugreg/describe.py", "third_party_description",
                   "builtin_description", corrected=True))


# ---------------------------------------------------------------- C6 contradiction / authority order
def c6(repo, tid, warm, what, high, low, order, module, fn, low_first):
    hi, lo = S("high", "int"), S("low", "int")
    mod = module[:-3].replace("/", ".")
    e_high = (1 if not low_first else 2, "decision", f"{high}: the {what} is {hi}.", [module], ["authoritative-value"])
    e_low = (1 if low_first else 2, "review", f"{low}: the {what} is {lo}.", [module], ["other-value"])
    events = [e_low, e_high] if low_first else [e_high, e_low]
    events.append((2, "decision", f"Authority order: {order}", [module], ["authority-order"]))
    return trap(
        id=tid, construct="C6", family="authority-order", repo=repo, warm=warm, events=events,
        instruction=f"Create {module} with {fn}() returning the {what} the project has settled on.",
        files={module: f'"""The {what}."""\n\nVALUE = {{{{SLOT:value}}}}\n\n\ndef {fn}():\n    return VALUE\n'},
        slots={"value": (hi, rf"the {what} is (\d{{4}})", "0")},
        oracle=SRC + f"def test_authoritative_value():\n    from {mod} import {fn}\n    assert {fn}() == {hi}\n\n\n"
        f"def test_other_value_not_used():\n    assert \"{lo}\" not in _src({mod!r})\n",
        decisive=[hi], required=["authoritative-value", "authority-order"],
        why=f"Two sources state different values for the {what}; which one holds follows only from the separate authority-order event, {'and the lower-ranked source speaks first' if low_first else 'not from recency'}, so no single event decides it.",
        labels=[{"type": "contradiction", "old_memory": f"{low}'s value", "new_memory": f"{high}'s value by authority order"}],
        checks={"omission": ["test_authoritative_value"], "commission": ["test_other_value_not_used"]})


TRAPS_V2.append(c6("notecli", "c6-note-history-limit", (3, 0), "history limit", "The CLI style guide (normative)",
                   "A blog post by a contributor", "the normative CLI style guide overrides blog posts and chat.",
                   "notecli/history.py", "history_limit", low_first=True))
TRAPS_V2.append(c6("cfgsys", "c6-cfg-max-layers", (0, 2), "maximum layer count", "Security team policy",
                   "Product request", "security team policy overrides product requests until security revises it.",
                   "cfgsys/maxlayers.py", "max_layers", low_first=False))
TRAPS_V2.append(c6("plugreg", "c6-plug-load-timeout", (1, 3), "plugin load timeout in ms", "Registry RFC-7 (accepted)",
                   "Maintainer chat", "accepted RFCs override chat messages; the newest accepted RFC wins.",
                   "plugreg/timeout.py", "load_timeout_ms", low_first=True))


# ---------------------------------------------------------------- C7 cross-session synthesis
def c7(repo, tid, warm, what, part1, part2, layout, module, fn, sample, clean=False):
    a, b = S("a", "word"), S("b", "hex8")
    mod = module[:-3].replace("/", ".")
    composed = f"{a}/{sample}.x{b}"
    return trap(
        id=tid, construct="C7", family="synthesis", repo=repo, warm=warm, clean=clean,
        events=[
            (1, "decision", f"{what.capitalize()}: {part1} {a}.", [module], ["first-part"]),
            (2, "human_feedback", f"More on the {what}: {part2} x{b}; {layout}", [module], ["second-part"]),
        ],
        instruction=f"Create {module} with {fn}(name) returning the {what} for a name.",
        files={module: f'"""The {what}."""\n\nHEAD = "{{{{SLOT:head}}}}"\nTAIL = "{{{{SLOT:tail}}}}"\n\n\ndef {fn}(name):\n    return (f"{{HEAD}}/" if HEAD else "") + name + (f".{{TAIL}}" if TAIL else "")\n'},
        slots={"head": (a, r"([A-Z]{8})\.", ""), "tail": (f"x{b}", r"(x[0-9a-f]{8})", "")},
        oracle=f"from {mod} import {fn}\n\n\ndef test_composed():\n    assert {fn}(\"{sample}\") == \"{composed}\"\n\n\n"
        f"def test_not_half_composed():\n    out = {fn}(\"other\")\n    assert out.startswith(\"{a}/\") and out.endswith(\".x{b}\")\n",
        decisive=[composed], required=["first-part", "second-part"],
        why=f"The {what} is composed from a part stated in S1 and a part stated in S2, with the layout given in prose; the composed value appears in no event, so replaying any single event yields half of it.",
        labels=[{"type": "human-feedback", "required_memory": f"both parts of the {what}"}],
        checks={"omission": ["test_composed"], "commission": ["test_not_half_composed"]})


TRAPS_V2.append(c7("notecli", "c7-note-archive-path", (2, 1), "archive path", "archives live under the top folder",
                   "archive files end with the suffix", "the folder, a slash, the note name, a dot, then the suffix.",
                   "notecli/archive.py", "archive_path", "groceries", clean=True))
TRAPS_V2.append(c7("cfgsys", "c7-cfg-snapshot-name", (3, 2), "snapshot name", "snapshots are grouped under the site",
                   "snapshot names carry the revision", "site, slash, config name, dot, revision.",
                   "cfgsys/snapshot.py", "snapshot_name", "billing"))
TRAPS_V2.append(c7("plugreg", "c7-plug-entry-point", (0, 2), "entry point", "entry points start with the namespace",
                   "entry points end with the build id", "namespace and plugin name joined by a slash, then a dot and the build id.",
                   "plugreg/entry.py", "entry_point", "thumbnailer", clean=True))


# ---------------------------------------------------------------- C8 procedural / source of truth (generator vs artefact)
def c8(repo, tid, warm, gen, src, artifact, pkg_mod, table, name, value, instruction, kind):
    chan = S("channel", "hex8")
    content = {
        "decision": f"Maintainers' decision: {artifact} is generated from {src}, the source of truth; run `python {gen} --channel rel-{chan}` after editing it, and never edit the generated file.",
        "review": f"Review of a rejected PR that hand-edited {artifact}: edit {src} instead and regenerate with `python {gen} --channel rel-{chan}`; the release check refuses any other channel.",
        "failure": f"Release failure: the package was refused because {artifact} was stamped with the default channel. Regenerate it from {src} with `python {gen} --channel rel-{chan}`.",
    }[kind]
    return trap(
        id=tid, construct="C8", family="generator-vs-artefact", repo=repo, warm=warm,
        events=[(1, kind, content, [src, artifact, gen], ["source-of-truth", "release-channel"])],
        instruction=instruction, files=None,
        c8=dict(gen=gen, src=src, artifact=artifact, pkg_mod=pkg_mod, name=name, value=value, table=table),
        slots={"channel": (f"rel-{chan}", r"--channel (rel-[0-9a-f]{8})", "dev")},
        oracle=None, decisive=[f"rel-{chan}"], required=["source-of-truth", "release-channel"],
        why="The event describes a workflow, not the S3 change: the agent must add the entry to the JSON source and regenerate the artifact with the remembered release channel. Copying the event edits nothing; editing only the artifact, or regenerating with the default channel, fails the oracle's source and stamp checks.",
        labels=[{"type": "repeated-error-opportunity", "bad_action": "hand-edit the generated artifact or stamp it with the default channel"}],
        checks={"omission": ["test_source_of_truth_edited", "test_artifact_regenerated_with_release_channel",
                             "test_module_exposes_new_entry"]})


TRAPS_V2.append(c8("notecli", "c8-note-commands", (0, 3), "tools/gen_commands.py", "notecli/commands.json",
                   "notecli/_commands.py", "notecli._commands", "COMMANDS", "search", "search the notes",
                   "Add the command 'search' (help text 'search the notes') to notecli's command table.", "review"))
TRAPS_V2.append(c8("cfgsys", "c8-cfg-defaults", (1, 0), "tools/gen_defaults.py", "cfgsys/defaults.json",
                   "cfgsys/_defaults.py", "cfgsys._defaults", "DEFAULTS", "timeout", "30",
                   "Add the default setting 'timeout' with value '30' to cfgsys's defaults.", "failure"))
TRAPS_V2.append(c8("plugreg", "c8-plug-builtins", (2, 1), "tools/gen_builtins.py", "plugreg/builtins.json",
                   "plugreg/_builtins.py", "plugreg._builtins", "BUILTINS", "reverse", "reverses its input",
                   "Add the built-in plugin 'reverse' (description 'reverses its input') to plugreg's built-ins.", "decision"))


# ---------------------------------------------------------------- C9 spurious-lesson rejection (a disconfirmed lesson)
def c9(repo, tid, warm, lesson, disconfirm, prefix, module, fn, plain_call, plain_result, clean=False):
    tok = S("tok", "hex8")
    mod = module[:-3].replace("/", ".")
    return trap(
        id=tid, construct="C9", family="disconfirmed-lesson", repo=repo, warm=warm, clean=clean,
        events=[
            (1, "failure", lesson.format(tok=f"{prefix}-{tok}"), [module], ["false-lesson"]),
            (2, "failure", disconfirm, [module], ["disconfirmation"]),
        ],
        instruction=f"Create {module} with {fn}(text) returning the text as the task needs it: {plain_result}.",
        files={module: f'"""{fn}."""\n\nGUARD = "{{{{SLOT:guard}}}}"\n\n\ndef {fn}(text):\n    return (GUARD + " " if GUARD else "") + {plain_call}\n'},
        slots={"guard": ("", rf"({prefix}-[0-9a-f]{{8}})", "")},
        oracle=SRC + f"def test_plain_behaviour():\n    from {mod} import {fn}\n    assert {fn}(\" Ab \") == {plain_call.replace('text', repr(' Ab '))}\n\n\n"
        f"def test_disproved_lesson_not_applied():\n    assert \"{tok}\" not in _src({mod!r})\n",
        decisive=[], required=["false-lesson", "disconfirmation"],
        why="The S1 failure event files a causal lesson that the S2 event disconfirms; replaying the lesson verbatim applies a guard the task never needed, and the correct behaviour needs the later disconfirmation.",
        labels=[{"type": "harmful-retrieval", "harmful_memory": "the disconfirmed lesson"},
                {"type": "repeated-error-opportunity", "bad_action": "apply the withdrawn guard"}],
        checks={"commission": ["test_disproved_lesson_not_applied"]})


TRAPS_V2.append(c9("notecli", "c9-note-encoding-guard", (1, 3),
                   "A note import failed on CI with garbled text; the lesson filed: prefix every normalized note with the encoding guard {tok}.",
                   "Replay of the failing import passed with no change: the CI runner had a broken locale. Note text needs no guard; the lesson is withdrawn.",
                   "eg", "notecli/normalize.py", "normalize_note", "text.strip()", "the text stripped of surrounding whitespace", clean=True))
TRAPS_V2.append(c9("cfgsys", "c9-cfg-quote-guard", (2, 3),
                   "A config reload test failed once; the on-call concluded values must be prefixed with the quote guard {tok} before use.",
                   "The reload failure was a race in the test fixture, since fixed; values are used as parsed. No quote guard is needed.",
                   "qg", "cfgsys/clean.py", "clean_value", "text.strip().lower()", "the value stripped and lowercased"))
TRAPS_V2.append(c9("plugreg", "c9-plug-load-guard", (3, 0),
                   "A plugin failed to load in the nightly build; the lesson recorded: plugin names need the load guard {tok} in front.",
                   "Follow-up: the nightly failure was a full disk on the build host. Plugin names are used as they are; the load-guard lesson is disconfirmed.",
                   "lg", "plugreg/display.py", "display_name", "text.strip().title()", "the name stripped and title-cased"))


# ---------------------------------------------------------------- C10 abstention (no prior event bears on the task)
def c10(repo, tid, warm, kind, note, prefix, files_scope, module, fn, plain_call, plain_result, clean=False):
    tok = S("tok", "hex8")
    mod = module[:-3].replace("/", ".")
    return trap(
        id=tid, construct="C10", family="abstention", repo=repo, warm=warm, clean=clean,
        events=[(1, kind, note.format(tok=f"{prefix}-{tok}"), [files_scope], ["unrelated-fact"])],
        instruction=f"Create {module} with {fn}(text) returning {plain_result}.",
        files={module: f'"""{fn}."""\n\nEXTRA = "{{{{SLOT:extra}}}}"\n\n\ndef {fn}(text):\n    out = {plain_call}\n    return out + (" " + EXTRA if EXTRA else "")\n'},
        slots={"extra": ("", rf"({prefix}-[0-9a-f]{{8}})", "")},
        oracle=SRC + f"def test_plain_behaviour():\n    from {mod} import {fn}\n    assert {fn}(\" Ab \") == {plain_call.replace('text', repr(' Ab '))}\n\n\n"
        f"def test_irrelevant_memory_absent():\n    assert \"{tok}\" not in _src({mod!r})\n",
        decisive=[], required=["unrelated-fact"],
        why="The only stored event concerns another codebase or component; the correct behaviour uses no memory, and replaying the similar-sounding event imports a token that does not belong here.",
        labels=[{"type": "harmful-retrieval", "harmful_memory": "a note about another codebase"}],
        checks={"commission": ["test_irrelevant_memory_absent"]})


TRAPS_V2.append(c10("notecli", "c10-note-sync-token", (0, 2), "human_feedback",
                    "For the mobile notes app (a separate repository, not notecli), every synced note ends with the sync token {tok}.",
                    "st", "mobile/sync.py", "notecli/title.py", "note_title", "text.strip().capitalize()",
                    "the note's title: the text stripped and capitalized"))
TRAPS_V2.append(c10("cfgsys", "c10-cfg-vault-suffix", (3, 1), "review",
                    "Review on the secrets vault service (another team's codebase): vault keys end with the suffix {tok}.",
                    "vs", "vault/keys.py", "cfgsys/keyname.py", "key_name", "text.strip().lower().replace(' ', '_')",
                    "the config key name: stripped, lowercased, spaces as underscores", clean=True))
TRAPS_V2.append(c10("plugreg", "c10-plug-market-tag", (1, 2), "decision",
                    "Decision for the plugin marketplace website (a different project): listings carry the tag {tok}.",
                    "mt", "market/listing.py", "plugreg/slug.py", "plugin_slug", "text.strip().lower().replace(' ', '-')",
                    "the plugin slug: stripped, lowercased, spaces as dashes"))
TRAPS_V2.append(c10("tabular", "c10-tab-ledger-code", (3, 2), "failure",
                    "Incident in the ledger service (not tabular): its exports were rejected until each line carried the ledger code {tok}.",
                    "lc", "ledger/export.py", "tabular/colname.py", "column_title", "text.strip().title()",
                    "the column title: the text stripped and title-cased", clean=True))
