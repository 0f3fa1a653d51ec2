"""A collection's many files: each written once under a new name, all made durable together.

``collect rounds`` writes one file per signed envelope: tens of thousands of small files nobody
reads until the collection is finished. Writing each atomically (a temporary file, its fsync,
a rename, the directory's fsync) cost more than signing it; here each is created under its final
name (``O_EXCL``: never over an existing file) and written, and :meth:`DurableTree.sync` makes
every file of the tree durable at once, before the collection's log, which names them, is
written. What a crash can leave therefore is files without a log: a collection with no
checkpoint, possibly holding an empty or truncated file, which fails its audit (a truncated
envelope is malformed, not a different valid one); never a checkpoint naming a file that is not
on disk.

On Linux the sync is one ``syncfs(2)`` of the filesystem, on a descriptor opened before the first
file was written, so a writeback error on any of them since then is reported (Linux 5.8 and
later); elsewhere, or when a directory under the tree is on another filesystem, every file and
directory under the tree is fsynced. While files are still being written,
:meth:`DurableTree.start_sync` runs a ``syncfs`` on a background thread, so that the last one
finds little left to write.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Final

from rng_service.core.files import write_exclusive

#: a collection's files are world-readable (records are public; the key never goes there)
FILE_MODE: Final = 0o644


def write_new(path: str | Path, data: bytes) -> None:
    """``data`` as the new file ``path`` (FileExistsError if it exists), mode 0644 whatever the
    umask; not yet durable (:meth:`DurableTree.sync`). A failed write removes the part written."""
    write_exclusive(path, data, FILE_MODE)


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs``, where the C library has one (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return None
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    return syncfs


_SYNCFS: Final = _load_syncfs()


def _fsync_path(path: str, flags: int) -> None:
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: str) -> None:
    """Every regular file under ``root``, then every directory, fsynced (no ``syncfs``)."""
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                _fsync_path(path, os.O_RDONLY)
        _fsync_path(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def _one_filesystem(root: Path) -> bool:
    """Whether ``root`` and the directories under it are all on one filesystem."""
    device = os.stat(root).st_dev
    for directory, subdirectories, _ in os.walk(root):
        for name in subdirectories:
            if os.stat(os.path.join(directory, name)).st_dev != device:
                return False
    return True


class DurableTree:
    """A directory whose files :meth:`sync` makes durable. Open it before writing the first of
    them: ``syncfs`` reports the writeback errors since its descriptor was opened."""

    def __init__(self, root: Path, *, use_syncfs: bool = True) -> None:
        self.root = root
        # a directory under the root on another filesystem (mounted there) is beyond one syncfs
        self._syncfs = _SYNCFS if use_syncfs and _one_filesystem(root) else None
        self._fd = os.open(root, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_DIRECTORY", 0))
        self._closer = weakref.finalize(self, os.close, self._fd)
        self._background: threading.Thread | None = None
        self._failure: OSError | None = None

    def _sync_now(self) -> None:
        if self._syncfs is None:
            _fsync_tree(str(self.root))
            return
        if self._syncfs(self._fd) != 0:  # ctypes releases the GIL for the call
            code = ctypes.get_errno() or errno.EIO
            raise OSError(code, f"syncfs: {os.strerror(code)}", str(self.root))

    def _sync_in_background(self) -> None:
        try:
            self._sync_now()
        except OSError as exc:
            self._failure = exc

    def start_sync(self) -> None:
        """Start writing back what is written so far, on a background thread, unless a
        background sync is still running (or there is no ``syncfs``: the fallback walks the
        whole tree). Its failure is raised by :meth:`sync`."""
        if self._syncfs is None or (self._background is not None
                                    and self._background.is_alive()):
            return
        self._background = threading.Thread(target=self._sync_in_background,
                                             name="collection-sync", daemon=True)
        self._background.start()

    def sync(self) -> None:
        """Every file written under the root so far is on disk when this returns (OSError if
        the filesystem reports a write of it failed, now or in a background sync)."""
        if self._background is not None:
            self._background.join()
            self._background = None
        if self._failure is not None:
            raise self._failure
        self._sync_now()

    def close(self) -> None:
        """Release the descriptor (also done when the object is collected), after any
        background sync."""
        if self._background is not None:
            self._background.join()
            self._background = None
        self._closer()
