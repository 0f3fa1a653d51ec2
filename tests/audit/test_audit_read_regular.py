"""A file read in one C call (rng_service/audit/_read_regular.c, files.read_file) held to the
reading through os it replaced (files.read_file_os): the same bytes, or the same refusal in the
same words, on every kind of file the audit may be given."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rng_service.audit import files
from rng_service.audit.files import Unreadable, read_file, read_file_os

Reader = Callable[[Path, bool, int], bytes]


def outcome(reader: Reader, path: Path, follow: bool, limit: int) -> bytes | str:
    try:
        return reader(path, follow, limit)
    except Unreadable as exc:
        return f"Unreadable: {exc}"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    made = {}
    for name, size in (("empty", 0), ("small", 1166), ("chunk", 4096), ("over_chunk", 4097),
                       ("big", 100_000)):
        path = tmp_path / name
        path.write_bytes(bytes(i % 251 for i in range(size)))
        made[name] = path
    made["dir"] = tmp_path / "dir"
    made["dir"].mkdir()
    made["fifo"] = tmp_path / "fifo"
    os.mkfifo(made["fifo"])
    made["link"] = tmp_path / "link"
    made["link"].symlink_to(made["small"])
    made["dangling"] = tmp_path / "dangling"
    made["dangling"].symlink_to(tmp_path / "nowhere")
    made["missing"] = tmp_path / "missing"
    made["not_a_dir"] = made["small"] / "below"
    made["proc"] = Path("/proc/version")  # a regular file fstat calls empty: read past its size
    return made


@pytest.mark.parametrize("name", ["empty", "small", "chunk", "over_chunk", "big", "dir", "fifo",
                                  "link", "dangling", "missing", "not_a_dir", "proc"])
@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("limit", [0, 5, 1166, 4096, 4097, 1 << 20])
def test_the_c_reading_is_the_os_one(tree: dict[str, Path], name: str, follow: bool,
                                     limit: int) -> None:
    assert files._read_regular is not None, "built with the package"
    path = tree[name]
    expected = outcome(read_file_os, path, follow, limit)
    assert outcome(read_file, path, follow, limit) == expected
    assert outcome(read_file, Path(str(path)), follow, limit) == expected


def test_what_it_reads_and_refuses(tree: dict[str, Path]) -> None:
    """The outcomes the comparison above covers, spelled out (so it cannot pass on two
    readers that both fail alike)."""
    assert read_file(tree["small"]) == tree["small"].read_bytes()
    assert read_file(tree["big"]) == tree["big"].read_bytes() and read_file(tree["empty"]) == b""
    assert read_file(tree["link"], follow=True) == tree["small"].read_bytes()
    for name, message in (("dir", "is a directory, not a regular file"),
                          ("fifo", "is a FIFO, not a regular file"),
                          ("link", "cannot be read: Too many levels of symbolic links"),
                          ("missing", "cannot be read: No such file or directory"),
                          ("not_a_dir", "cannot be read: Not a directory")):
        with pytest.raises(Unreadable, match=f"^{message}$"):
            read_file(tree[name])
    with pytest.raises(Unreadable, match=r"^is 100000 bytes, more than 4096$"):
        read_file(tree["big"], limit=4096)
    with pytest.raises(Unreadable, match=r"^is more than 5 bytes$"):
        read_file(tree["proc"], limit=5)
    assert read_file(tree["proc"]) == Path("/proc/version").read_bytes()
