"""A unit's status on the compacted unit-status topic, folded by the claim rule: which of a key's
records counts (`KeyStatus`), the record a losing claim appends (`restatement`), and the statuses a
unit is never run again from (`DONE_STATUSES`). Pure, so the bus's status read, the runner's claim
check, `runner --progress` and `membench.runner.unit_queue.decide` share it, tested without a broker."""

from __future__ import annotations

from dataclasses import dataclass

DONE_STATUSES = ("completed", "excluded")  # a unit with this status is never run again

# -- claims: a compare-and-set on a unit's status, built from the status topic's own order --
#
# A runner's `started` record, and the `abandoned` record of a take-over, carry `claim` (a token
# unique to one runner's decision) and `base` (the offset of the status record that decision read,
# None when it read none). The unit-status topic keeps a key's records in one partition, totally
# ordered, so whether such a record counts is a fact of the log: it counts when no counted claiming
# record (`started`, `completed`, `excluded`) of another claim lies between its base and itself. Two
# runners that read the same record and decided the same attempt therefore cannot both win: the
# first `started` after the base does. `abandoned` is not a claim itself: two runners taking over one
# attempt both record it before their `started`, and only the `started` decides between them; but a
# stale take-over's `abandoned` (its runner stalled after reading) is ignored like a lost `started`.
# Records without `base` (a queued mark, `completed` — a fact read from the log — and `membench run
# --bus`'s marks) always count.
#
# A loser's `started` stays in the log and is ignored by every reader that folds the key (below). A
# restatement (`restates`: the offset of the record it repeats, `by`: the loser's claim) appends the
# counted record again after it, so the newest record of the key is true even for a reader that only
# keeps the newest (compaction keeps nothing else); it counts only while no newer record counts.

CLAIMING = ("started", *DONE_STATUSES)


@dataclass
class KeyStatus:
    """One unit's status folded from its unit-status records in offset order (pure: the runner's
    claim check, `runner --progress` and `decide`'s input all read a key through it)."""

    record: dict | None = None  # the newest record that counts
    offset: int | None = None  # its offset (a restatement: the offset it restates)
    claim_offset: int = -1  # the newest counted claiming record's offset (-1: none)
    claim_token: str | None = None  # and its claim
    newest: tuple[int, dict] | None = None  # the newest record in the log, counted or not

    def add(self, offset: int, record: dict) -> bool:
        """Fold one record; returns whether it counts."""
        self.newest = (offset, record)
        if "restates" in record:
            restates = int(record["restates"])
            if self.offset is not None and self.offset > restates:
                return False  # a newer record counts already: this repeat is stale
            self.record, self.offset = record, restates
            if record.get("status") in CLAIMING and self.claim_offset < restates:
                # the original was compacted away: the repeat stands for it
                self.claim_offset, self.claim_token = restates, record.get("claim")
            return True
        if "claim" in record and "base" in record:  # a runner's decision: `started`, or `abandoned` of a take-over
            base = -1 if record["base"] is None else int(record["base"])
            if self.claim_offset > base and self.claim_token != record["claim"]:
                return False  # another claim took the unit after the record this one decided on
        self.record, self.offset = record, offset
        if record.get("status") in CLAIMING:
            self.claim_offset, self.claim_token = offset, record.get("claim")
        return True

    @property
    def settled(self) -> bool:
        """Whether the newest record in the log is the one that counts (or repeats it)."""
        if self.newest is None:
            return True
        offset, record = self.newest
        return offset == self.offset or record.get("restates") == self.offset and self.offset is not None


def restatement(state: KeyStatus, by: str) -> dict:
    """The record a losing claim appends so that the key's newest record is the counted one again."""
    assert state.record is not None and state.offset is not None
    fields = {k: v for k, v in state.record.items() if k not in ("restates", "by")}
    return {**fields, "restates": state.offset, "by": by}


def fold_statuses(records) -> dict[str, KeyStatus]:
    """key -> KeyStatus from (key, offset, record) in each key's offset order."""
    out: dict[str, KeyStatus] = {}
    for key, offset, record in records:
        out.setdefault(key, KeyStatus()).add(offset, record)
    return out
