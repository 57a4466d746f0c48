"""Agents' process groups, and a kill that leaves no orphans.

Each agent runs in its own process group (``start_new_session``) so closing it
also ends whatever it spawned (shells, language servers, MCP servers). Every
live group is remembered so :func:`kill_all` can end them from ``atexit`` or a
signal handler, when no event loop is left to await anything. And since neither
runs when this process is killed outright, a reaper outlives it: a small shell
in a session of its own that holds every live group and SIGKILLs them once this
process is gone (its end of the reaper's stdin closes, however it ended).
The commands Neovim runs in terminals for agents are held the same way
(acp_nvim/nvim/terminal_groups.py), so that they end with Neovim however it ends.
So is the editor MCP server's socket directory: the reaper removes it, since the
host that made it cannot (decision 0087).

A group is signalled only while it is known to be ours (decision 0036): once
its leader is reaped, its pid may be handed to a stranger. Where the kernel
signals a group through the leader's pidfd (Linux 6.9), the group is named by
the process itself, never by a number, so it stays reachable after the leader
exits; elsewhere a group is signalled while its leader is unreaped (its pidfd
tells, else the exit code not yet collected) and dropped the moment it is. The
reaper, a shell holding numbers, lets go of a group when its leader is reaped.

No event loop here: the first agent is spawned and held before the host imports
one (acp_nvim/client/agent/first.py).
"""

from __future__ import annotations

__all__ = ["Group", "hold_directory", "kill_all", "let_go_of_directory"]

import errno
import os
import signal
import subprocess
from functools import cache
from typing import Protocol


class Leader(Protocol):
    """What a group needs of its leader's process (a Popen or an anyio Process)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...


_live_groups: dict[int, Group] = {}  # by the leader's pid
# Lines on stdin: a group id to hold, or -id to let go; an absolute path (a directory
# of ours) to hold, or -path to let go. At EOF it kills the groups it holds, then
# removes the directories. Builtins only: it forks nothing while it runs (a fork
# would take a pid). Paths are kept one a line, never globbed.
_REAPER = """
trap '' HUP INT TERM
set -f
nl='
'
groups=""
dirs=""
while IFS= read -r line; do
  case "$line" in
    -/*) kept=""; IFS=$nl; for d in $dirs; do [ "$d" = "${line#-}" ] || kept="$kept$nl$d"; done
         unset IFS; dirs=$kept ;;
    /*) dirs="$dirs$nl$line" ;;
    -*) kept=""; for g in $groups; do [ "$g" = "${line#-}" ] || kept="$kept $g"; done
        groups=$kept ;;
    *) groups="$groups $line" ;;
  esac
done
for pg in $groups; do kill -s KILL -- "-$pg" 2>/dev/null; done
IFS=$nl
[ -z "$dirs" ] || rm -rf -- $dirs
"""
_reaper: subprocess.Popen[bytes] | None = None


def kill_all() -> None:
    """SIGKILL every agent process group still alive (for atexit and signals)."""
    for group in list(_live_groups.values()):
        group.signal(signal.SIGKILL)
        group.drop()


def hold_directory(path: str) -> None:
    """Have the reaper remove ``path``, a directory this process made, if this
    process is killed outright. :func:`let_go_of_directory` before removing it:
    once gone, its name may be made again by someone else."""
    if os.path.isabs(path) and "\n" not in path:  # one line, never a group's
        _tell_reaper(path)


def let_go_of_directory(path: str) -> None:
    """The reaper no longer removes ``path``."""
    if os.path.isabs(path) and "\n" not in path:
        _tell_reaper(f"-{path}")


def _tell_reaper(line: str) -> None:
    """Hand the reaper a group (``"123"``) or a directory (``"/tmp/x"``), or take it
    back (``"-123"``, ``"-/tmp/x"``)."""
    global _reaper
    try:
        if _reaper is None or _reaper.poll() is not None:
            _reaper = subprocess.Popen(
                ["/bin/sh", "-c", _REAPER],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", os.defpath)},  # it needs nothing else
            )
        assert _reaper.stdin is not None
        _reaper.stdin.write(os.fsencode(line) + b"\n")
        _reaper.stdin.flush()
    except OSError:
        pass  # no reaper: kill_all and aclose still end the groups on a normal exit


# pidfd_send_signal's flag for "the process group of this process" (Linux 6.9).
_PIDFD_SIGNAL_PROCESS_GROUP = 4
# Whether this kernel takes that flag; None until the first try.
_pidfd_groups: bool | None = None


@cache
def _has_pidfds() -> bool:
    """Whether this system has pidfds (Linux 5.3 and later): asked once."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def _child_pidfd(pid: int, parent: int) -> int | None:
    """A pidfd of ``parent``'s child ``pid``; None where there are no pidfds (not
    Linux, or before 5.3) or when it has exited and been reaped already (asyncio
    reaps at once): then the number may be a stranger's, which its parent says."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            found = int(f.read().rsplit(b")", 1)[1].split()[1])
        signal.pidfd_send_signal(fd, 0)  # still the process read above
    except (OSError, ValueError, IndexError):
        found = -1
    if found == parent:
        return fd
    os.close(fd)
    return None


class Group:
    """The process group an agent leads, signalled only while known to be ours.

    Args:
        process: the leader, our child unless ``parent`` says whose (a command
            Neovim runs in a terminal): then ``parent`` reaps it, and its end is
            not seen here (:meth:`drop` the group when ``parent`` reports it).
    """

    def __init__(self, process: Leader, parent: int | None = None) -> None:
        self.pid = process.pid
        self._process = process
        self._held = False  # by the reaper
        self._pidfd = _child_pidfd(self.pid, os.getpid() if parent is None else parent)

    def __repr__(self) -> str:
        return f"<Group {self.pid} pidfd={self._pidfd}>"

    def hold(self) -> None:
        """Remember the group, and hand it to the reaper."""
        _live_groups[self.pid] = self
        self._held = True
        _tell_reaper(str(self.pid))

    def _let_go(self) -> None:
        if self._held:
            self._held = False
            _tell_reaper(f"-{self.pid}")

    @property
    def vouched(self) -> bool:
        """Whether the leader is known to be the child it was said to be: a pidfd
        holds it, taken while it was; where this system has no pidfds, its number is
        all there is (see the module docstring). False for one reaped already."""
        return self._pidfd is not None or not _has_pidfds()

    @property
    def named_by_pidfd(self) -> bool:
        """Whether the kernel signals this group through the leader's pidfd: then
        it reaches the group's own members even after the leader is reaped."""
        return self._pidfd is not None and _pidfd_groups is not False

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the group, if it is still ours (see the module docstring)."""
        global _pidfd_groups
        if self._pidfd is not None:
            if _pidfd_groups is not False:
                try:
                    signal.pidfd_send_signal(self._pidfd, sig, None, _PIDFD_SIGNAL_PROCESS_GROUP)
                    _pidfd_groups = True
                    return
                except OSError as err:
                    if err.errno != errno.EINVAL or _pidfd_groups:
                        return  # ESRCH: none of the group is left
                    _pidfd_groups = False  # a kernel before 6.9
            try:
                signal.pidfd_send_signal(self._pidfd, 0)  # a zombie leader counts
            except OSError:
                return  # reaped: its pid may be anyone's now
        elif self._process.returncode is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reaped(self) -> None:
        """The leader was reaped: the reaper lets go of its pid; only a group named
        by the pidfd is still signalled (by :meth:`AgentProcess.aclose` and
        :func:`kill_all`)."""
        if self.named_by_pidfd:
            self._let_go()
        else:
            self.drop()

    def drop(self) -> None:
        """Forget the group: no more signals to it, from here or the reaper."""
        self._let_go()
        if _live_groups.get(self.pid) is self:
            del _live_groups[self.pid]
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
