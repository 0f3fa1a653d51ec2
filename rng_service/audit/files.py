"""What every part of the offline audit shares: findings and their lines, values shown safely,
files read bounded, and the per-file time bound.

A finding is the verdict on one input (a record, a reveal, a rules document, a line of the log's
files); :meth:`Finding.line` prints it as one escaped physical line whatever it holds. Files are
read only if regular, opened without blocking or following a link put in their place, and within a
byte bound (:func:`read_file`, :func:`open_regular`); :class:`FileClock` bounds the time one
input's checks may take.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, Final

from rng_service.audit.checks import Named
from rng_service.core.errors import quote
from rng_service.core.json_input import DEFAULT_LIMITS
from rng_service.core.text import escape, token

#: the largest file read (a round record is a few KB); bigger ones fail unread
MAX_FILE_BYTES: Final = DEFAULT_LIMITS.max_bytes
#: the least bytes asked of the OS per read of a file (a record fits in one)
_READ_CHUNK: Final = 4096
#: the most characters of an id, a field or a value a report line shows
SHOWN_CHARS: Final = 120

_read_regular: Callable[[Path, bool, int], bytes | tuple[int, int]] | None
try:  # a file read in one call in C, built with the package (pyproject's ext-modules)
    from rng_service.audit._read_regular import read_regular as _built_read_regular
except ImportError:  # pragma: no cover - a build without a compiler reads through os
    _read_regular = None
else:
    _read_regular = _built_read_regular


class Status(StrEnum):
    """A finding's verdict: passed, failed, could not be checked because what it depends on (a
    round's shoe, a draw's seed) was not revealed, or is of a shoe still in play (committed, not
    finished: its reveal is not due yet, so the round is checked by a later audit)."""

    OK = "OK"
    FAIL = "FAIL"
    UNREVEALED = "UNREVEALED"
    OPEN = "OPEN"


def clip(text: str) -> str:
    """``text`` cut to :data:`SHOWN_CHARS` characters (with ``...`` if it was longer)."""
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def tok(value: object) -> str:
    """A name from outside (a path, an id, a commitment) for a message: bare if plain, else
    quoted and escaped (:func:`rng_service.core.text.token`); a value from a record clipped."""
    return token(str(value) if isinstance(value, Path) else clip(str(value)))


def show(value: object) -> str:
    """A value from a record for a message: JSON, clipped, with nothing unprintable left raw."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = quote(value)
    return escape(clip(text), backslash=False)


@dataclass(frozen=True, init=False)
class Finding:
    """The verdict on one input: a round record, a shoe reveal, a key or commitment record, a
    leaf or a file of the log, or a file that is none of these."""

    kind: str  # round | shoe | rules | file | rng | rng-reveal | key | commitment | leaf | log
    ident: str
    path: Path
    status: Status
    field: str | None = None
    message: str = ""
    void: bool = False  # a round that passed as void: its stakes were returned
    #: the name of the check that wrote the finding (:data:`rng_service.audit.checks.CHECKS`);
    #: not printed, so the lines stay what they were, and not compared
    check: str = dataclasses.field(default="", compare=False)

    def __init__(self, kind: str, ident: str, path: Path, status: Status,  # noqa: PLR0917
                 field: str | None = None, message: str = "", void: bool = False,
                 check: str = "") -> None:  # (the dataclass's own signature, positions too)
        # the generated __init__ of a frozen dataclass, its members set at once: that one sets
        # each through object.__setattr__, 11,000 instructions a finding, and the audit makes
        # one for every record and reveal (tests/audit/test_audit_paths.py holds the two alike)
        object.__setattr__(self, "__dict__", {
            "kind": kind, "ident": ident, "path": path, "status": status, "field": field,
            "message": message, "void": void, "check": check})

    def line(self) -> str:
        """The finding as one printable line: the id and field are tokens (bare if plain, else
        quoted and escaped), and whatever else is not printable is escaped."""
        ident = token(clip(self.ident))
        if self.status is Status.OK:
            text = f"OK   {self.kind} {ident}  {self.message}".rstrip()
        else:
            where = f"{token(clip(self.field))} " if self.field else ""
            text = f"{self.status.value} {self.kind} {ident}: {where}{self.message}"
        return escape(text, backslash=False)


# --- the per-file time bound ---------------------------------------------------------------------


class FileTimeout(BaseException):
    """One file's checks ran past the per-file bound (a BaseException: no ``except Exception``
    on the way may swallow it)."""


class FileClock(Named):
    """The per-file time bound: :meth:`bound` bounds one file's checks by a SIGALRM timer; an
    input whose checks ran past it fails unchecked (:meth:`too_slow_finding`).

    The timer is not set and cleared around every file (two system calls a file, a few
    microseconds of every record): entering a bound notes its deadline, and arms the timer only
    if none is pending; when the timer fires, the handler raises :class:`FileTimeout` if the
    bound it is in has passed its deadline, re-arms for what is left of it if not, and does
    nothing between bounds. A bound thus ends exactly as one armed afresh would."""

    name = "time-bound"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._enabled = False
        self.too_slow = f"not checked: its checks took longer than {seconds:g} s"
        #: in a bound, and until when (time.monotonic); whether the timer is pending
        self._inside = False
        self._deadline = 0.0
        self._pending = False
        self._bound = _Bound(self)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The SIGALRM handler for the audit's duration (main thread only; else no bound)."""
        if self.seconds <= 0 or threading.current_thread() is not threading.main_thread():
            yield
            return
        old = signal.signal(signal.SIGALRM, self._expired)
        self._enabled = True
        _CLOCKS.add(self)
        try:
            yield
        finally:
            self._enabled = self._inside = False  # a firing still to be handled re-arms nothing
            signal.setitimer(signal.ITIMER_REAL, 0)
            if old is signal.SIG_DFL:
                # Disarming does not withdraw an alarm the timer raised already and that is
                # not yet delivered (held while a thread blocks it; valgrind holds signals so):
                # under the default action it would end the process (exit -14). Ignoring the
                # signal discards it, process-wide, before the default is back.
                signal.signal(signal.SIGALRM, signal.SIG_IGN)
            signal.signal(signal.SIGALRM, old)
            self._pending = False
            _CLOCKS.discard(self)

    def too_slow_finding(self, kind: str, ident: str, path: Path) -> Finding:
        """The FAIL finding on an input whose checks ran past the bound."""
        return Finding(kind, ident, path, Status.FAIL, message=self.too_slow, check=self.name)

    def _expired(self, signum: int, frame: object) -> None:
        """The timer fired: past the bound's deadline, FileTimeout; before it, the timer set
        again for the rest; between bounds, nothing (the next bound arms it)."""
        if self._inside:
            left = self._deadline - time.monotonic()
            if left <= 0:
                self._pending = False
                raise FileTimeout
            signal.setitimer(signal.ITIMER_REAL, left)
            return
        self._pending = False

    def _forked(self) -> None:
        """In a forked child: no timer is pending there (a child inherits none)."""
        self._pending = False

    def bound(self) -> contextlib.AbstractContextManager[None]:
        """Raise :class:`FileTimeout` in the body once it has run for ``seconds``."""
        return self._bound if self._enabled else _UNBOUND


class _Bound(contextlib.AbstractContextManager[None]):
    """A clock's bound (:meth:`FileClock.bound`): made once, entered for every file."""

    __slots__ = ("clock",)

    def __init__(self, clock: FileClock) -> None:
        self.clock = clock

    def __enter__(self) -> None:
        clock = self.clock
        clock._deadline = time.monotonic() + clock.seconds
        clock._inside = True  # before the timer is looked at: a firing now sees the deadline
        if not clock._pending:
            clock._pending = True
            signal.setitimer(signal.ITIMER_REAL, clock.seconds)

    def __exit__(self, *exc: object) -> None:
        self.clock._inside = False


#: the bound when no timer is installed (not the main thread, or no bound asked for)
_UNBOUND: Final = contextlib.nullcontext()
#: the clocks installed: a forked child (the audit's workers) has no pending timer
_CLOCKS: Final[weakref.WeakSet[FileClock]] = weakref.WeakSet()


def _after_fork() -> None:
    for clock in list(_CLOCKS):
        clock._forked()


os.register_at_fork(after_in_child=_after_fork)


# --- reading files -------------------------------------------------------------------------------


#: PurePath's own constructor of a child from a name known to be one component (what
#: ``Path.iterdir`` makes its entries with), where the running Python has it: a quarter of the
#: cost of ``directory / name``, which parses the name again, and a sixth of ``Path(text)``'s
#: (the audit makes a Path for most files it reads, and for most of its lines)
_CHILD: Final = getattr(Path, "_make_child_relpath", None)
#: the directory of the last path :func:`text_path` made, as text and as a Path
_last_directory: tuple[str, Path] = ("", Path())


def child_path(directory: Path, name: str) -> Path:
    """``directory / name`` for a name that is one component (no ``/``, not ``.``: a name a
    directory listing gave), made without parsing it again where the running Python allows."""
    if _CHILD is None:
        return directory / name
    made: Path = _CHILD(directory, name)
    return made


def text_path(text: str) -> Path:
    """``Path(text)`` for the text of a Path (``str(path)``, kept as text in the scratch store
    or sent to a worker): the directory's Path is made once for the files of one directory in
    a row (a round's finding, a reveal's line), each file's from it (:func:`child_path`)."""
    global _last_directory  # noqa: PLW0603 (one directory remembered, per process)
    head, _, name = text.rpartition("/")
    if not head or head.endswith("/") or not name:  # "/x", "x", "//x": made as given
        return Path(text)
    known, directory = _last_directory
    if known != head:
        directory = Path(head)
        _last_directory = (head, directory)
    return child_path(directory, name)



def file_type(mode: int) -> str:
    """What a file of ``mode`` is, for a message ("a FIFO", "a directory", ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


class Unreadable(Exception):
    """A file that cannot be read as a record: not a regular file, too big, or an OS error."""


def _open_fd(path: Path, follow: bool) -> tuple[int, int]:
    """``path`` opened as a file descriptor, and its size, if it is a regular file;
    :class:`Unreadable` otherwise (see :func:`open_regular`)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise Unreadable(f"cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"is {file_type(info.st_mode)}, not a regular file")
    except OSError as exc:
        os.close(fd)
        raise Unreadable(f"cannot be read: {exc.strerror}") from None
    except BaseException:  # Unreadable, or the per-file time bound
        os.close(fd)
        raise
    return fd, info.st_size


def open_regular(path: Path, follow: bool = False) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; :class:`Unreadable` otherwise.
    Opened without blocking (a FIFO put in place of a file cannot hang the audit) and, unless
    ``follow``, without following a link put in place of it."""
    fd, _ = _open_fd(path, follow)
    try:
        return os.fdopen(fd, "rb")
    except OSError as exc:
        os.close(fd)
        raise Unreadable(f"cannot be read: {exc.strerror}") from None


def is_state_file(path: Path) -> bool:
    """True if ``path`` holds a JSON object (an audit state, :mod:`rng_service.audit.state`),
    not a checkpoint note (whose first line is its origin): what ``--since`` was given.
    Unreadable: False (the note reader says why)."""
    try:
        with path.open("rb") as fh:
            start = fh.read(64)
    except OSError:
        return False
    return start.lstrip().startswith(b"{")


def read_file(path: Path, follow: bool = False, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (:func:`open_regular`);
    :class:`Unreadable` otherwise.

    The same system calls as :func:`read_file_os` (the reference, and the reading of a build
    without the C extension) made in one call to C (``_read_regular``): the audit reads every
    file it is given, and the four calls into ``os`` and the stat result cost about 24,000
    instructions a file (tests/audit/test_audit_read_regular.py holds the two alike)."""
    if _read_regular is None:
        return read_file_os(path, follow, limit)
    try:
        read = _read_regular(path, follow, limit)
    except OSError as exc:
        raise Unreadable(f"cannot be read: {exc.strerror}") from None
    if type(read) is bytes:
        return read
    mode, size = read
    if not stat.S_ISREG(mode):
        raise Unreadable(f"is {file_type(mode)}, not a regular file")
    if size >= 0:
        raise Unreadable(f"is {size} bytes, more than {limit}")
    raise Unreadable(f"is more than {limit} bytes")


def read_file_os(path: Path, follow: bool = False, limit: int = MAX_FILE_BYTES) -> bytes:
    """:func:`read_file` through ``os``: read from the descriptor itself, not through a file
    object (a buffered file object's making costs three times that)."""
    fd, size = _open_fd(path, follow)
    try:
        if size > limit:
            raise Unreadable(f"is {size} bytes, more than {limit}")
        parts: list[bytes] = []
        total = 0
        # to the end of the file, or one byte past the limit (a file that grew since fstat)
        while total <= limit:
            part = os.read(fd, min(limit + 1 - total, max(size + 1, _READ_CHUNK)))
            if not part:
                break
            parts.append(part)
            total += len(part)
    except OSError as exc:
        raise Unreadable(f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise Unreadable(f"is more than {limit} bytes")
    return parts[0] if len(parts) == 1 else b"".join(parts)  # one part, or none: empty
