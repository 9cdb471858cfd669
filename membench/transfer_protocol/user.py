"""The deterministic scripted simulated user (docs/transfer.md): every message it sends is taken
from the project's scenario file, keyed by the conversation's phase and by what the agent asked or
delivered, so two runs of the same agent hold the same conversation."""

from __future__ import annotations

import re

from membench.formats.transfer_format import Scenario


class ScriptedUser:
    name = "scripted-user"

    def __init__(self, scenario: Scenario):
        self.scenario = scenario

    def plan(self) -> str:
        return self.scenario.plan

    def answer(self, question: str) -> str:
        """The first scenario answer whose pattern matches the agent's question, else the default."""
        for pattern, reply in self.scenario.answers:
            if re.search(pattern, question):
                return reply
        return self.scenario.default_answer

    def review(self, check_passed: bool, check_output: str) -> str:
        if check_passed:
            return self.scenario.accept
        return self.scenario.public_check_failed.replace("{output}", check_output.strip()[-2000:])

    def feedback(self, passed: int, cases: int) -> str:
        return self.scenario.test_feedback.replace("{passed}", str(passed)).replace("{cases}", str(cases))
