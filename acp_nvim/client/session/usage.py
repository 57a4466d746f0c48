"""What a chat's turns use, from the agent's usage reports (|acp-usage|).

An agent reports the context its session holds and the session's cost so far
(``usage_update``). A turn's use is the difference of the reports around it, so
each session is measured against its own reports: a chat that moves to another
session (a rewind, a seed, a fork, a branch picked back) starts a new one from
zero, and an earlier one from its own last report, never from another session's.
A session forked at a message holds the parent's context up to there: its tokens
are measured from the parent's report at that point (:meth:`Usage.forked`); its
cost is the agent's report as it stands (no agent is known to say whether a fork's
cost includes the parent's).
"""

from __future__ import annotations

__all__ = ["Usage"]

from typing import Any

from acp_nvim.client.editor import Spent


class Usage:
    """What a chat's last turn and its current session's turns used; the other
    sessions' last reports and sums, kept for when the chat goes back to them. The
    reports themselves are the session model's (``Session.usage``)."""

    def __init__(self) -> None:
        self.turn: Spent | None = None  # what the last turn used
        self.session: Spent | None = None  # what the current session's turns used
        self._before: dict[str, Any] = {}  # the report when the turn began
        self._session_id: str | None = None
        # What the current session's turns count from while it has no report of its
        # own: nothing, or a fork's context (tokens only).
        self._start: dict[str, Any] = {}
        self._kept: dict[str, tuple[dict[str, Any], Spent | None, dict[str, Any]]] = {}

    def switch(self, session_id: str, report: dict[str, Any]) -> dict[str, Any]:
        """The chat goes on in ``session_id``, ``report`` the last of the session it
        was in: the last report of ``session_id`` (none for a new session)."""
        if session_id == self._session_id:
            return report
        if self._session_id is not None:
            self._kept[self._session_id] = (report, self.session, self._start)
            report = {}
        report, self.session, self._start = self._kept.pop(session_id, (report, None, {}))
        self._session_id = session_id
        return report

    def forked(self, parent: dict[str, Any] | None) -> None:
        """The session just begun is a fork at a message, ``parent`` the report of the
        parent's session when that message was its last (None: not known). Its context
        is the parent's there: its first turn's tokens are its growth from there."""
        if parent is not None and "used" in parent:
            self._start = {"used": parent["used"]}

    def begin_turn(self, report: dict[str, Any]) -> None:
        self._before = report or self._start

    def end_turn(self, report: dict[str, Any]) -> Spent | None:
        """What the turn ending used, ``report`` the session's last; None when the
        agent reports none. Added to the session's sum."""
        spent = spent_between(self._before, report)
        if spent is not None:
            self.turn = spent
            self.session = spent_sum(self.session, spent)
        return spent

    def status(self, report: dict[str, Any]) -> dict[str, Any]:
        """The status field ``usage``: the agent's ``report``, with what the last turn
        and the session's turns used (where known)."""
        usage = dict(report)
        if self.turn is not None:
            usage["turn"] = self.turn
        if self.session is not None:
            usage["session"] = self.session
        return usage


def spent_between(before: dict[str, Any], after: dict[str, Any]) -> Spent | None:
    """What was used between two usage reports (the growth of the context, the
    cost's rise); None when the later one reports no tokens."""
    if "used" not in after:
        return None
    spent: Spent = {"tokens": after["used"] - before.get("used", 0)}
    cost = after.get("cost")
    if cost is not None:
        earlier = before.get("cost") or {}
        same = earlier.get("currency") == cost["currency"]
        start = earlier.get("amount", 0.0) if same else 0.0
        spent["cost"] = {"amount": cost["amount"] - start, "currency": cost["currency"]}
    return spent


def spent_sum(total: Spent | None, spent: Spent) -> Spent:
    """``total`` (None: nothing yet) with ``spent`` added."""
    base: Spent = total if total is not None else {"tokens": 0}
    summed: Spent = {**base, "tokens": base["tokens"] + spent["tokens"]}
    if "cost" in spent:
        amount = (base.get("cost") or {}).get("amount", 0.0) + spent["cost"]["amount"]
        summed["cost"] = {"amount": amount, "currency": spent["cost"]["currency"]}
    return summed
