"""What a turn used when its session goes on in another agent process
(session/usage.py): figures that count from zero there, and figures that count on."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from acp_nvim.client.editor import Spent
from acp_nvim.client.history._blocks import turn_report
from acp_nvim.client.history._store import StoredBlock
from acp_nvim.client.session import view
from acp_nvim.client.session.usage import Usage


class Chat:
    """The calls a chat makes (session/chat.py), its report kept as its model does."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.report: dict[str, Any] = {}

    def ready(self, session_id: str, *, resumed: bool = False) -> None:
        self.report = self.usage.switch(session_id, self.report, resumed=resumed)

    def reported(self, used: int, cost: float | None = None) -> None:
        report: dict[str, Any] = {"used": used, "size": 200_000}
        if cost is not None:
            report["cost"] = {"amount": cost, "currency": "USD"}
        self.report = self.usage.reported(report)

    def turn(self, *reports: tuple[int, float | None]) -> Spent | None:
        self.usage.begin_turn(self.report)
        for used, cost in reports:
            self.reported(used, cost)
        return self.usage.end_turn(self.report)


def spent(tokens: int, cost: float) -> Spent:
    return {"tokens": tokens, "cost": {"amount": pytest.approx(cost), "currency": "USD"}}


def two_turns() -> Chat:
    """A session with two turns of 1,000 tokens and $0.10 each."""
    chat = Chat()
    chat.ready("s1")
    chat.turn((1000, 0.1))
    chat.turn((2000, 0.2))
    return chat


@pytest.mark.parametrize(
    "reports",
    [
        # Both figures count from zero in the new process (the fake agents).
        pytest.param([(1000, 0.1)], id="from zero"),
        # Both count on (opencode's cost; Claude's since its SDK 0.3.277).
        pytest.param([(3000, 0.3)], id="counting on"),
        # The context it resumed, its cost from zero (Claude's adapter before).
        pytest.param([(3000, 0.1)], id="cost from zero"),
        # A report without a cost first: the cost is compared at its first report.
        pytest.param([(2500, None), (3000, 0.1)], id="cost later"),
    ],
)
def test_a_new_processs_first_turn_is_its_own_and_the_session_goes_on(
    reports: list[tuple[int, float | None]],
) -> None:
    chat = two_turns()
    chat.ready("s1", resumed=True)
    assert chat.turn(*reports) == spent(1000, 0.1)
    assert chat.usage.session == spent(3000, 0.3)
    assert chat.report["cost"]["amount"] == pytest.approx(0.3)  # the session's cost so far
    # Its next turn counts from its own report.
    used, last = reports[-1]
    assert chat.turn((used + 1000, (last or 0) + 0.1)) == spent(1000, 0.1)
    assert chat.report["cost"]["amount"] == pytest.approx(0.4)


def test_a_report_at_the_resume_is_what_the_turn_counts_from() -> None:
    """opencode reports the session as it resumed it before any turn."""
    chat = two_turns()
    chat.ready("s1", resumed=True)
    chat.reported(2000, 0.2)
    assert chat.turn((3000, 0.3)) == spent(1000, 0.1)


def test_a_session_left_before_its_new_process_reported_is_compared_when_back() -> None:
    """A branch picked in the new process, then the resumed one again (the process
    holds it: no resume): its first report is still the new process's first."""
    chat = two_turns()
    chat.ready("s1", resumed=True)
    chat.ready("s2")
    chat.turn((500, 0.05))
    chat.ready("s1")
    assert chat.turn((1000, 0.1)) == spent(1000, 0.1)
    assert chat.usage.session == spent(3000, 0.3)


def turn_end(usage: object) -> list[StoredBlock]:
    """A turn's blocks as the history keeps them, ``usage`` kept at its end."""
    data = msgspec.json.encode({"stop_reason": "end_turn", "usage": usage}).decode()
    return [StoredBlock(0, "m1", 1, "user", "hi"), StoredBlock(1, "t1", 1, "turn", "", data)]


def test_a_reopened_chat_goes_on_from_its_stored_report_and_sum() -> None:
    chat = two_turns()
    stored = turn_report(turn_end(chat.usage.summed(chat.report)))
    assert stored is not None
    reopened = Chat()
    reopened.usage.reopened("s1", stored)
    reopened.ready("s1", resumed=True)
    assert reopened.report == {"used": 2000, "size": 200_000, "cost": {"amount": 0.2, "currency": "USD"}}
    assert reopened.turn((3000, 0.3)) == spent(1000, 0.1)
    assert reopened.usage.session == spent(3000, 0.3)


@pytest.mark.parametrize(
    "usage", [None, {}, {"used": "many", "size": 1}, {"used": 1, "size": 2, "cost": {"amount": 1}}]
)
def test_a_stored_report_that_does_not_read_is_none(usage: object) -> None:
    assert turn_report(turn_end(usage)) is None
    assert turn_report(turn_end(usage)[:1]) is None  # no turn end


@pytest.mark.parametrize(
    ("amount", "said"),
    [(0.0, "0.00"), (0.5, "0.50"), (12.345, "12.35"), (0.01, "0.01"), (0.003, "0.003"),
     (0.0031, "0.0031"), (0.00314, "0.0031"), (0.00001, "0.00001"), (-0.003, "-0.003")],
)  # fmt: skip
def test_a_cost_under_a_cent_is_not_said_as_nothing(amount: float, said: str) -> None:
    assert view.money(amount) == said
