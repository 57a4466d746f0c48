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


def test_tasks_run_in_the_order_they_came_and_a_failure_is_only_logged(
    worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """Submitted or posted (post() returns before the loop takes the task), tasks
    run in the order they came; a failure is logged and the loop goes on."""
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
        worker.submit(last)
        assert done.wait(5)
    assert ran == [f"{how} {n}" for n in range(10) for how in ("posted", "submitted")]
    assert "task fails failed" in caplog.text
    assert worker.call(len, ran) == 20  # the loop goes on
