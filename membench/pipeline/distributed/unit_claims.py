"""A runner's claim on a unit's status (docs/design.md §2 **Claims**): record it, read the status
topic up to it, and, when it lost, repeat the record that counts so that the key's newest record is
true again. The rule itself is pure: `membench/bus/unit_status.py` `KeyStatus`."""

from __future__ import annotations


def record_claim(view, bus, unit_id: str, status: str, run_id: str, attempt: int, claim: str,
                 base: int | None) -> bool:
    """Record STATUS (`started`, or a take-over's `abandoned`) with CLAIM and BASE, acknowledged, then
    read its partition up to it through VIEW (a `StatusView`); whether it counts."""
    key = f"{bus.run_set}/{unit_id}"
    bus.status_positions.pop(key, None)  # only this record's position, never an earlier one's
    bus.mark_unit(unit_id, status, run_id, attempt, claim=claim, base=base)
    bus.flush()
    # from where the view's last read stopped (at most the base) up to our record, whose acknowledged
    # position the bus knows: one partition, no watermark query
    view.refresh(until=bus.status_positions.pop(key, None))
    won = view.won(key, claim, status)
    if won is None:  # not read back (a re-sent record's position is not kept): read every partition
        view.refresh()
        won = view.won(key, claim, status)
        if won is None:
            raise RuntimeError(f"unit {key}: its acknowledged {status} record is not on {view.topics.unit_status}")
    return won


def restate(view, bus, unit_id: str, claim: str, rounds: int = 10) -> bool:
    """After CLAIM lost: while the key's newest record is ours (the lost record, or a repeat of ours
    that a newer record of the winner overtook), append the record that counts again. Each round reads
    to the end it fetched first, so this stops once no record of the winner lands between. Returns
    False only when ROUNDS repeats did not settle the key; True also when its newest record is
    another loser's (whose own restatement settles it)."""
    from membench.bus.unit_status import restatement

    key = f"{bus.run_set}/{unit_id}"
    for _ in range(rounds):
        view.refresh()
        state = view.state(key)
        newest = state.newest[1] if state.newest else {}
        ours = newest.get("by") == claim or ("base" in newest and newest.get("claim") == claim)
        if state.settled or not ours:  # true already, or another loser's to repeat
            return True
        bus.mark_record(unit_id, restatement(state, claim))
        bus.flush()
    view.refresh()
    return view.state(key).settled
