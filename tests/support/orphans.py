"""A killed parent's worker processes, read from /proc: which they are, and waiting (bounded,
by polling) until none is left alive. A process is told by its pid and its start time, so a pid
the kernel gives to another process later is not taken for it; a zombie (ended, not yet reaped:
an orphan's new parent may be slow to, or never, reap it) counts as gone."""

from __future__ import annotations

from pathlib import Path

from support.waits import wait_until

#: how long a killed parent's workers may take to end: a liveness bound, far past the moment
#: they take (a hung or orphaned worker never ends), not a measure of speed
GONE_SECONDS = 60.0


def children(pid: int) -> list[tuple[int, str]]:
    """``pid``'s children now, each as (pid, start time), whichever of its threads forked it
    (a pool forks a replacement worker from a thread of its own)."""
    found: list[tuple[int, str]] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            listed = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended since the listing: it has no children now
        for child in listed:
            start = _start_time(int(child))
            if start is not None:
                found.append((int(child), start))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` runs now: neither ended nor a zombie (for a process known by its pid
    alone, whose pid is not reused while the test looks: its parent has not reaped it, or has
    just done so)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in "ZX"


def alive(process: tuple[int, str]) -> bool:
    """Whether ``process`` (pid, start time) still runs: neither ended nor a zombie."""
    pid, start = process
    stat = _stat(pid)
    return stat is not None and stat[0] not in "ZX" and stat[19] == start


def stopped(process: tuple[int, str]) -> bool:
    """Whether ``process`` is stopped (SIGSTOP), its stop taken effect."""
    stat = _stat(process[0])
    return stat is not None and stat[0] == "T" and stat[19] == process[1]


def wait_gone(processes: list[tuple[int, str]], what: str) -> None:
    """Until none of ``processes`` is alive; an assertion error naming ``what`` and those left
    after :data:`GONE_SECONDS`."""
    try:
        wait_until(lambda: not any(alive(p) for p in processes), what, GONE_SECONDS)
    except AssertionError as exc:
        left = [pid for pid, start in processes if alive((pid, start))]
        raise AssertionError(f"{exc}; still alive: {left}") from None


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state first), or None: a
    process reaped before the open has no file (FileNotFoundError), one reaped between the open
    and the read has no content (ProcessLookupError)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2:].split()


def _start_time(pid: int) -> str | None:
    stat = _stat(pid)
    return None if stat is None else stat[19]
