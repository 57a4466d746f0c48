"""What ``nvim.batcher._soon``, the one use of pynvim's privates, relies on.

``Nvim.async_call`` formats the caller's stack on every call (~120 µs, one call per
streamed read); ``_soon`` does the rest of what it does through
``Nvim._session.threadsafe_call``. These tests fail when a pynvim release changes
that path: then ``_soon`` must follow it, or go back to ``async_call``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

import greenlet
import pynvim
import pytest
from pynvim.msgpack_rpc.session import Session

from acp_nvim.nvim.batcher import _soon


class Loop:
    """Stands for pynvim's AsyncSession: of it, a Session's threadsafe_call uses
    only ``threadsafe_call``, which hands the function to the pynvim thread."""

    def __init__(self) -> None:
        self.queued: list[Callable[[], None]] = []

    def threadsafe_call(self, fn: Callable[[], None]) -> None:
        self.queued.append(fn)


def nvim_on(loop: Loop) -> pynvim.Nvim:
    return pynvim.Nvim(Session(loop), 1, {}, {})  # type: ignore[arg-type]


def test_async_call_goes_the_way_soon_does() -> None:
    assert "self._session.threadsafe_call(" in inspect.getsource(pynvim.Nvim.async_call)


def test_soon_runs_on_the_pynvim_thread_in_a_greenlet_of_its_own() -> None:
    loop = Loop()
    in_child_greenlet: list[bool] = []
    _soon(nvim_on(loop), lambda: in_child_greenlet.append(greenlet.getcurrent().parent is not None))
    assert in_child_greenlet == []  # handed over, not run here
    [run] = loop.queued
    run()
    # A child greenlet: a request made in it waits for its answer by switching to
    # the parent (Session.request), instead of blocking pynvim's loop.
    assert in_child_greenlet == [True]


def test_soon_logs_what_fails(caplog: pytest.LogCaptureFixture) -> None:
    loop = Loop()

    def broken() -> None:
        raise RuntimeError("boom")

    _soon(nvim_on(loop), broken)
    with caplog.at_level(logging.ERROR, logger="acp_nvim"):
        loop.queued[0]()
    assert "a call on the pynvim thread failed" in caplog.text
    assert "boom" in caplog.text
