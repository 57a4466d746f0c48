"""The handler object behind both entries, and the stdio entry itself.

Lua talks to us with ``rpcnotify(chan, "acp", method, params)`` for commands
(they return at once; the work runs on the worker loop), and with the command
``ask`` for the few answers read from thread-safe state: Lua waits for those a
bounded time (``acp.host.request``), as a stopped process would answer no
``rpcrequest`` and freeze Neovim. We talk back through :class:`NvimEditor`'s
batched ``exec_lua``, and answer an ``ask`` at once, outside the batches.
"""

from __future__ import annotations

__all__ = ["BUFFER_EVENTS", "Host", "run_stdio"]

import atexit
import gc
import importlib
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio.abc
import pynvim

from acp_nvim.client import malloc
from acp_nvim.client.agent import first
from acp_nvim.client.agent.groups import kill_all
from acp_nvim.client.app import App
from acp_nvim.client.history import StoreError
from acp_nvim.client.services.terminal_keys import keys_from
from acp_nvim.nvim.editor import NvimEditor
from acp_nvim.nvim.terminal_groups import TerminalGroups
from acp_nvim.nvim.worker import Worker

log = logging.getLogger("acp_nvim")

# Neovim's notifications for the buffers the agent reads (acp_nvim/nvim/mirror.py).
BUFFER_EVENTS = ("nvim_buf_lines_event", "nvim_buf_changedtick_event", "nvim_buf_detach_event")
# An answer to acp.host.request: its reply handler only keeps it (never in a batch,
# which the command-line window holds back).
_REPLY = "require('acp.host').handlers.reply(...)"
# Lua's requests that read the history file (Host._ask).
_READS = ("history", "export")


class Host:
    """Receives Lua's calls; owns the worker thread and the App on it."""

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim = nvim
        self.editor = NvimEditor(nvim)
        self.app: App | None = None
        self.worker = Worker(self._main)
        self.terminal_groups = TerminalGroups()
        self._started = False
        # Lua's reads of the history, for the thread answering them (:meth:`_ask`).
        self._reads: queue.SimpleQueue[Callable[[], None]] | None = None
        atexit.register(kill_all)

    def __repr__(self) -> str:
        return f"<Host {self.app!r}>"

    async def _main(self, tasks: anyio.abc.TaskGroup) -> None:
        self.app = App(self.editor, tasks)
        tasks.start_soon(_end_first_agent_unclaimed)

    def _ensure_started(self) -> App:
        if not self._started:
            self.worker.start()
            self._started = True
        assert self.app is not None
        return self.app

    # -- from Lua --------------------------------------------------------------

    def on_notification(self, name: str, args: list[Any]) -> None:
        if name in BUFFER_EVENTS and args:
            self.editor.buffer_event(name, args)
            return
        if name != "acp" or not args:
            return
        method, params = args[0], (args[1] if len(args) > 1 else {})
        app = self._ensure_started()
        params = params if isinstance(params, dict) else {}
        match method:
            case "setup":
                keys_from(params.get("terminal_keys_from") or 1)
                options, state = params.get("options"), params.get("state")
                self.worker.call(app.setup, options, state, params.get("nvim_dirs") or ())
            case "open":
                cwd = params.get("cwd") or os.getcwd()
                resume, fork = params.get("session_id"), params.get("fork")
                agent, history = params.get("agent"), params.get("history")
                handoff = params.get("handoff")
                self.worker.submit(
                    partial(
                        app.open,
                        cwd_given=bool(params.get("cwd_given")),
                        roots=params.get("roots") or [],
                        worktree=bool(params.get("worktree")),
                        within=params.get("within"),
                    ),
                    params["chat"],
                    agent,
                    cwd,
                    resume,
                    fork,
                    history,
                    handoff,
                )
            case "send":
                context = params.get("context") or []
                rewind, now = params.get("rewind"), bool(params.get("now"))
                chat, text = params["chat"], params["text"]
                starting = bool(params.get("starting"))
                # Its way to the agent is the latency a user feels (decision 0067).
                self.worker.post(app.send, chat, text, context, rewind, now, starting)
            case "cancel":
                self.worker.submit(app.cancel, params["chat"])
            case "buffer_changed":
                self.worker.submit(app.buffer_changed, params["path"])
            case "restore":
                self.worker.submit(app.restore, params["chat"], params.get("turn"))
            case "rewind":
                self.worker.submit(app.rewind, params["chat"], params.get("turn"))
            case "branch":
                self.worker.submit(app.pick_branch, params["chat"], params["branch"])
            case "edit":
                self.worker.call(app.edit, params["chat"], params.get("turn"))
            case "regenerate":
                self.worker.submit(app.regenerate, params["chat"])
            case "restart":
                self.worker.submit(app.restart, params["chat"])
            case "dequeue":
                chat, index, text = params["chat"], params["index"], params["text"]
                if params.get("now"):
                    self.worker.submit(app.send_queued, chat, index, text)
                else:
                    self.worker.call(app.dequeue, chat, index, text, bool(params.get("edit")))
            case "answer":
                chat, request, option = params["chat"], params["request"], params["option"]
                self.worker.submit(app.answer, chat, request, option, params.get("reason"))
            case "elicit":
                self.worker.call(
                    app.elicit,
                    params["chat"],
                    params["request"],
                    params["action"],
                    params.get("content") or None,
                )
            case "review":
                self.worker.submit(
                    app.review,
                    params["chat"],
                    params["decision"],
                    params.get("path"),
                    params.get("hunk"),
                    params.get("turn"),
                    params.get("reason"),
                )
            case "baseline":
                self.worker.call(app.baseline, params["chat"], params["path"], params.get("turn"))
            case "close":
                # Handed to the history's writer before Neovim's next message is read:
                # a search asked next, answered here, reads the chat's last changes.
                self.worker.call(app.closing, params["chat"])
                keep, looked = params.get("keep_worktree"), bool(params.get("modes_looked"))
                self.worker.submit(app.close, params["chat"], keep, looked)
            case "root":
                self.worker.call(app.root, params["chat"], params["action"], params["path"])
            case "list_sessions":
                self.worker.submit(app.list_sessions, params["chat"], params.get("quiet", False))
            case "delete_session":
                self.worker.submit(app.delete_session, params["chat"], params["session_id"])
            case "set_mode" | "set_model":
                category = method.removeprefix("set_")
                self.worker.submit(app.set_category, params["chat"], category, params["value"])
            case "set_config":
                self.worker.submit(app.set_config, params["chat"], params["id"], params["value"])
            case "login":
                values = params.get("values") or None
                self.worker.submit(app.login, params["chat"], params.get("method"), values)
            case "logout":
                self.worker.submit(app.logout, params["chat"])
            case "terminal_started":
                key, pid, nvim_pid = params["key"], params["pid"], params["nvim_pid"]
                self.worker.call(self.terminal_groups.started, key, pid, nvim_pid)
            case "terminal_output":
                chunks = params.get("chunks") or []
                if ended := [str(c["key"]) for c in chunks if c.get("exit") is not None]:
                    self.worker.call(self.terminal_groups.exited, ended)
                self.worker.call(app.terminal_output, chunks)
            case "lsp_answer":
                self.worker.call(self.editor.lsp_answer, params)
            case "cmdwin_closed":
                self.worker.call(self.editor.cmdwin_closed)
            case "buffers_changed":
                self.worker.submit(app.buffers_changed)
            case "export":  # :AcpExport: answered with a reply item (App.export)
                chat, history = params.get("chat"), params.get("history")
                self.worker.submit(app.export, params["token"], chat, history)
            case "history_forget":
                self.worker.call(app.history.forget, params["id"])
            case "history_rename":
                self.worker.call(app.history.rename, params["id"], params.get("name"))
            case "rename":
                self.worker.call(app.history.rename_chat, params["chat"], params.get("name"))
            case "ask":
                self._ask(params["token"], params["method"], params.get("params") or {})
            case "shutdown":
                self.shutdown()
            case _:
                log.warning("unknown method from Lua: %s", method)

    def _ask(self, token: int, method: str, params: dict[str, Any]) -> None:
        """Answer Lua's request ``token`` (acp.host.request, waiting) now, not queued
        behind the batches: an error is its message. A read of the history (a
        search, an export) is answered on a thread of its own: the file's first open
        after an upgrade re-indexes it (seconds for a large one), which held every
        other message of Neovim's, and every chat's stream to it, as long (decision
        0104). Not the work waiting in a worktree, which a chat's close asks about: git
        looks for changed execute bits (up to its time limit), so the worker's loop
        answers, with a reply item, and this thread goes on sending."""
        if method == "worktree_work":  # closing a worktree chat asks about it first
            workspaces = self._ensure_started().workspaces
            self.worker.submit(workspaces.answer_work, token, params["chat"])
            return
        if method not in _READS:
            self._reply(token, method, params)
            return
        if self._reads is None:
            self._reads = queue.SimpleQueue()
            threading.Thread(
                target=_serve, args=(self._reads,), name="acp-history-read", daemon=True
            ).start()
        self._reads.put(partial(self._reply, token, method, params, on_nvim=self.nvim.async_call))

    def _reply(
        self,
        token: int,
        method: str,
        params: dict[str, Any],
        on_nvim: Callable[..., None] | None = None,
    ) -> None:
        """:meth:`_ask`'s answer, sent through ``on_nvim`` from another thread."""
        result, error = None, None
        try:
            result = self._answer(method, params)
        except ValueError as err:
            error = str(err)
        except Exception as err:
            log.exception("answering %s", method)
            error = f"the Python side failed answering {method}: {err}"
        reply = {"kind": "reply", "token": token, "result": result, "error": error}
        if on_nvim is None:
            self.nvim.exec_lua(_REPLY, reply, async_=True)
        else:
            on_nvim(self.nvim.exec_lua, _REPLY, reply, async_=True)

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        app = self._ensure_started()
        match method:
            case "log":
                return app.log.lines()
            case "ping":
                return "pong"
            case "mcp":
                return self.worker.call(app.mcp_status)
            case "history":
                # Read on the thread answering searches (_ask): never waiting for the worker.
                search = app.history.reader.search
                query, agent, cwd = params.get("query"), params.get("agent"), params.get("cwd")
                limit = params.get("limit")
                return self._history(search, query, agent, cwd, 50 if limit is None else limit)
            case "choices":  # a setting's choices, left out of its status entry
                return self.worker.call(app.choices, params["chat"], params["id"])
            case "restorable":  # :AcpRestore's completion
                return self.worker.call(app.restorable, params["chat"])
            case "permissions":  # :AcpPermission list|forget
                return self.worker.call(app.grants.request, params.get("forget"))
            case "export":  # acp.export() without on_done: Lua waits, the loop goes on
                chat, history = params.get("chat"), params.get("history")
                return self._history(self.worker.wait, app.history.markdown, chat, history)
            case other:
                raise ValueError(f"unknown request acp/{other}")

    @staticmethod
    def _history(read: Callable[..., Any], *args: Any) -> Any:
        """A read of the history file; its failure becomes the error Lua shows."""
        try:
            return read(*args)
        except StoreError as err:
            raise ValueError(f"history: {err}") from None

    def shutdown(self) -> None:
        """End every agent and the worker (Neovim is closing or the channel went away)."""
        if self._started and self.app is not None:
            self.worker.stop(self.app.shutdown)
        kill_all()


def _serve(calls: queue.SimpleQueue[Callable[[], None]]) -> None:
    """Make ``calls`` one after another, on this thread (one connection to the file)."""
    while True:
        call = calls.get()
        try:
            call()
        except Exception:  # the next read is still answered
            log.exception("answering a read of the history")


def _no_request(name: str, args: list[Any]) -> Any:
    raise ValueError(f"unknown request {name}: Lua asks with the notification acp/ask")


async def _end_first_agent_unclaimed() -> None:
    """The first agent (client/agent/first.py) ends when no chat took it in time."""
    await anyio.sleep(first.CLAIM_SECONDS)
    first.end()


def run_stdio() -> None:
    """Entry for ``python -m acp_nvim``: serve the Neovim that started us on stdio."""
    logging.basicConfig(
        level=os.environ.get("ACP_NVIM_LOG_LEVEL", "WARNING"),
        stream=sys.stderr,
        format="acp_nvim %(levelname)s %(name)s: %(message)s",
    )
    # Neovim killing us (or a terminal hang-up) must still end the agents.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(0))
    # How long a thread waiting for the GIL lets another run Python first: 5 ms by
    # default, which the event loop waited per wake-up while a turn start scanned
    # a tree in a worker thread. Our own process, so ours to set.
    sys.setswitchinterval(0.001)
    malloc.set_up()
    nvim = pynvim.attach("stdio")
    host = Host(nvim)
    if first.waiting():
        # The first chat's agent is starting: its modules are imported now, as they
        # would be when its chat opens, but with the others (collector off, frozen).
        # Without an agent starting they wait for the chat: its agent spawns first.
        for module in ("acp_nvim.client.agent.connection", "acp_nvim.client.session.chat"):
            importlib.import_module(module)
    # The modules' own objects (some 30,000 functions, classes and their dicts) never
    # become garbage: frozen, a full collection walks only what the chats made. It
    # walked them all whenever a burst of objects (a plan of 10k entries) set it off:
    # 10-20 ms on the worker loop (issue 29.7).
    gc.freeze()
    gc.enable()
    try:
        nvim.run_loop(_no_request, host.on_notification)
    finally:
        host.shutdown()
