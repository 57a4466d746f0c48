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

A session resumed by another agent process (a restart, a stored chat reopened) goes
on from its last report, but the new process may count from zero (Claude's adapter
did so for its cost while it reported the context it resumed; opencode counts on).
So the new process's first figures are compared with the last ones before it, each
on its own: one below counts from zero (the turn used all of it, and a cost counts
on from the cost before, the session's), else it counts on (:meth:`Usage.reported`).
"""

from __future__ import annotations

__all__ = ["Usage"]

from typing import Any

import msgspec

from acp_nvim.client.editor import Spent, TurnTokens


class _Count(msgspec.Struct, eq=False):
    """One session's count: what its turns used, what they count from while it has no
    report of its own (nothing, or a fork's context: tokens only), and, for the
    process that holds it now, the cost before it that its cost reports count on
    from (``base``) and the figures of an earlier process's last report not yet
    compared with one of its own (``carried``)."""

    spent: Spent | None = None
    start: dict[str, Any] = msgspec.field(default_factory=dict)
    base: dict[str, Any] | None = None
    carried: dict[str, Any] = msgspec.field(default_factory=dict)


class Usage:
    """What a chat's last turn and its current session's turns used; the other
    sessions' last reports and counts, kept for when the chat goes back to them. The
    reports themselves are the session model's (``Session.usage``)."""

    def __init__(self) -> None:
        self.turn: Spent | None = None  # what the last turn used
        self.turn_tokens: TurnTokens | None = None  # the last turn's, as the agent counts them
        self._counted: TurnTokens | None = None  # the running turn's
        self._before: dict[str, Any] = {}  # the report when the turn began
        self._session_id: str | None = None
        self._count = _Count()
        self._kept: dict[str, tuple[dict[str, Any], _Count]] = {}

    @property
    def session(self) -> Spent | None:
        """What the current session's turns used."""
        return self._count.spent

    def switch(
        self, session_id: str, report: dict[str, Any], *, resumed: bool = False,
        created: bool = False,
    ) -> dict[str, Any]:
        """The chat goes on in ``session_id``, ``report`` the last of the session it
        was in: the last report of ``session_id`` (none for a new session).
        ``resumed``: by a process that did not hold it, whose reports may count from
        zero (see :meth:`reported`). ``created``: the agent has just made it, though
        an agent started again may hand out an id seen before (decision 0078)."""
        if session_id != self._session_id or created:
            if self._session_id is not None:
                self._kept[self._session_id] = (report, self._count)
                report = {}
            if created:
                self._kept.pop(session_id, None)
            report, self._count = self._kept.pop(session_id, (report, _Count()))
            self._session_id = session_id
        if resumed:
            self._count.base = None
            self._count.carried = {k: report[k] for k in ("used", "cost") if k in report}
        return report

    def reopened(
        self, session_id: str, stored: dict[str, Any], *, shown: bool = False
    ) -> dict[str, Any]:
        """A stored chat reopened goes on in ``session_id``, whose last turn ended with
        ``stored``: the report and what the session's turns used, as :meth:`summed`
        kept them, and what that turn used. ``shown``: the turn the chat shows last;
        the chat is in its session, what it used is the last turn's (:meth:`status`,
        as before the chat closed), and its report is returned (the session
        model's; else nothing)."""
        report = {k: v for k, v in stored.items() if k not in ("session", "turn", "turn_tokens")}
        count = _Count(spent=stored.get("session"))
        if not shown:
            self._kept[session_id] = (report, count)
            return {}
        self._kept.pop(session_id, None)
        self._session_id, self._count = session_id, count
        self.turn, self.turn_tokens = stored.get("turn"), stored.get("turn_tokens")
        return report

    def forked(self, parent: dict[str, Any] | None) -> None:
        """The session just begun is a fork at a message, ``parent`` the report of the
        parent's session when that message was its last (None: not known). Its context
        is the parent's there: its first turn's tokens are its growth from there."""
        if parent is not None and "used" in parent:
            self._count.start = {"used": parent["used"]}

    def reported(self, report: dict[str, Any]) -> dict[str, Any]:
        """The agent's ``report`` as the chat keeps and shows it: its cost counted on
        from the cost before where the process counts from zero. The first figures of a
        process that resumed the session are compared with the last ones before it."""
        count, carried = self._count, self._count.carried
        if "used" in carried and report["used"] < carried.pop("used"):
            self._before = {**self._before, "used": 0}  # the turn's context: all its own
        cost = report.get("cost")
        if "cost" in carried and cost is not None:
            before = carried.pop("cost")
            again = before["currency"] == cost["currency"] and cost["amount"] < before["amount"]
            count.base = before if again else None
        if count.base is None or cost is None or cost["currency"] != count.base["currency"]:
            return report
        return {**report, "cost": {**cost, "amount": count.base["amount"] + cost["amount"]}}

    def begin_turn(self, report: dict[str, Any]) -> None:
        self._before = report or self._count.start
        self._counted = None

    def counted(self, tokens: TurnTokens) -> None:
        """The agent's own count of the turn ending (its answer to the prompt)."""
        self._counted = tokens

    def end_turn(self, report: dict[str, Any]) -> Spent | None:
        """What the turn ending used, ``report`` the session's last; None when the
        agent reports none. Added to the session's sum. The agent's own count of it, if
        it gave one, becomes ``turn_tokens`` (never summed: agents count it their own
        way, decision 0042)."""
        self.turn_tokens, self._counted = self._counted, None
        spent = spent_between(self._before, report)
        if spent is not None:
            self.turn = spent
            self._count.spent = spent_sum(self._count.spent, spent)
        return spent

    def summed(self, report: dict[str, Any]) -> dict[str, Any]:
        """``report`` with what the session's turns used (``session``), as a turn's end
        keeps it in the history."""
        return report if self.session is None else {**report, "session": self.session}

    def status(self, report: dict[str, Any]) -> dict[str, Any]:
        """The status field ``usage``: the agent's ``report``, with what the last turn
        and the session's turns used (where known)."""
        usage = dict(report)
        if self.turn is not None:
            usage["turn"] = self.turn
        if self.turn_tokens is not None:
            usage["turn_tokens"] = self.turn_tokens
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
