"""The agent's Markdown as the transcript shows it: soft line breaks joined.

In Markdown a single newline inside a paragraph is a soft break: the paragraph
reads on, and a code span may cross it. The transcript shows the text itself in a
window that wraps, so a soft break kept as a row would break the text wherever the
agent's line happened to end (mid-sentence, inside `inline code`). A soft break is
drawn as a space; a hard one stays: a blank line, a block that ends or starts (a
heading, a list item, a quote, a table row, a fence and everything inside it), two
trailing spaces or a backslash. Streamed text decides a break once the next line's
first characters arrive; until then the newline and those characters are held.
Line breaks at the end of what is drawn wait for text after them: a message that
ends in one would show a blank row more above the next block.
The model keeps the agent's text as sent (export, history, seeds).

Also here: :func:`nested`, a message's headings put below those of the Markdown
document that holds it (the export's, a seed's).
"""

from __future__ import annotations

__all__ = ["Prose", "Streams", "fence_after", "heading_words", "nested", "reflow"]

import re

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"( {0,3})(#{1,6})(?=[ \t]|$)")
# A setext heading's underline, under a paragraph: ``=`` a first level, ``-`` a second.
_UNDERLINE = re.compile(r" {0,3}(=+|-+)[ \t]*$")
# A quote, list item or table row: a line after it continues it, not a paragraph.
_OPENS_BLOCK = re.compile(r" {0,3}(?:>|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|\|)")
# A thematic break or a setext heading's underline.
# A heading's closing sequence: the #s ending it after a space (or alone).
_CLOSING = re.compile(r"(^|[ \t])(#+[ \t]*)$")
# What a heading's words would be read as markup by: emphasis (a ``_`` at a word's
# edge only), a code span, a link or image, an HTML tag or autolink, strikethrough,
# an entity, a backslash escaping ASCII punctuation.
_INLINE = re.compile(r"[`*\[<~]|(?<![^\W_])_|_(?![^\W_])|&(?=#?\w+;)|\\(?=[!-/:-@\[-`{-~])")
_RULE = re.compile(r" {0,3}([-*_=])(?:[ \t]*\1)*[ \t]*$")
_DIGITS = "0123456789"
_INDENT = re.compile(r"[ \t]*")
# A line whose first character is none of these (nor other white space) is
# paragraph text, and a line after a newline that starts with none of these
# continues the paragraph: decided without a regex or a slice, as most of a
# stream's lines are.
_MAY_START_BLOCK = frozenset(" \t\n#>|<`~-*+=_" + _DIGITS)
# A row grows by joined lines up to this many characters: lines that only look
# like prose (a log without a fence) must not become one row of megabytes.
ROW_MAX = 1000


def fence_after(fence: str | None, line: str) -> str | None:
    """The code fence open after the complete ``line`` (no newline), ``fence`` the one
    open before it: a fence opens one, a fence as long of the same character closes it."""
    match = _FENCE.match(line)
    if fence is None:
        return match[1] if match is not None else None
    closes = (
        match is not None
        and match[1][0] == fence[0]
        and len(match[1]) >= len(fence)
        and not line[match.end() :].strip()
    )
    return None if closes else fence


def _next_starts_block(text: str, start: int) -> bool | None:
    """Whether the line of ``text`` at ``start`` is blank or starts a block (a hard
    break before it); None while its first characters have not all arrived."""
    if start < len(text) and text[start] not in _MAY_START_BLOCK:
        return False
    end = text.find("\n", start)
    complete = end >= 0
    text = (text[start:end] if complete else text[start:]).lstrip(" \t")
    if not text:
        return True if complete else None
    first = text[0]
    if first in "#>|<":
        return True
    if first in "`~":  # a fence takes three
        run = len(text) - len(text.lstrip(first))
        if run < 3 and run == len(text) and not complete:
            return None
        return run >= 3
    if first in "-*+=_":  # a bullet, or a line of one of them (a rule, an underline)
        if len(text) == 1:
            return True if complete else None
        if text[1] in " \t":
            return True
        if text.strip(first + " \t"):  # other characters: **bold**, --flag
            return False
        return True if complete else None
    if first in _DIGITS:  # an ordered list item: digits and . or )
        digits = len(text) - len(text.lstrip(_DIGITS))
        if digits == len(text):
            return True if complete else None
        return digits <= 9 and text[digits] in ".)"
    return False


class Prose:
    """One message's text streamed into rows: :meth:`feed` takes the next piece and
    returns what to draw of it (soft breaks as spaces, a line's indent after one
    dropped); :meth:`flush` draws a held newline as a hard break."""

    def __init__(self) -> None:
        self._line: list[str] = []  # the current line of the text so far
        self._held = ""  # a newline and the next line's first characters, undecided
        self._trailing = ""  # decided line breaks that end what was drawn, not drawn yet
        self._fence: str | None = None  # the open code fence
        self._paragraph = False  # the last line was paragraph text
        self._begun = False  # some text other than line breaks came
        self.row = 0  # characters of the drawn row so far

    def feed(self, text: str, *, final: bool = False) -> str:
        """What to draw of ``text``, the message's next piece; ``final``: no more
        text comes to decide a held break (it is hard)."""
        shown = self._decide(text, final)
        if not shown.endswith("\n"):
            if self._trailing and shown:
                shown, self._trailing = self._trailing + shown, ""
            return shown
        body = shown.rstrip("\n")
        if not body:
            self._trailing += shown
            return ""
        shown, self._trailing = self._trailing + body, shown[len(body) :]
        return shown

    def _decide(self, text: str, final: bool) -> str:
        """:meth:`feed` but for the line breaks at the end."""
        if not self._begun:
            # Blank lines before a message's first text (a reply that goes on from
            # one the user's steered message cut in two) would open its block.
            text = text.lstrip("\r\n")
            if not text:
                return ""
            self._begun = True
        text, self._held = self._held + text, ""
        out: list[str] = []
        # The next line's start, and where the text not yet in ``out`` starts: lines
        # that end with a hard break are drawn as they came, in one slice.
        start = copied = 0
        while (end := text.find("\n", start)) >= 0:
            self.row += end - start
            line = "".join([*self._line, text[start:end]]) if self._line else text[start:end]
            ends, fence, paragraph = self._ends_block(line)
            hard = ends or self.row >= ROW_MAX or _next_starts_block(text, end + 1)
            if hard is None and not final:
                self._line, self._held = [line], text[end:]
                out.append(text[copied:end])
                return "".join(out)
            self._line, self._fence, self._paragraph = [], fence, paragraph
            start = end + 1
            if hard is False:
                out += (text[copied:end], " ")
                self.row += 1
                if text.startswith((" ", "\t"), start):  # the indent after a soft break
                    indent = _INDENT.match(text, start)
                    start = indent.end() if indent else start
                copied = start
            else:
                self.row = 0
        out.append(text[copied:])
        self.row += len(text) - start
        self._line.append(text[start:])
        return "".join(out)

    def flush(self) -> str:
        """A held newline and what follows it, the newline a hard break."""
        return self.feed("", final=True) if self._held else ""

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def closing(self) -> str:
        """What closes the code fence the text so far leaves open, on a row of its own;
        "" when none is open."""
        line = "".join(self._line)
        fence = self._ends_block(line)[1] if line else self._fence
        if fence is None:
            return ""
        return "\n" + fence if line else fence

    def _ends_block(self, line: str) -> tuple[bool, str | None, bool]:
        """Whether a complete ``line`` ends its block whatever follows, the fence open
        after it, and whether it is paragraph text."""
        fence = self._fence
        if fence is None and line and line[0] not in _MAY_START_BLOCK and not line[0].isspace():
            return line.endswith(("  ", "\\")), None, True
        after = fence_after(fence, line)
        if fence is not None or after is not None:
            return True, after, False
        stripped = line.strip()
        if not stripped:
            return True, None, False
        if not self._paragraph and line.startswith(("    ", "\t")):  # indented code
            return True, None, False
        if _HEADING.match(line) or _RULE.match(line) or stripped[0] in "|<":
            return True, None, False
        return line.endswith(("  ", "\\")), None, True


def heading_words(text: str) -> str:
    """``text`` as the words of an ATX heading, rendered as written (decision
    0105): what Markdown would read as markup escaped (emphasis, code, a link, an
    HTML tag or entity, strikethrough, a backslash escaping the next character),
    and a run of ``#`` ending it after a space (a title "look at this ##"), which
    Markdown reads as the heading's closing sequence and drops. A ``_`` inside a
    word (``read_file``) is no emphasis and stays as it is.

    >>> heading_words("look at this ##")
    'look at this \\\\##'
    >>> heading_words("*x* in read_file")
    '\\\\*x\\\\* in read_file'
    """
    return _CLOSING.sub(r"\1\\\2", _INLINE.sub(r"\\\g<0>", text))


def nested(lines: list[str], levels: int) -> list[str]:
    """``lines`` of Markdown with each heading moved ``levels`` down (at most to the
    sixth), so that none reads as one of the headings of levels 1 to ``levels`` of
    the document holding them: a prompt's ``## x`` was as much a section of the
    export as its ``## Agent``. A heading underlined (``===``, ``---``) is written
    as the others are; code in fences stays as it is.

    >>> nested(["# Plan", "", "Steps", "---", "```", "# not one", "```"], 3)
    ['#### Plan', '', '##### Steps', '```', '# not one', '```']
    """
    shown: list[str] = []
    fence: str | None = None
    paragraph: int | None = None  # where the paragraph the line would end began
    inside = False  # in a quote, list item or code: no paragraph of its own
    for line in lines:
        if fence is not None or _FENCE.match(line):
            fence, paragraph, inside = fence_after(fence, line), None, False
        elif heading := _HEADING.match(line):
            marks = "#" * min(6, len(heading[2]) + levels)
            line, paragraph, inside = heading[1] + marks + line[heading.end() :], None, False
        elif (underline := _UNDERLINE.match(line)) and paragraph is not None:
            level = 1 if underline[1][0] == "=" else 2
            words = " ".join(part.strip() for part in shown[paragraph:])
            del shown[paragraph:]
            line, paragraph = "#" * min(6, level + levels) + " " + words, None
        elif not line.strip() or _RULE.match(line):
            paragraph, inside = None, False
        elif _OPENS_BLOCK.match(line) or (
            paragraph is None and not inside and line.startswith(("    ", "\t"))
        ):
            paragraph, inside = None, True
        elif paragraph is None and not inside:
            paragraph = len(shown)
        shown.append(line)
    return shown


def reflow(text: str) -> str:
    """``text`` (a whole message) as the transcript shows it."""
    prose = Prose()
    return prose.feed(text, final=True)


class Streams:
    """The agent's messages of a chat as they stream, a :class:`Prose` each; at most
    one holds a newline back (the one streaming last) until its next piece, or until
    anything else is drawn."""

    def __init__(self) -> None:
        self._prose: dict[str, Prose] = {}
        self._holding: str | None = None

    def start(self, message_id: str, text: str) -> str:
        """A new or replaced message's whole ``text``: what to draw of it."""
        self._prose[message_id] = Prose()
        return self.append(message_id, text)[1]

    def append(self, message_id: str, text: str) -> tuple[int, str]:
        """The characters of the message's last row before, and what to draw of ``text``."""
        prose = self._prose.setdefault(message_id, Prose())
        row = prose.row
        shown = prose.feed(text)
        if prose.holding:
            self._holding = message_id
        elif self._holding == message_id:
            self._holding = None
        return row, shown

    @property
    def holding(self) -> str | None:
        """The message that holds a newline back, if one does."""
        return self._holding

    def release(self) -> str:
        """What the holding message draws before anything else is drawn: the held
        newline as a hard break and what follows it ("" when nothing does)."""
        message_id, self._holding = self._holding, None
        return self._prose[message_id].flush() if message_id is not None else ""

    def closing(self, message_id: str) -> str:
        """What closes the code fence the message leaves open ("" when none is): one
        cut short in a code block (a turn cancelled) would have Markdown read every
        later block of the transcript as code."""
        prose = self._prose.get(message_id)
        return prose.closing() if prose is not None else ""

    def forget(self, message_id: str) -> None:
        self._prose.pop(message_id, None)
        if self._holding == message_id:
            self._holding = None
