"""The Python copies of attached buffers (acp_nvim/nvim/mirror.py), no Neovim."""

from __future__ import annotations

from acp_nvim.nvim.mirror import BufferMirrors

PATH = "/p/a.py"


def seeded(text: str = "a\nb\nc", tick: int = 5) -> BufferMirrors:
    mirrors = BufferMirrors()
    mirrors.mark_attached(1)
    mirrors.seed(PATH, 1, tick, text)
    return mirrors


def test_a_seeded_copy_is_the_text_only_at_its_tick() -> None:
    mirrors = seeded()
    assert mirrors.known(PATH) == (1, 5)
    assert mirrors.text(1, 5) == "a\nb\nc"
    assert mirrors.text(1, 6) is None
    assert mirrors.text(2, 5) is None


def test_an_unattached_buffer_is_never_seeded() -> None:
    mirrors = BufferMirrors()
    mirrors.seed(PATH, 1, 5, "a")
    assert mirrors.known(PATH) is None
    assert mirrors.text(1, 5) is None


def test_line_events_patch_the_copy_like_neovim_changed_the_buffer() -> None:
    mirrors = seeded("a\nb\nc\nd")
    mirrors.on_lines(1, 6, 1, 2, ["B", "B2"])  # replace b with two lines
    assert mirrors.text(1, 6) == "a\nB\nB2\nc\nd"
    mirrors.on_lines(1, 7, 0, 0, ["top"])  # insert above line 1
    mirrors.on_lines(1, 8, 4, 6, [])  # delete c and d
    assert mirrors.text(1, 8) == "top\na\nB\nB2"
    mirrors.on_lines(1, 9, 2, -1, ["end"])  # lastline -1: to the end
    assert mirrors.text(1, 9) == "top\na\nend"
    assert mirrors.known(PATH) == (1, 9)


def test_events_the_seed_already_holds_are_skipped() -> None:
    mirrors = seeded("a\nb", tick=10)
    mirrors.on_lines(1, 9, 0, 1, ["stale"])
    mirrors.on_lines(1, 10, 0, 1, ["stale"])
    assert mirrors.text(1, 10) == "a\nb"


def test_a_changedtick_event_moves_the_tick_only() -> None:
    mirrors = seeded()
    mirrors.on_changedtick(1, 7)
    assert mirrors.text(1, 7) == "a\nb\nc"
    assert mirrors.text(1, 5) is None


def test_an_event_without_tick_unseeds_and_detach_forgets() -> None:
    mirrors = seeded()
    mirrors.on_lines(1, None, 0, 1, ["preview"])
    assert mirrors.known(PATH) is None and mirrors.is_attached(1)
    mirrors.seed(PATH, 1, 8, "x")
    mirrors.on_detach(1)
    assert not mirrors.is_attached(1)
    assert mirrors.known(PATH) is None and mirrors.text(1, 8) is None
    mirrors.seed(PATH, 1, 9, "y")  # detached: no longer kept current, so not kept
    assert mirrors.text(1, 9) is None


def test_nul_bytes_shown_as_newlines_by_neovim_stay_nul_bytes() -> None:
    mirrors = seeded("a\nb")
    mirrors.on_lines(1, 6, 0, 1, ["x\ny"])
    assert mirrors.text(1, 6) == "x\0y\nb"


def test_events_for_other_buffers_change_nothing() -> None:
    mirrors = seeded()
    mirrors.on_lines(2, 6, 0, 1, ["other"])
    mirrors.on_changedtick(2, 9)
    mirrors.on_detach(2)
    assert mirrors.text(1, 5) == "a\nb\nc"
