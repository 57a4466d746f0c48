"""Context the user attaches to a prompt, read the way the user sees it.

Lua names what the user chose (``@a.py``, ``:AcpAdd``, a selection, diagnostics,
an image) as plain items; here each becomes an
:class:`~acp_nvim.client.session.model.Attachment` holding the text of the
file's buffer when one is loaded (unsaved edits included), else the disk's.
What is too big to embed goes as a link, and what cannot be read is left out;
both with a warning for the user. Which wire form each attachment takes
(embedded resource, link, text, image) is the protocol adapter's choice: it
knows what the agent accepts (:func:`prompt_form`).

Not here: access checks. The user chose these files; ``fs_access`` guards what
the *agent* asks for.
"""

from __future__ import annotations

__all__ = ["MAX_EMBED_BYTES", "MAX_IMAGE_BYTES", "PromptForm", "prompt_form", "resolve", "sendable"]

import base64
import mimetypes
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread

from acp_nvim.client.editor import Editor
from acp_nvim.client.services import files, mentions
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.session.model import Attachment
from acp_nvim.client.session.workspace import shown_path

# Text embedded in a prompt at most, per attachment; a bigger file goes as a link.
MAX_EMBED_BYTES = 256 * 1024
MAX_IMAGE_BYTES = 5 * 1024 * 1024
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                ".gif": "image/gif", ".webp": "image/webp"}  # fmt: skip
_SEVERITIES = {1: "error", 2: "warning", 3: "info", 4: "hint"}

PromptForm = Literal["resource", "link", "links", "text", "image", "skip"]


def prompt_form(attachment: Attachment, *, embed: bool, image: bool) -> PromptForm:
    """How an attachment goes to an agent that accepts embedded context (``embed``)
    and images (``image``): ``skip`` when it cannot go at all."""
    if attachment.kind == "image":
        return "image" if image else "skip"
    if attachment.text is None:
        return "link"
    if embed:
        return "resource"
    if attachment.kind == "directory":
        return "links"  # a link per file, which the agent reads itself
    # Without embedded context a file is a link the agent reads itself; a selection
    # or diagnostics exist only here, so they go as text.
    return "link" if attachment.kind == "file" else "text"


def sendable(attachments: Sequence[Attachment], *, image: bool) -> list[Attachment]:
    """The ``attachments`` that go to an agent that takes images (``image``) or not:
    all but those :func:`prompt_form` skips (whatever it embeds)."""
    return [a for a in attachments if prompt_form(a, embed=False, image=image) != "skip"]


async def resolve(
    editor: Editor, items: Sequence[dict[str, Any]], cwd: str
) -> tuple[list[Attachment], list[str]]:
    """The attachments for Lua's ``items``, and a warning per item changed or dropped.
    An item marked ``mentioned`` (an ``@`` mention of the prompt's text) gives one not
    ``given``: an edit of the prompt resolves its text's mentions again."""
    attachments: list[Attachment] = []
    warnings: list[str] = []
    for item in items:
        try:
            attachment, warning = await _resolve_one(editor, item, cwd)
        except ServiceError as err:
            warnings.append(f"not attached: {err}")
            continue
        attachment.given = not item.get("mentioned")
        attachments.append(attachment)
        if warning:
            warnings.append(warning)
    return attachments, warnings


async def _resolve_one(
    editor: Editor, item: dict[str, Any], cwd: str
) -> tuple[Attachment, str | None]:
    kind = item.get("type")
    path = os.path.normpath(os.path.join(cwd, os.path.expanduser(str(item.get("path") or ""))))
    uri = Path(path).as_uri()
    label = shown_path(path, cwd)
    match kind:
        case "file":
            doc = await files.load(editor, path)
            if doc.text is None:
                raise ServiceError(f"{label}: no such file")
            if len(doc.text.encode("utf-8", "surrogatepass")) > MAX_EMBED_BYTES:
                warning = f"{label} is larger than {MAX_EMBED_BYTES // 1024} KiB: sent as a link"
                return Attachment("file", label, uri), warning
            return Attachment("file", label, uri, doc.text, _mime(path)), None
        case "selection":
            first, last = (int(n) for n in item.get("range") or (1, 1))
            text = str(item.get("text") or "")
            where = f"{label}:{first}-{last}" if last > first else f"{label}:{first}"
            selection = Attachment("selection", where, f"{uri}#L{first}-L{last}", text)
            return selection, None
        case "diagnostics":
            lines = [
                f"{label}:{d.get('lnum', 0) + 1}:{d.get('col', 0) + 1}: "
                f"{_SEVERITIES.get(d.get('severity'), 'note')}: {d.get('message', '')}"
                + (f" [{d['source']}]" if d.get("source") else "")
                for d in item.get("items") or []
            ]
            text = "\n".join(lines) or f"{label}: no diagnostics"
            return Attachment("diagnostics", f"diagnostics of {label}", uri, text), None
        case "image":
            mime = _IMAGE_TYPES.get(os.path.splitext(path)[1].lower())
            if mime is None:
                raise ServiceError(f"{label} is not an image (png, jpeg, gif, webp)")
            data, size = await anyio.to_thread.run_sync(_read_image, path, label)
            return Attachment("image", f"{label} ({size})", uri, None, mime, data), None
        case "directory":
            return await mentions.directory(path, label)
        case "quickfix":
            return mentions.quickfix(item.get("items") or [], cwd), None
        case "diff":
            return await mentions.work_tree_diff(cwd, item.get("buffers") or []), None
        case "url":
            return mentions.url(str(item.get("url") or "")), None
    raise ServiceError(f"unknown kind of context {kind!r}")


def _read_image(path: str, label: str) -> tuple[str, str]:
    """An image's bytes as base64, and its size for the user."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
    except OSError as err:
        raise ServiceError(f"{label}: {err.strerror or err}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ServiceError(f"{label} is larger than {MAX_IMAGE_BYTES // 2**20} MiB")
    return base64.b64encode(data).decode(), _size(len(data))


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.0f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def _mime(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "text/plain"
