"""Permission requests: policy, remembered answers, prompts, cancel — with the fake Editor."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from acp_nvim.client.agent.v1 import SessionsV1
from acp_nvim.client.app import App
from acp_nvim.client.services.permissions import Permissions, assign_keys
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import PermissionOption, ToolCallPatch
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.protocol import Connection
from acp_nvim.protocol import schema_v1 as v1
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

pytestmark = pytest.mark.anyio

# Option ids as real agents name them (gemini); the client must go by kind.
GEMINI = [
    ("proceed_always", "Always allow", "allow_always"),
    ("proceed_once", "Allow", "allow_once"),
    ("cancel", "Reject", "reject_once"),
]
FULL = [*GEMINI, ("never", "Never", "reject_always")]
NO_KINDS = [("allow", "Allow", None), ("reject", "Reject", None)]  # older Claude adapter


def options(spec: list[tuple[str, str, str | None]]) -> list[PermissionOption]:
    return [PermissionOption(option_id, name, kind) for option_id, name, kind in spec]


def new_chat(editor: RecordingEditor, chat_id: int = 1) -> Chat:
    chat = Chat(chat_id, "fake", editor)
    chat.ready(f"s{chat_id}", 1, None)
    return chat


async def outcome(
    perms: Permissions,
    chat: Chat,
    tool_kind: str,
    spec: list[tuple[str, str, str | None]],
    call_id: str = "c1",
) -> str | None:
    """The option the client answers with by itself, or "ask" when it asks the user."""
    result: dict[str, str | None] = {}

    async def run() -> None:
        result["id"] = await perms.ask(chat, ToolCallPatch(call_id, kind=tool_kind), options(spec))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await wait_for(lambda: "id" in result or bool(perms.pending(chat)))
        if "id" not in result:
            tasks.cancel_scope.cancel()
            return "ask"
    return result["id"]


@pytest.mark.parametrize(
    ("policy", "tool_kind", "spec", "expected"),
    [
        ("ask", "read", GEMINI, "ask"),
        ("ask", "edit", GEMINI, "ask"),
        ("allow_reads", "read", GEMINI, "proceed_once"),
        ("allow_reads", "search", GEMINI, "proceed_once"),
        ("allow_reads", "think", GEMINI, "proceed_once"),
        ("allow_reads", "fetch", GEMINI, "ask"),
        ("allow_reads", "edit", GEMINI, "ask"),
        ("allow_reads", "execute", GEMINI, "ask"),
        ("allow_reads", "other", GEMINI, "ask"),
        ("allow_all", "edit", GEMINI, "proceed_once"),
        ("allow_all", "other", GEMINI, "proceed_once"),
        ("allow_all", "execute", [("always", "Always", "allow_always")], "always"),
        # No kind, an unknown kind, or nothing that allows: never approved unasked.
        ("allow_all", "edit", NO_KINDS, "ask"),
        ("allow_all", "edit", [("ok", "OK", "allow_session"), ("no", "No", "reject_once")], "ask"),
        ("allow_all", "edit", [("no", "No", "reject_once")], "ask"),
        ("allow_reads", "read", NO_KINDS, "ask"),
    ],
)
async def test_policy(policy: Any, tool_kind: str, spec: Any, expected: str) -> None:
    chat = new_chat(RecordingEditor())
    assert await outcome(Permissions(policy), chat, tool_kind, spec) == expected


async def test_always_is_remembered_per_tool_kind_chat_and_project() -> None:
    editor = RecordingEditor()
    chat, other_chat = new_chat(editor, 1), new_chat(editor, 2)
    other_chat.workspace = Workspace("/another/project")
    perms = Permissions()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, ToolCallPatch("c1", kind="edit"), options(FULL))
        await wait_for(lambda: bool(perms.pending(chat)))
        assert perms.answer(perms.pending(chat)[0], "proceed_always")
    # The next edit of this chat is answered without asking, with the option of that kind...
    assert await outcome(perms, chat, "edit", FULL, "c2") == "proceed_always"
    # ... or its one-time sibling when "always" is not offered.
    assert await outcome(perms, chat, "edit", [("ok", "OK", "allow_once")], "c3") == "ok"
    # Options without kinds: the policy cannot decide.
    assert await outcome(perms, chat, "edit", NO_KINDS, "c4") == "ask"
    assert await outcome(perms, chat, "execute", FULL, "c5") == "ask"
    assert await outcome(perms, other_chat, "edit", FULL, "c6") == "ask"
    assert editor.transcript(1)["c2"][-1] == (
        "**Permission:** Always allow (remembered for `edit` in this project)"
    )
    perms.cancel(chat)  # the chat closed: its project still remembers
    assert await outcome(perms, chat, "edit", FULL, "c7") == "proceed_always"
    # :AcpPermission forget: at once, for the chat that answered too.
    assert perms.grants.forget(chat.workspace.cwd, "fake", "edit")
    assert await outcome(perms, chat, "edit", FULL, "c8") == "ask"


async def test_reject_always_is_remembered_and_beats_the_policy() -> None:
    chat = new_chat(RecordingEditor())
    perms = Permissions("allow_all")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, ToolCallPatch("c1", kind="execute"), options(NO_KINDS))
        await wait_for(lambda: bool(perms.pending(chat)))
        # An answer the client does not know is not taken, the prompt stays.
        assert not perms.answer(perms.pending(chat)[0], "proceed_once")
        assert not perms.answer("permission99", "allow")
        assert perms.answer(perms.pending(chat)[0], "reject")
    # A kind-less answer is not remembered; the policy decides the next one.
    assert await outcome(perms, chat, "execute", FULL, "c2") == "proceed_once"
    perms.policy = "ask"
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, ToolCallPatch("c3", kind="execute"), options(FULL))
        await wait_for(lambda: bool(perms.pending(chat)))
        assert perms.answer(perms.pending(chat)[0], "never")
    perms.policy = "allow_all"
    assert await outcome(perms, chat, "execute", FULL, "c4") == "never"
    assert await outcome(perms, chat, "execute", GEMINI, "c5") == "cancel"


async def test_always_for_kind_other_is_not_remembered() -> None:
    chat = new_chat(RecordingEditor())
    perms = Permissions()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, ToolCallPatch("c1", kind="other"), options(FULL))
        await wait_for(lambda: bool(perms.pending(chat)))
        assert perms.answer(perms.pending(chat)[0], "proceed_always")
    assert await outcome(perms, chat, "other", FULL, "c2") == "ask"


async def test_upsert_creates_the_call_and_shows_the_prompt_with_keys() -> None:
    editor = RecordingEditor()
    chat = new_chat(editor)
    perms = Permissions()
    patch = ToolCallPatch("edit-1", title="Edit main.py", kind="edit")
    result: list[str | None] = []

    async def run() -> None:
        result.append(await perms.ask(chat, patch, options(GEMINI)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await wait_for(lambda: bool(perms.pending(chat)))
        assert chat.session.tool_calls["edit-1"].title == "Edit main.py"
        assert editor.transcript(1)["edit-1"] == [
            "#### Edit main.py",
            "`edit` · pending",
            "**Permission needed:** press a key, or `<CR>` for a menu",
            "- `A` Always allow",
            "- `a` Allow",
            "- `r` Reject",
            "- `s` Reject, and say why",
        ]
        op = editor.ops[1][-1]
        assert op["permission"]["pending"] is True
        assert op["permission"]["row"] == 2
        assert [(o["key"], o["id"], o["row"]) for o in op["permission"]["options"]] == [
            ("A", "proceed_always", 3),
            ("a", "proceed_once", 4),
            ("r", "cancel", 5),
        ]
        # "?" rejects with the reject option, and Lua asks why.
        assert op["permission"]["why"] == {"key": "s", "option": "cancel", "row": 6}
        perms.answer(perms.pending(chat)[0], "cancel")
    assert result == ["cancel"]
    assert editor.transcript(1)["edit-1"][-1] == "**Permission:** Reject"


async def test_the_requests_own_question_is_shown_above_the_options() -> None:
    editor = RecordingEditor()
    chat = new_chat(editor)
    perms = Permissions()
    async with anyio.create_task_group() as tasks:
        patch = ToolCallPatch("c1", title="Edit a.txt", kind="edit")
        tasks.start_soon(
            perms.ask, chat, patch, options(GEMINI), "Overwrite a.txt?\nIt has local changes."
        )
        await wait_for(lambda: bool(perms.pending(chat)))
        lines = editor.transcript(1)["c1"]
        assert lines[2:5] == [
            "Overwrite a.txt?",
            "It has local changes.",
            "**Permission needed:** press a key, or `<CR>` for a menu",
        ]
        assert editor.ops[1][-1]["permission"]["row"] == 4
        perms.answer(perms.pending(chat)[0], "cancel")
    assert editor.transcript(1)["c1"][0] == "#### Edit a.txt"  # the call keeps its own title


async def test_cancel_answers_cancelled_and_a_withdrawn_request_disappears() -> None:
    editor = RecordingEditor()
    chat = new_chat(editor)
    perms = Permissions()
    result: list[str | None] = []

    async def run(call_id: str) -> None:
        result.append(await perms.ask(chat, ToolCallPatch(call_id, kind="edit"), options(GEMINI)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run, "c1")
        await wait_for(lambda: bool(perms.pending(chat)))
        perms.cancel(chat)
    assert result == [None]
    assert editor.transcript(1)["c1"][-1] == "**Permission:** cancelled"

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run, "c2")
        await wait_for(lambda: bool(perms.pending(chat)))
        tasks.cancel_scope.cancel()  # the agent died, or sent $/cancel_request
    assert perms.pending(chat) == []
    assert editor.transcript(1)["c2"] == ["#### edit", "`edit` · pending"]
    assert "permission" not in editor.ops[1][-1]


@pytest.mark.parametrize(
    ("kinds", "keys"),
    [
        (["allow_once", "allow_always", "reject_once", "reject_always"], ["a", "A", "r", "R"]),
        ([None, None, None], ["1", "2", "3"]),
        # qwen: two "always" options for a shell command (project, user).
        (["allow_once", "allow_always", "allow_always", "reject_once"], ["a", "A", "3", "r"]),
        (["allow_once", "something_new"], ["a", "2"]),
        ([None] * 11, [*"123456789", None, None]),
    ],
)
def test_keys_by_kind_else_position(kinds: list[str | None], keys: list[str | None]) -> None:
    opts = [PermissionOption(f"o{i}", f"O{i}", kind) for i, kind in enumerate(kinds)]
    assign_keys(opts)
    assert [o.key for o in opts] == keys


def test_keys_the_user_chose_and_a_kind_turned_off() -> None:
    kinds = ["allow_once", "allow_always", "reject_once", None]
    opts = [PermissionOption(f"o{i}", f"O{i}", kind) for i, kind in enumerate(kinds)]
    mine = {"allow_once": "y", "allow_always": None, "reject_once": "n", "reject_always": "N"}
    assign_keys(opts, mine)
    assert [o.key for o in opts] == ["y", None, "n", "4"]  # off: the menu answers it


async def test_request_on_the_wire(pipe: Any) -> None:
    to_client, client_in = pipe()
    to_agent, agent_in = pipe()
    client = Connection(client_in, to_agent, convert=v1.decode, enc_hook=v1.enc_hook, name="client")
    agent = Connection(agent_in, to_client, name="agent")
    editor = RecordingEditor()
    chat = new_chat(editor)
    owner = SimpleNamespace(
        chats={"s1": chat}, permissions=Permissions(), reviews={}, cwd="/", mcp=None, taken=set()
    )
    SessionsV1(client, cast(Any, owner))
    request = {
        "sessionId": "s1",
        "toolCall": {"toolCallId": "g1", "title": "WriteFile x.py", "kind": "edit"},
        "options": [{"optionId": o, "name": n, "kind": k} for o, n, k in GEMINI],
    }
    answers: list[Any] = []

    async def ask(params: dict[str, Any]) -> None:
        answers.append(await agent.request("session/request_permission", params, dict))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(client.serve)
        tasks.start_soon(agent.serve)
        tasks.start_soon(ask, request)
        await wait_for(lambda: bool(owner.permissions.pending(chat)))
        owner.permissions.answer(owner.permissions.pending(chat)[0], "proceed_once")
        await wait_for(lambda: len(answers) == 1)
        tasks.start_soon(ask, {**request, "sessionId": "gone"})
        await wait_for(lambda: len(answers) == 2)
        tasks.start_soon(ask, request)
        await wait_for(lambda: bool(owner.permissions.pending(chat)))
        owner.permissions.cancel(chat)
        await wait_for(lambda: len(answers) == 3)
        await client.aclose()
        await agent.aclose()
    assert [a["outcome"] for a in answers] == [
        {"outcome": "selected", "optionId": "proceed_once"},
        {"outcome": "cancelled"},
        {"outcome": "cancelled"},
    ]


async def test_demo_agent_asks_and_the_answer_decides(tmp_path: Any) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"permission_policy": "allow_all"})
        await app.open(1, None, str(tmp_path))
        await app.send(1, "permission")
        call = next(c for c in app.chats[1].session.tool_calls.values())
        assert (call.kind, call.status) == ("execute", "completed")
        assert editor.transcript(1)[call.id][-1] == "**Permission:** Allow (policy allow_all)"

        app.setup({"permission_policy": "ask"})
        tasks.start_soon(app.send, 1, "permission")
        permissions_ = app.agents["demo"].permissions
        await wait_for(lambda: bool(permissions_.pending(app.chats[1])))
        await app.answer(1, permissions_.pending(app.chats[1])[0], "reject")
        await wait_for(lambda: [e for e, _ in editor.events].count("AcpTurnEnd") == 2)
        statuses = [c.status for c in app.chats[1].session.tool_calls.values()]
        assert statuses == ["completed", "failed"]
        await app.answer(1, "permission1", "allow")  # long gone
        assert editor.notices[-1] == ("warn", "that permission request is no longer pending")
        await app.shutdown()
        tasks.cancel_scope.cancel()
