from typing import Any

def sorted_form(data: bytes, depth: int, /) -> bool | tuple[int, int]: ...
def sorted_members(
    data: bytes,
    depth: int,
    names: tuple[bytes, ...],
    keys: tuple[str, ...],
    at: int,
    spelled: bytes,
    /,
) -> bool | tuple[int, int, dict[str, Any] | None, Any]: ...
