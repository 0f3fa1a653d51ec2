"""The walk over the paths audited (:func:`walk_paths`): which files are read, and how strictly.

Every file named is read (a link to it followed: the auditor named it), and so is every file in a
record directory; elsewhere only ``*.json`` files. A record directory is a ``rounds/`` or
``reveals/`` (or other record) directory that is not itself laid out as a collection root, and
everything below it up to the next collection root. Below a directory named nothing is followed: a
symbolic link, a FIFO or other special file, a directory inside a record directory and a directory
more than :data:`MAX_DIR_DEPTH` deep are entries with a problem (FAIL lines), never read. A
collection root's ``log/`` is an entry for the log checks, not read here.

A directory's names are taken in sorted order without being held all at once
(:func:`rng_service.audit.spill.sorted_entries`: sorted runs of them merged from temporary
files, each with the file type the listing gave, so a record file costs no ``stat`` of its own),
so a directory of a million records costs the walk the same memory as one of a thousand.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple

from rng_service.audit.failures import AuditInputError
from rng_service.audit.files import child_path, file_type
from rng_service.audit.log_lines import LEAF_DIRS
from rng_service.audit.spill import sorted_entries
from rng_service.core.text import token
from rng_service.records.schema import LOG_SUBDIR, RULES_SUBDIR

#: directories whose every file must be a signed envelope
_RECORD_DIRS: Final = frozenset(LEAF_DIRS.values())
#: what a collection root holds beside its keys copy: how one is told from a record directory
_LAYOUT_DIRS: Final = (*sorted(_RECORD_DIRS), RULES_SUBDIR, LOG_SUBDIR)
#: how deep the walk goes below a directory named on the command line
MAX_DIR_DEPTH: Final = 32


class Entry(NamedTuple):
    """A file the walk found: read it (``strict``: it must be an envelope or a rules document),
    or, with ``problem``, fail it unread (a link, a FIFO, a directory where records lie). (A
    named tuple: the audit's own process makes one for every file, at a third of a frozen
    dataclass's cost.)"""

    path: Path
    strict: bool
    problem: str | None = None
    follow: bool = False
    log: bool = False  # the log/ directory of a collection root: for the log checks, not read

    def __reduce__(self) -> tuple[Any, ...]:
        # sent to the audit's workers: the path as text (a pickled Path is rebuilt from its
        # parts, at twice the cost)
        return (_entry, (str(self.path), self.strict, self.problem, self.follow, self.log))


def _entry(path: str, strict: bool, problem: str | None, follow: bool, log: bool) -> Entry:
    return Entry(Path(path), strict, problem, follow, log)


def walk_paths(paths: Iterable[Path]) -> Iterator[Entry]:
    """Every file named, and the files under every directory: all of them in a record directory,
    ``*.json`` elsewhere. A strict file must be a signed envelope or a rules document: it is named
    explicitly or lies in a record directory (:func:`_strict_below`). Below a directory named,
    nothing is followed: a symbolic link, a FIFO or any other special file, and a directory inside
    a record directory, is an entry with a problem (a FAIL line), never read and never skipped."""
    for path in paths:
        try:
            mode = path.stat().st_mode  # what the auditor names is followed
        except OSError:
            raise AuditInputError(f"{token(str(path))}: no such file or directory") from None
        if stat.S_ISDIR(mode):
            # the name of a directory passed itself counts (``lab/rounds`` given alone), hence
            # absolute(): ``.`` has no name of its own
            yield from _walk(path, path.absolute().name, inherited=False, depth=0)
        else:
            yield Entry(path, strict=True, follow=True)  # _read refuses a non-regular file


def _is_dir(path: Path) -> bool:
    """A real directory (not a link to one)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _is_collection(directory: Path) -> bool:
    """Laid out as a collection root (``RecordWriter``): it holds a rounds/, reveals/ or rules/
    directory. A record directory holds envelopes only, so it never looks like one."""
    return any(_is_dir(directory / name) for name in _LAYOUT_DIRS)


def _strict_below(directory: Path, name: str, inherited: bool) -> bool:
    """Whether the files in ``directory`` must be envelopes. Roles are judged relative to the
    nearest collection root, never from a name anywhere in the path: a collection may be called
    ``rounds`` or kept under ``reveals/``, and its keys copy must still be passed over."""
    if _is_collection(directory):
        return False
    return inherited or name in _RECORD_DIRS


def _walk(directory: Path, name: str, inherited: bool, depth: int) -> Iterator[Entry]:
    strict = _strict_below(directory, name, inherited)
    try:
        names = sorted_entries(directory)
    except OSError as exc:
        yield Entry(directory, True, f"cannot be listed: {exc.strerror}")
        return
    root = _is_collection(directory)
    for child, regular in names:
        if root and child == LOG_SUBDIR:
            yield Entry(child_path(directory, child), False, log=True)  # the log checks read
            # it, link or not
        elif regular:
            # a record file, the common case, judged here: no generator of its own, and the
            # suffix read from the name as Path.suffix reads it (".json" alone has none)
            if strict or (child.endswith(".json") and len(child) > len(".json")):
                yield Entry(child_path(directory, child), strict)
        else:
            yield from _classify(child_path(directory, child), strict, depth, regular)




def _classify(entry: Path, strict: bool, depth: int, regular: bool) -> Iterator[Entry]:
    """What the walk makes of one entry of a directory: ``regular`` if the listing said it is a
    regular file (its reading checks that again, on the file it opens), else it is looked at."""
    try:
        mode = stat.S_IFREG if regular else entry.lstat().st_mode
    except OSError as exc:
        yield Entry(entry, True, f"cannot be read: {exc.strerror}")
        return
    if stat.S_ISLNK(mode):
        yield Entry(entry, True, "is a symbolic link: links are never followed (put what it "
                     "points to in the collection itself)")
    elif stat.S_ISDIR(mode):
        if strict and not _is_collection(entry):
            yield Entry(entry, True, "is a directory inside a record directory, which holds "
                         "signed envelopes only: not read")
        elif depth >= MAX_DIR_DEPTH:
            yield Entry(entry, True, f"is more than {MAX_DIR_DEPTH} directories deep: not read")
        else:
            yield from _walk(entry, entry.name, strict, depth + 1)
    elif stat.S_ISREG(mode):
        if strict or entry.suffix == ".json":
            yield Entry(entry, strict)
    else:
        yield Entry(entry, True, f"is {file_type(mode)}, not a regular file: not read")


def may_hold_log(paths: Iterable[Path]) -> bool:
    """Whether :func:`walk_paths` of ``paths`` may find a collection root's ``log/`` (an entry
    for the log checks), told before the walk by listing every real directory below each
    directory named, as deep as the walk goes: a ``log`` anywhere there, of any type, or a
    directory that cannot be listed, answers True. It may answer True where the walk finds
    none, never False where it finds one (of a collection unchanged meanwhile): the audit keeps
    what the log checks need of every file (its leaf) only if they may run."""
    for path in paths:
        try:
            named_dir = stat.S_ISDIR(path.stat().st_mode)  # followed, as the walk follows it
        except OSError:
            continue  # the walk refuses it before reading anything
        if named_dir and _holds_log(path, 0):
            return True
    return False


def _holds_log(directory: Path | str, depth: int) -> bool:
    """:func:`may_hold_log` of one directory the walk may list, ``depth`` below the one named."""
    below: list[str] = []
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.name == LOG_SUBDIR:
                    return True
                if entry.is_dir(follow_symlinks=False):  # a link is never followed below
                    below.append(entry.path)
    except OSError:
        return True  # not known: the walk may list it
    return depth < MAX_DIR_DEPTH and any(_holds_log(child, depth + 1) for child in below)
