"""The session model and the v1 adapter, through what the Editor is asked to show."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_nvim.client.agent import v1 as adapter_v1
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import (
    ChangesPart,
    DiffPart,
    FileOp,
    Location,
    MessagePatch,
    Session,
    ToolCallPatch,
)
from acp_nvim.client.session.prose import fence_after
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.protocol import schema_v1 as v1
from tests.fakes.editor import RecordingEditor


def update(json: bytes) -> object:
    return v1.decode(b'{"sessionId": "s", "update": ' + json + b"}", v1.SessionNotification).update


def make_chat() -> tuple[Chat, RecordingEditor]:
    editor = RecordingEditor()
    chat = Chat(1, "demo", editor)
    chat.ready("s", 1, "Demo")
    return chat, editor


@pytest.mark.anyio
async def test_v1_chunks_of_one_role_form_one_message_and_roles_alternate() -> None:
    chat, editor = make_chat()
    await chat.start_turn("hi")
    for text in (b"Hel", b"lo"):
        adapter_v1.apply_update(
            chat,
            update(
                b'{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "'
                + text
                + b'"}}'
            ),
        )
    adapter_v1.apply_update(
        chat,
        update(
            b'{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm\\nyes"}}'
        ),
    )
    adapter_v1.apply_update(
        chat,
        update(
            b'{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "again"}}'
        ),
    )
    blocks = editor.transcript(1)
    assert list(blocks.values()) == [
        ["## You", "hi"],
        ["## Agent", "Hello"],
        ["### Thinking", "> hm yes"],  # a soft break (prose.py)
        ["## Agent", "again"],
    ]
    # Streaming is an append, not a redraw of the block.
    assert [op["op"] for op in editor.ops[1] if op.get("id") == "#message:#m1"] == [
        "block",
        "append",
    ]


@pytest.mark.anyio
async def test_a_later_sessions_ids_never_reach_the_items_of_an_earlier_one() -> None:
    """The spec makes the agent's ids unique within a session only. A chat that goes
    on in a new session (a restart whose resume failed; an agent started again may
    even hand out the same session id) still shows the earlier turns: the new
    session's "m1" and "t1" are items and blocks of their own, not more of the old
    ones. A session taken again (a branch picked) keys its ids as it did."""
    editor = RecordingEditor()
    chat = Chat(1, "demo", editor)
    session = chat.session
    for prompt, reply, title in (("crash", "Crashing now", "first"), ("hello", "Hi", "second")):
        session.take("s", created=True)  # "s" made anew by the agent started again
        await chat.start_turn(prompt)
        chat.on_message(MessagePatch("m1", "agent", reply))
        chat.on_tool_call(ToolCallPatch("t1", title=title, status="pending"))
    agents = [m for m in session.messages.values() if m.role == "agent"]
    assert [m.text for m in agents] == ["Crashing now", "Hi"]
    assert [call.title for call in session.tool_calls.values()] == ["first", "second"]
    blocks = [op["id"] for op in editor.ops[1] if op["op"] == "block" and op["kind"] == "agent"]
    assert len(set(blocks)) == 2
    assert chat.branches.last_reply(chat.session, 2) == "m1"  # the agent's own id, for a fork at it
    session.take("other", created=True)
    session.take("s", created=False)  # back to the second "s"
    chat.on_message(MessagePatch("m1", "agent", "!"))
    chat.on_tool_call(ToolCallPatch("t1", status="completed"))
    assert [m.text for m in agents] == ["Crashing now", "Hi!"]
    assert [call.status for call in session.tool_calls.values()] == ["pending", "completed"]


@pytest.mark.anyio
async def test_a_prompt_after_a_turn_its_agent_never_acknowledged_is_a_message_of_its_own() -> None:
    """The agent died before it acknowledged a prompt: the next prompt's echo did
    not take that one's place (its text written over the earlier prompt)."""
    chat, _ = make_chat()
    await chat.start_turn("crash")
    await chat.start_turn("hello")  # the chat restarted its agent meanwhile
    chat.on_message(MessagePatch("u1", "user", "hello"))  # the new agent's acknowledgment
    users = [(key, m.text) for key, m in chat.session.messages.items() if m.role == "user"]
    assert [text for _, text in users] == ["crash", "hello"]
    assert chat.session.aliases == {"u1": users[1][0]}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "closing"),
    [
        ("Here:\n```python\nx = 1\n", "```"),
        ("```python\nx = 1", "\n```"),
        ("~~~~\nz\n", "~~~~"),
        ("```\nclosed\n```\n", ""),
    ],
)
async def test_a_turn_cut_short_in_a_code_block_closes_its_fence(text: str, closing: str) -> None:
    """Cancelled (or failed) in a code block, the agent's message left its fence open,
    and Markdown read every later block of the transcript as code."""
    chat, editor = make_chat()
    await chat.start_turn("go")
    chat.on_message(MessagePatch(None, "agent", text))
    chat.end_turn("cancelled")
    [message] = [m for m in chat.session.messages.values() if m.role == "agent"]
    assert message.text == text + closing
    drawn = editor.transcript(1)["#message:" + message.id]
    assert drawn[1:] == (text + closing).rstrip("\n").split("\n")  # no blank row at its end


def test_tool_call_upsert_tolerates_duplicates_and_update_before_create() -> None:
    chat, editor = make_chat()
    adapter_v1.apply_update(
        chat,
        update(
            b'{"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}'
        ),
    )
    adapter_v1.apply_update(
        chat,
        update(
            b'{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.py", "kind": "read"}'
        ),
    )
    adapter_v1.apply_update(
        chat,
        update(
            b'{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.py", "kind": "read"}'
        ),
    )
    adapter_v1.apply_update(
        chat,
        update(
            b'{"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",'
            b' "content": [{"type": "diff", "path": "/p/a.py", "oldText": "a\\n", "newText": "b\\n"}],'
            b' "locations": [{"path": "/p/a.py", "line": 3}]}'
        ),
    )
    assert list(chat.session.tool_calls) == ["t1"]
    call = chat.session.tool_calls["t1"]
    # A duplicate tool_call does not reset the status an update set before it.
    assert (call.title, call.kind, call.status) == ("Read a.py", "read", "completed")
    lines = editor.transcript(1)["t1"]
    assert lines[:2] == ["#### Read a.py", "`read` · completed"]
    assert "```diff" in lines and "-a" in lines and "+b" in lines
    assert lines[-1] == "→ /p/a.py:3"


def test_files_in_the_session_directory_are_named_relative_to_it() -> None:
    """An agent sends absolute paths: a diff's header names each file three times,
    which took six rows of a narrow chat. In the session's directory they are named
    as the user would name them; a file outside it keeps its full path."""
    editor = RecordingEditor()
    chat = Chat(1, "demo", editor, Workspace("/p"))
    chat.ready("s", 1, "Demo")
    moved = ChangesPart([FileOp("move", "/p/b.md", old_path="/p/a.md")])  # v2's changes
    content = [DiffPart("/p/src/a.py", "a\n", "b\n"), DiffPart("/etc/b.conf", None, "x\n"), moved]
    locations = [Location("/p/src/a.py", 3), Location("/pp/c.py")]
    chat.on_tool_call(ToolCallPatch("t1", title="Edit", kind="edit", content=content,
                                    locations=locations))  # fmt: skip
    lines = editor.transcript(1)["t1"]
    assert lines[3:6] == ["diff --git src/a.py src/a.py", "--- src/a.py", "+++ src/a.py"]
    assert "diff --git /etc/b.conf /etc/b.conf" in lines and "+++ /etc/b.conf" in lines
    assert "**moved** a.md → b.md" in lines
    assert lines[-2:] == ["→ src/a.py:3", "→ /pp/c.py"]
    # Lua is given the full paths (<CR> opens the file).
    [op] = [op for op in editor.ops[1] if op.get("id") == "t1"]
    assert [where["path"] for where in op["locations"]] == ["/p/src/a.py", "/pp/c.py"]


def test_a_v2_patchs_file_header_names_files_as_its_header_does() -> None:
    """A v2 ``git_patch`` names each file by absolute path: shown as sent, its
    header took the rows a v1 diff's no longer takes. Outside the session's
    directory a path stays whole; the hunks are the agent's text."""
    editor = RecordingEditor()
    chat = Chat(1, "demo", editor, Workspace("/p"))
    chat.ready("s", 1, "Demo")
    patch = (
        "diff --git /p/src/a.py /p/src/a.py\n--- /p/src/a.py\n+++ /p/src/a.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
        "diff --git /p/old.md /p/new.md\nsimilarity index 100%\n"
        "rename from /p/old.md\nrename to /p/new.md\n"
        "diff --git /etc/b.conf /etc/b.conf\nnew file mode 100644\n--- /dev/null\n"
        "+++ /etc/b.conf\n@@ -0,0 +1 @@\n+--- /p/src/a.py\n"
    )
    ops = [FileOp("modify", "/p/src/a.py"), FileOp("move", "/p/new.md", old_path="/p/old.md"),
           FileOp("add", "/etc/b.conf")]  # fmt: skip
    part = ChangesPart(ops, patch=patch, patch_format="git_patch")
    chat.on_tool_call(ToolCallPatch("t1", title="Edit", kind="edit", content=[part]))
    lines = editor.transcript(1)["t1"]
    body = [line for line in lines if not line.startswith(("#", "`", "**"))]
    assert body == [
        "diff --git src/a.py src/a.py", "--- src/a.py", "+++ src/a.py", "@@ -1 +1 @@", "-a", "+b",
        "diff --git old.md new.md", "similarity index 100%", "rename from old.md", "rename to new.md",
        "diff --git /etc/b.conf /etc/b.conf", "new file mode 100644", "--- /dev/null",
        "+++ /etc/b.conf", "@@ -0,0 +1 @@", "+--- /p/src/a.py",  # a hunk's line, kept
    ]  # fmt: skip


def test_v1_diff_without_old_text_reads_as_a_new_file() -> None:
    chat, editor = make_chat()
    cases = {
        "null": b'"oldText": null, ',
        "absent": b"",
        "empty": b'"oldText": "", ',  # an existing empty file: a modification
    }
    for call_id, old in cases.items():
        adapter_v1.apply_update(
            chat,
            update(
                b'{"sessionUpdate": "tool_call", "toolCallId": "' + call_id.encode() + b'",'
                b' "title": "Write", "kind": "edit", "content": [{"type": "diff",'
                b' "path": "/p/new.py", ' + old + b'"newText": "x = 1\\n"}]}'
            ),
        )
    for call_id in ("null", "absent"):
        lines = editor.transcript(1)[call_id]
        assert "new file mode 100644" in lines, lines
        assert lines[lines.index("--- /dev/null") + 1] == "+++ /p/new.py", lines
    lines = editor.transcript(1)["empty"]
    assert "--- /p/new.py" in lines and "--- /dev/null" not in lines, lines


@pytest.mark.anyio
async def test_cancelled_turn_marks_unfinished_tool_calls_cancelled() -> None:
    chat, editor = make_chat()
    await chat.start_turn("go")
    chat.on_tool_call(ToolCallPatch("t1", title="Run", status="in_progress"))
    chat.on_tool_call(ToolCallPatch("t2", title="Done", status="completed"))
    chat.end_turn("cancelled")
    assert chat.session.tool_calls["t1"].status == "cancelled"
    assert chat.session.tool_calls["t2"].status == "completed"
    assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "cancelled"})
    assert editor.last_status(1)["stop_reason"] == "cancelled"


@pytest.mark.anyio
async def test_a_cancel_settles_its_own_turns_calls_and_compactions_only() -> None:
    """An earlier turn's call nothing finished (a v2 permission's own block) was
    marked cancelled by a later turn's cancel; a compaction cut short stayed in
    progress."""
    chat, editor = make_chat()
    await chat.start_turn("one")
    chat.on_tool_call(ToolCallPatch("t1", title="Run", status="pending"))
    chat.end_turn("end_turn")
    await chat.start_turn("two")
    chat.on_tool_call(ToolCallPatch("t2", title="Run", status="pending"))
    chat.on_compaction("c1", status="in_progress")
    chat.end_turn("cancelled")
    assert chat.session.tool_calls["t1"].status == "pending"
    assert chat.session.tool_calls["t2"].status == "cancelled"
    assert editor.transcript(1)["#compaction:c1"][0] == "#### Context compaction cancelled"


@pytest.mark.anyio
async def test_a_settled_turn_end_cancels_its_own_unfinished_calls_whatever_its_stop() -> None:
    """v1 (``settle``): the prompt's answer ends the turn's work, so a call left pending
    (a rejected permission) is cancelled; without it (v2: work may go on while idle)
    an ``end_turn`` leaves the call as it is."""
    chat, _ = make_chat()
    await chat.start_turn("one")
    chat.on_tool_call(ToolCallPatch("t1", title="Run", status="pending"))
    chat.end_turn("end_turn")
    await chat.start_turn("two")
    chat.on_tool_call(ToolCallPatch("t2", title="Edit", status="in_progress"))
    chat.end_turn("end_turn", settle=True)
    assert chat.session.tool_calls["t1"].status == "pending"
    assert chat.session.tool_calls["t2"].status == "cancelled"


def test_unknown_update_and_content_never_crash() -> None:
    chat, editor = make_chat()
    adapter_v1.apply_update(chat, update(b'{"sessionUpdate": "brand_new_thing", "x": 1}'))
    adapter_v1.apply_update(
        chat, update(b'{"sessionUpdate": "agent_message_chunk", "content": {"type": "hologram"}}')
    )
    assert editor.transcript(1)["#message:#m0"] == ["## Agent", "[hologram content]"]
    assert editor.last_status(1)["unknown_update"] == "brand_new_thing"


@pytest.mark.anyio
async def test_plan_is_one_block_per_turn_replaced_in_place() -> None:
    chat, editor = make_chat()
    await chat.start_turn("plan it")
    entry = b'{"content": "step", "priority": "high", "status": "%s"}'
    adapter_v1.apply_update(
        chat, update(b'{"sessionUpdate": "plan", "entries": [' + entry % b"pending" + b"]}")
    )
    adapter_v1.apply_update(
        chat, update(b'{"sessionUpdate": "plan", "entries": [' + entry % b"completed" + b"]}")
    )
    assert editor.transcript(1)["#plan:#plan1"] == ["### Plan", "- [x] step"]


def test_message_patch_with_id_replaces_whole_message() -> None:
    session = Session()
    session.apply_message(MessagePatch("a", "agent", "one"))
    session.apply_message(MessagePatch("a", "agent", " two"))
    message, created = session.apply_message(MessagePatch("a", "agent", "new", replace=True))
    assert (message.text, created) == ("new", False)
    assert repr(session) == "<Session ? idle, 1 messages, 0 tool calls>"


def test_a_message_streaming_when_the_user_steers_goes_on_after_the_users() -> None:
    """The agent's chunks of its message (one id) that come after a steered message
    are a message of their own after it, as they came, from the end of the line
    they were writing (a word, a line cut in two read as two); steered twice, twice."""
    session = Session()

    def steer(text: str) -> None:
        session.steered()
        session.apply_message(MessagePatch(session.new_id("u"), "user", text, replace=True))

    def chunk(text: str, message_id: str | None = "a") -> None:
        for part in session.parts(MessagePatch(message_id, "agent", text)):
            session.apply_message(part)

    chunk("one\nthe sec")
    steer("shorter")
    chunk("ond line\nthird ")
    chunk("line")
    steer("stop")
    chunk(" goes on\n")
    chunk("fourth\n")
    steer("again")  # at a line's end: the message parts there and then
    chunk("```py\nx = 1\n")
    steer("in code")  # not in a code block: to its end
    chunk("y = 2\n```\nsixth\n")
    shown = [(session.messages[key].role, session.messages[key].text) for _, key in session.items]
    assert shown == [
        ("agent", "one\nthe second line\n"),
        ("user", "shorter"),
        ("agent", "third line goes on\n"),
        ("user", "stop"),
        ("agent", "fourth\n"),
        ("user", "again"),
        ("agent", "```py\nx = 1\ny = 2\n```\n"),
        ("user", "in code"),
        ("agent", "sixth\n"),
    ]


def test_without_message_ids_a_steer_parts_the_message_at_its_lines_end() -> None:
    """v1 chunks carry no id: they continue the message the steer came into, past the
    user's message, to the end of its line; a tool call or a turn's end first ends it."""
    session = Session()

    def chunk(text: str) -> None:
        for part in session.parts(MessagePatch(None, "agent", text)):
            session.apply_message(part)

    def texts() -> list[str]:
        return [session.messages[key].text for kind, key in session.items if kind == "message"]

    chunk("tell")
    session.steered()
    session.apply_message(MessagePatch(session.new_id("u"), "user", "shorter", replace=True))
    chunk(" me\nmore")
    assert texts() == ["tell me\n", "shorter", "more"]
    session.steered()
    session.apply_message(MessagePatch(session.new_id("u"), "user", "stop", replace=True))
    session.apply_tool_call(ToolCallPatch("call1", title="read"))
    chunk("after the tool")  # the agent went on: no line to finish
    assert texts() == ["tell me\n", "shorter", "more", "stop", "after the tool"]
    session.steered()
    session.turn_ended()
    session.apply_message(MessagePatch(session.new_id("u"), "user", "next turn", replace=True))
    chunk("answer")
    assert texts()[-3:] == ["after the tool", "next turn", "answer"]


_STEERING_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("chunk"), st.text(alphabet="ab\n`", max_size=6)),
        st.tuples(st.sampled_from(["steer", "turn"]), st.just("")),
    ),
    max_size=40,
)


@settings(max_examples=400)  # a model's calls only: fast, and fences are rare draws
@given(_STEERING_OPS, st.booleans())
def test_steers_part_messages_only_at_line_ends_and_lose_nothing(
    ops: list[tuple[str, str]], with_ids: bool
) -> None:
    """Whatever the chunks and however often the user steers: each turn's agent text
    reads as it was sent, and each of its messages but the last ends a line outside
    a code block (Markdown would read the user's message after it as code)."""
    session = Session()
    sent: list[list[str]] = [[]]  # the agent's chunks, by turn

    def prompt(turn: int) -> None:
        session.apply_message(MessagePatch(f"#turn{turn}", "user", "go", replace=True))

    prompt(0)
    for op, text in ops:
        if op == "chunk":
            message_id = f"a{len(sent)}" if with_ids else None
            for part in session.parts(MessagePatch(message_id, "agent", text)):
                session.apply_message(part)
            sent[-1].append(text)
        elif op == "steer":
            session.steered()
            session.apply_message(MessagePatch(session.new_id("u"), "user", "s", replace=True))
        else:
            session.turn_ended()
            sent.append([])
            prompt(len(sent) - 1)
    turns: list[list[str]] = []
    for _, key in session.items:
        message = session.messages[key]
        if key.startswith("#turn"):
            turns.append([])
        elif message.role == "agent":
            turns[-1].append(message.text)
    assert ["".join(texts) for texts in turns] == ["".join(chunks) for chunks in sent]
    for texts in turns:
        for text in texts[:-1]:
            fence = None
            for line in text.split("\n")[:-1]:
                fence = fence_after(fence, line)
            assert text.endswith("\n") and fence is None, texts


def test_a_run_of_updates_shows_what_one_by_one_shows() -> None:
    # The connection hands a read's run of session/update over at once; joining
    # the chunks of one message must not change what the transcript shows.
    def chunk(kind: str, text: str, message_id: str | None = None) -> object:
        body = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if message_id is not None:
            body["messageId"] = message_id
        return update(msgspec.json.encode(body))

    updates = [
        chunk("agent_message_chunk", "Hel"),
        chunk("agent_message_chunk", "lo\nthere"),
        chunk("agent_thought_chunk", "hm"),
        chunk("agent_thought_chunk", "\nyes"),
        chunk("agent_message_chunk", "one", "a"),
        chunk("agent_message_chunk", " two", "b"),
        chunk("agent_message_chunk", " more", "a"),
        update(b'{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read"}'),
        chunk("agent_message_chunk", "after"),
        chunk("agent_message_chunk", " the call"),
    ]
    one_by_one, editor_one = make_chat()
    for item in updates:
        adapter_v1.apply_update(one_by_one, item)
    batched, editor_batched = make_chat()
    adapter_v1.apply_updates(batched, updates)
    assert list(editor_batched.transcript(1).values()) == [
        ["## Agent", "Hello there"],  # soft breaks (prose.py), one held a chunk
        ["### Thinking", "> hm yes"],
        ["## Agent", "one more"],  # message ids keep interleaved messages apart
        ["## Agent", " two"],
        ["#### Read", "`other` · pending"],
        ["## Agent", "after the call"],
    ]
    assert editor_batched.transcript(1) == editor_one.transcript(1)
    # Fewer render steps: one per run of a message, not one per chunk.
    assert len(editor_batched.ops[1]) < len(editor_one.ops[1])


def _chunk(kind: str, text: str, message_id: str | None = None, block: str = "text") -> object:
    content = (
        {"type": "text", "text": text}
        if block == "text"
        else {"type": block, "uri": text, "name": text}
    )
    body = {"sessionUpdate": kind, "content": content}
    if message_id is not None:
        body["messageId"] = message_id
    return update(msgspec.json.encode(body))


@pytest.mark.parametrize(
    ("updates", "patches"),
    [
        # One message's text chunks, as a stream's read brings them: one patch.
        ([_chunk("agent_message_chunk", f"w{i} ", "a") for i in range(50)], 1),
        ([_chunk("agent_thought_chunk", "x\n"), _chunk("agent_thought_chunk", "y")], 1),
        # Anything else in the run: the chunks one by one, joined where they can be.
        ([_chunk("agent_message_chunk", "a", "m"), _chunk("agent_message_chunk", "b", "n")], 2),
        ([_chunk("agent_message_chunk", "a"), _chunk("agent_thought_chunk", "b")], 2),
        (
            [
                _chunk("agent_message_chunk", "a"),
                _chunk("agent_message_chunk", "f", block="resource_link"),
            ],
            1,
        ),
        ([_chunk("user_message_chunk", "typed"), _chunk("agent_message_chunk", "said")], 2),
    ],
)
def test_a_read_of_one_message_is_one_patch(updates: list[object], patches: int) -> None:
    one_by_one, editor_one = make_chat()
    for item in updates:
        adapter_v1.apply_update(one_by_one, item)
    batched, editor_batched = make_chat()
    before = len(editor_batched.ops[1])
    adapter_v1.apply_updates(batched, updates)
    assert editor_batched.transcript(1) == editor_one.transcript(1)
    assert len(editor_batched.ops[1]) - before == patches


def test_a_v1_replayed_users_message_names_its_files_on_the_attached_line() -> None:
    """session/load replays a user's message with a file as chunks: the file is named
    on the Attached line, as v2 names it, not as `[resource_link …]` in the words."""
    editor = RecordingEditor()
    chat = Chat(1, "demo", editor, Workspace("/w"))
    chat.ready("s", 1, "Demo")
    adapter_v1.apply_updates(
        chat,
        [
            _chunk("user_message_chunk", "compare"),
            _chunk("user_message_chunk", "file:///w/src/b.py", block="resource_link"),
            _chunk("user_message_chunk", " these"),
        ],
    )
    [user] = [lines for lines in editor.transcript(1).values() if lines[0] == "## You"]
    assert user == ["## You", "compare these", "", "*Attached: src/b.py*"]


@pytest.mark.parametrize("modes_first", [False, True])
def test_a_mode_config_option_wins_over_modes_unless_the_agent_switches_by_modes(
    modes_first: bool,
) -> None:
    """qwen offers its mode as modes and as a config option; only session/set_mode
    switches it, so with ``modes_first`` its modes stay its mode setting, at the
    session's start and when a config update names the mode again."""
    chat, _ = make_chat()
    modes = v1.SessionModeState(
        current_mode_id="auto",
        available_modes=[v1.SessionMode(id="auto", name="Auto"), v1.SessionMode(id="default", name="Default")],
    )  # fmt: skip
    option = (
        b'{"type": "select", "id": "approval", "name": "Mode", "category": "mode",'
        b' "currentValue": "auto", "options": [{"value": "auto", "name": "Auto"}]}'
    )
    options = [v1.decode(option, v1.SessionConfigOption)]
    chat.on_config(adapter_v1.settings(options, modes, None, modes_first))
    mode_source = "modes" if modes_first else "config"
    assert [(o.id, o.source) for o in chat.session.config_options] == [
        ("mode" if modes_first else "approval", mode_source)
    ]
    adapter_v1.apply_updates(
        chat,
        [update(b'{"sessionUpdate": "config_option_update", "configOptions": [' + option + b"]}")],
        modes_first=modes_first,
    )
    assert [o.source for o in chat.session.config_options] == [mode_source]


def test_a_steered_message_replayed_after_a_prompt_whose_replay_reads_otherwise_is_no_turn() -> None:
    """The first prompt carried a selection, which an agent without embedded context
    gets as text: replayed, its words were not the ones the history kept, and every
    message after it, the one steered into turn 2 too, began a turn of its own."""
    from acp_nvim.client.session.chat import replayed

    chat, _ = make_chat()
    chat.branches.kept = [("explain", False), ("hold", False), ("go on", True)]
    selection = "a.py:1:\n```\nx = 1\n```\n"
    for n, (role, text) in enumerate(
        [("user", selection + "explain"), ("agent", "ok"), ("user", "hold"),
         ("agent", "holding"), ("user", "go on"), ("agent", "steered")]
    ):  # fmt: skip
        chat.on_message(MessagePatch(f"m{n}", role, text))  # type: ignore[arg-type]
    replayed(chat, 0, 1)
    assert [turn.prompt.text for turn in chat.branches.path] == [selection + "explain", "hold"]
