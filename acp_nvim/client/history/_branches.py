"""A stored chat's branches: which turns each holds, and what the chat shows.

Every block names the turn it belongs to (``StoredBlock.node``: the chat's turn
count when that turn began, 0 before the first turn); the chat's row holds its
branches (``chats.branches``, JSON written by :func:`encode`)::

    {"shown": 2, "branches": [[1, [[1, 3]], "s1"], [2, [[1, 1], [4, 4]], "s2"]]}

each branch its id, its turns as runs ``[first, last]`` of nodes in order, and the
agent's session its last turn ran in. What a chat shows is its shown branch's
turns in order, each turn's blocks in the order they were first drawn: what the
transcript showed (a rewind takes a turn out with all its blocks, a branch picked
again puts them back whole).

Rows kept before the layout had nodes (schema 1) get them from their order: each
prompt shown begins a turn; rows on another branch then are never shown, and such
a chat reopens with one branch (the one it showed).
"""

from __future__ import annotations

__all__ = ["StoredBranch", "branches_of", "encode", "in_view", "session_branch", "steered"]

import contextlib
from collections.abc import Sequence

import msgspec

from acp_nvim.client.history._store import SEQ_BITS, SHOWN, StoredBlock


class StoredBranch(msgspec.Struct):
    """A branch as kept: its ``id``, its turns' nodes in order, the session its last
    turn ran in."""

    id: int
    nodes: list[int]
    session_id: str | None = None


def encode(branches: Sequence[StoredBranch], shown: int) -> str:
    listed = [[b.id, _runs(b.nodes), b.session_id] for b in branches]
    return msgspec.json.encode({"shown": shown, "branches": listed}).decode()


def branches_of(
    kept: str | None, blocks: Sequence[StoredBlock]
) -> tuple[list[StoredBranch], StoredBranch]:
    """A stored chat's branches and the one shown. Fills in the ``node`` of
    rows kept without one (see the module doc). Without ``kept`` (a chat kept
    before branches were), or when it cannot be read: one branch, what was shown."""
    _number_old_rows(blocks)
    with contextlib.suppress(msgspec.DecodeError, TypeError, ValueError, KeyError, IndexError):
        if kept is not None:
            found = msgspec.json.decode(kept)
            listed = [
                StoredBranch(int(b[0]), _nodes(b[1]), b[2] if isinstance(b[2], str) else None)
                for b in found["branches"]
            ]
            shown = int(found["shown"])
            for branch in listed:
                if branch.id == shown:
                    return listed, branch
    nodes = dict.fromkeys(b.node for b in blocks if b.node)  # in order, each once
    only = StoredBranch(1, list(nodes))
    return [only], only


def in_view(branch: StoredBranch, blocks: Sequence[StoredBlock]) -> list[StoredBlock]:
    """The blocks ``branch`` shows, in the order of the transcript."""
    place = {0: -1} | {node: index for index, node in enumerate(branch.nodes)}
    shown = [b for b in blocks if b.node in place]
    return sorted(shown, key=lambda b: (place[b.node or 0], b.seq))


def session_branch(
    kept: str | None, blocks: Sequence[StoredBlock], session_id: str
) -> list[StoredBlock] | None:
    """The blocks of the branch whose last turn ran in ``session_id``, in the order
    of the transcript; None when no branch of the chat ran there."""
    branches, _ = branches_of(kept, blocks)
    branch = next((b for b in branches if b.session_id == session_id), None)
    return None if branch is None else in_view(branch, blocks)


def steered(blocks: Sequence[StoredBlock]) -> list[tuple[str, bool]]:
    """The user's messages of a branch's ``blocks`` (:func:`session_branch`), in order,
    each with whether it was steered into a turn (decision 0042: after its turn's
    prompt)."""
    messages: list[tuple[str, bool]] = []
    node: int | None = None
    for block in blocks:
        if block.kind == "user":
            messages.append((block.text, block.node == node))
            node = block.node
    return messages


def _number_old_rows(blocks: Sequence[StoredBlock]) -> None:
    """Give rows kept without a node theirs: a prompt shown begins a turn (its
    ``turn`` then changes: a message steered into a turn does not); the rows after it
    belong to it."""
    node = 0
    for block in blocks:
        if block.node is not None or block.branch != SHOWN:
            continue
        if block.kind == "user" and block.turn != node:
            node = block.turn
        block.node = node


def _runs(nodes: list[int]) -> list[list[int]]:
    """``[1, 2, 3, 7]`` as ``[[1, 3], [7, 7]]``."""
    runs: list[list[int]] = []
    for node in nodes:
        if runs and runs[-1][1] + 1 == node:
            runs[-1][1] = node
        else:
            runs.append([node, node])
    return runs


def _nodes(runs: list[list[int]]) -> list[int]:
    """The nodes of :func:`_runs`' runs. Raises ValueError for more than a chat holds."""
    if sum(int(last) - int(first) + 1 for first, last in runs) > 1 << SEQ_BITS:
        raise ValueError("more turns than blocks")
    return [node for first, last in runs for node in range(int(first), int(last) + 1)]
