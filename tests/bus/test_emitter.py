"""The emitter: seq without gaps, the hash chain, and datums that are the events' own encoding."""

from membench.bus.emitter import RunEmitter, uuid4_strings
from membench.schemas.chain import ChainVerifier
from membench.schemas.codec import encode_datum_reference
from membench.schemas.events import bounded_text
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run


def _emit_a_few() -> tuple[RunEmitter, list[bytes]]:
    datums: list[bytes] = []
    emitter = RunEmitter("rs", "run-1", "suite/task/B0/1", lambda event, datum: datums.append(datum))
    emitter.emit("RunStarted", build_run()[0].payload, "harness")
    for i in range(3):
        emitter.emit("Turn", {"role": "agent", "text": bounded_text(f"turn {i}"), "input_tokens": i * 1000})
    return emitter, datums


def test_emitted_datums_are_the_reference_encoding_of_the_emitted_events():
    schema = default_registry().latest("event")
    emitter, datums = _emit_a_few()
    assert [e.seq for e in emitter.emitted] == [0, 1, 2, 3]
    for event, datum in zip(emitter.emitted, datums, strict=True):
        assert datum == encode_datum_reference(schema, event.to_record())  # fastavro, field by field


def test_emitted_events_form_an_unbroken_chain():
    verifier = ChainVerifier(default_registry().latest("event"))
    emitter, _ = _emit_a_few()
    assert [verifier.check(e) for e in emitter.emitted] == [None] * 4


def test_event_ids_are_distinct_version_4_uuids():
    ids = uuid4_strings(batch=4)
    drawn = [next(ids) for _ in range(10)]  # crosses batch boundaries
    assert len(set(drawn)) == 10
    for value in drawn:
        parts = value.split("-")
        assert [len(p) for p in parts] == [8, 4, 4, 4, 12]
        assert parts[2][0] == "4" and parts[3][0] in "89ab"


def test_a_type_checker_refuses_a_wrong_payload_at_the_emit_call_site(tmp_path):
    """RunEmitter.emit is typed per kind (membench.schemas.payloads.Emit): mypy refuses a misspelt key and a
    value of the wrong type where the event is emitted, and passes the same calls written right."""
    from mypy import api

    source = tmp_path / "emits.py"
    source.write_text(
        "from membench.bus.emitter import RunEmitter\n"
        "from membench.schemas.events import bounded_text\n\n\n"
        "def emits(emitter: RunEmitter) -> None:\n"
        "    emitter.emit('ToolCall', {'call_id': 'c', 'name': 'edit', 'arguments_digest': 'a', 'is_ptach': True})\n"
        "    emitter.emit('Turn', {'role': 'agent', 'text': 'not a BoundedText'})\n"
        "    emitter.emit('ToolCall', {'call_id': 'c', 'name': 'edit', 'arguments_digest': 'a', 'is_patch': True})\n"
        "    emitter.emit('Turn', {'role': 'agent', 'text': bounded_text('a BoundedText')})\n"
        "    emitter.emit_any('ToolCall', {'is_ptach': True})  # a kind known at run time: the encoder checks it\n")
    out, _, status = api.run([str(source), "--config-file", "", "--follow-imports", "silent",
                              "--cache-dir", str(tmp_path / "cache")])
    flagged = sorted(int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line)
    assert status == 1 and flagged == [6, 7], out
