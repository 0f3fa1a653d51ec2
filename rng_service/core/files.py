"""A new file written whole, with the mode asked for: the one way this code creates a file it
must not share with anything that was there before (a key's temporary file, a record).

``O_EXCL`` and ``O_NOFOLLOW`` refuse an existing file or a link planted at the name, and the mode
is set with ``fchmod`` before any byte is written, whatever the umask, so a private key is never
readable by others, not even for an instant.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

__all__ = ["write_exclusive"]

_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_exclusive(path: str | Path, data: bytes, mode: int, *, fsync: bool = False) -> None:
    """``data`` as the new file ``path`` (FileExistsError if it exists) with ``mode``, fsynced
    when ``fsync``; a failed write removes the part written."""
    fd = os.open(path, _CREATE, mode)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
