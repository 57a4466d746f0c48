"""The worker thread's loop, as the pynvim thread hands it work (acp_nvim/nvim/worker.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import anyio
import anyio.abc
import pytest

from acp_nvim.nvim.worker import Worker


async def _nothing(tasks: anyio.abc.TaskGroup) -> None:
    pass


@pytest.fixture
def worker() -> Iterator[Worker]:
    running = Worker(_nothing)
    running.start()
    yield running
    running.stop()


def test_submitted_tasks_run_in_order_and_a_failure_is_only_logged(
    worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    done = threading.Event()

    async def job(n: int) -> None:
        ran.append(n)

    async def fails() -> None:
        raise ValueError("broken")

    async def last() -> None:
        done.set()

    with caplog.at_level(logging.ERROR, logger="acp_nvim"):
        for n in range(20):
            worker.submit(job, n)
        worker.submit(fails)
        worker.submit(last)
        assert done.wait(5)
    assert ran == list(range(20))
    assert "task fails failed" in caplog.text
    assert worker.call(len, ran) == 20  # the loop goes on


def test_posted_tasks_run_in_order_with_the_submitted_ones(
    worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """post() returns before the loop takes the task; the loop still runs them in the
    order they came, and a failure is only logged."""
    ran: list[str] = []
    done = threading.Event()

    async def job(name: str) -> None:
        ran.append(name)

    async def fails() -> None:
        raise ValueError("broken")

    async def last() -> None:
        done.set()

    with caplog.at_level(logging.ERROR, logger="acp_nvim"):
        for n in range(10):
            worker.post(job, f"posted {n}")
            worker.submit(job, f"submitted {n}")
        worker.post(fails)
        worker.post(last)
        assert done.wait(5)
    assert ran == [f"{how} {n}" for n in range(10) for how in ("posted", "submitted")]
    assert "task fails failed" in caplog.text
