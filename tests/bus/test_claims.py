"""Fencing's last window: two runners that read the same unit-status record and decide
the same attempt. Whether a claim won is decided by the status topic's own order (`KeyStatus`): the
first `started` after the record a decision read wins, every later one that read the same record
loses and is ignored by readers, and a loser's restatement makes the newest record true again."""

from __future__ import annotations

from membench.bus.unit_status import KeyStatus, fold_statuses, restatement
from membench.bus.topics import topics_from_dsn


def _fold(*records):
    state = KeyStatus()
    verdicts = [state.add(offset, record) for offset, record in enumerate(records)]
    return state, verdicts


QUEUED = {"status": "queued", "run_id": "", "attempt": 0}


def _started(claim, base, attempt=1, run="r1"):
    return {"status": "started", "run_id": run, "attempt": attempt, "claim": claim, "base": base}


def test_the_first_started_after_the_base_wins_and_the_second_is_ignored():
    state, verdicts = _fold(QUEUED, _started("B", 0), _started("A", 0))
    assert verdicts == [True, True, False]
    assert state.record["claim"] == "B" and state.offset == 1
    assert not state.settled  # the newest record in the log is A's lost claim


def test_a_claim_with_nothing_between_its_base_and_itself_wins():
    state, verdicts = _fold(QUEUED, {"status": "abandoned", "run_id": "r0", "attempt": 0, "claim": "A", "base": 0},
                            _started("A", 0))
    assert verdicts == [True, True, True] and state.settled


def test_a_claim_that_read_no_record_loses_to_any_claim_before_it():
    assert _fold(_started("B", None), _started("A", None))[1] == [True, False]
    assert _fold(_started("A", None))[1] == [True]


def test_a_completed_mark_after_the_base_makes_a_late_claim_lose():
    done = {"status": "completed", "run_id": "r1", "attempt": 1, "claim": "B"}
    state, verdicts = _fold(QUEUED, _started("B", 0), done, _started("A", 0))
    assert verdicts == [True, True, True, False]
    assert state.record == done


def test_two_take_overs_of_one_attempt_both_record_abandoned_and_the_first_started_wins():
    # X's attempt 1 is open; A and B read it (offset 1), both close it, then both claim attempt 2
    state, verdicts = _fold(QUEUED, _started("X", 0),
                            {"status": "abandoned", "run_id": "r1", "attempt": 1, "claim": "A", "base": 1},
                            {"status": "abandoned", "run_id": "r1", "attempt": 1, "claim": "B", "base": 1},
                            _started("B", 1, attempt=2, run="r2"), _started("A", 1, attempt=2, run="r2"))
    assert verdicts == [True, True, True, True, True, False]
    assert (state.record["claim"], state.record["attempt"]) == ("B", 2)


def test_a_stale_claim_loses_to_a_take_over_that_came_between():
    # A read queued and stalled; B ran attempt 1 and stalled; C took over with attempt 2
    state, verdicts = _fold(QUEUED, _started("B", 0),
                            {"status": "abandoned", "run_id": "r1", "attempt": 1, "claim": "C", "base": 1},
                            _started("C", 1, attempt=2, run="r2"), _started("A", 0))
    assert verdicts[-1] is False and state.record["claim"] == "C"


def test_a_restatement_makes_the_newest_record_the_one_that_counts():
    state, _ = _fold(QUEUED, _started("B", 0), _started("A", 0))
    repeat = restatement(state, "A")
    assert repeat == {**_started("B", 0), "restates": 1, "by": "A"}
    assert state.add(3, repeat) and state.settled and state.offset == 1
    # a take-over that read the repeat decides on the winner's record: its claim still wins
    assert state.add(4, {"status": "abandoned", "run_id": "r1", "attempt": 1, "claim": "C", "base": 1})
    assert state.add(5, _started("C", state.offset, attempt=2, run="r2"))


def test_a_restatement_overtaken_by_a_newer_record_is_stale_and_repeated_again():
    state, _ = _fold(QUEUED, _started("B", 0), _started("A", 0))
    stale = restatement(state, "A")
    done = {"status": "completed", "run_id": "r1", "attempt": 1, "claim": "B"}
    assert state.add(3, done)  # the winner completed between A's read and A's repeat
    assert state.add(4, stale) is False and state.record == done and not state.settled
    again = restatement(state, "A")
    assert again["status"] == "completed" and again["restates"] == 3
    assert state.add(5, again) and state.settled and state.record["status"] == "completed"


def test_a_reader_that_only_finds_the_repeat_after_compaction_takes_it_as_the_record():
    repeat = {**_started("B", 0), "restates": 1, "by": "A"}
    state, verdicts = _fold(repeat)
    assert verdicts == [True] and state.record["claim"] == "B" and state.settled


def test_records_without_claims_always_count():
    marks = [QUEUED, {"status": "started", "run_id": "r1", "attempt": 1},
             {"status": "completed", "run_id": "r1", "attempt": 1}]
    state, verdicts = _fold(*marks)
    assert verdicts == [True] * 3 and state.record == marks[-1]


def test_fold_statuses_keeps_keys_apart():
    states = fold_statuses([("rs/u1", 0, QUEUED), ("rs/u2", 1, QUEUED), ("rs/u1", 2, _started("B", 0)),
                            ("rs/u2", 3, _started("A", 1)), ("rs/u1", 4, _started("A", 0))])
    assert states["rs/u1"].record["claim"] == "B" and states["rs/u2"].record["claim"] == "A"


def test_the_unit_status_topic_keeps_records_young_enough_for_a_claim_check():
    topics = topics_from_dsn("kafka://127.0.0.1:9092/study1")
    spec = topics.layout.specs(topics)[topics.unit_status]
    assert spec["cleanup.policy"] == "compact" and int(spec["min.compaction.lag.ms"]) >= 3600 * 1000


def test_a_stale_take_overs_abandoned_mark_is_ignored_like_a_lost_claim():
    # A read B's started attempt 1 (offset 1) and stalled; C closed it and claimed attempt 2; A resumes
    # and records its take-over: neither its abandoned nor its started may become the unit's status
    started_c = _started("C", 1, attempt=2, run="r2")
    state, verdicts = _fold(QUEUED, _started("B", 0),
                            {"status": "abandoned", "run_id": "r1", "attempt": 1, "claim": "C", "base": 1},
                            started_c,
                            {"status": "abandoned", "run_id": "r1", "attempt": 1, "claim": "A", "base": 1},
                            _started("A", 1, attempt=2, run="r2"))
    assert verdicts == [True, True, True, True, False, False]
    assert state.record == started_c
    repeat = restatement(state, "A")
    assert repeat["claim"] == "C" and repeat["restates"] == 3
    # a later take-over that decided on the repeat has C's record as its base: its claim counts
    assert state.add(6, repeat) and state.settled
    assert state.add(7, _started("D", state.offset, attempt=3, run="r3"))
