"""Untrusted text made safe to print: one physical line, nothing a terminal would act on.

A file name or a string from a record can hold a newline (and fake a line of a report after it),
other control characters, bidirectional overrides (which reorder what a reader sees), or lone
surrogates (which no encoder accepts, so printing one crashes). :func:`escape` writes each such
character as a Python-style escape; :func:`token` leaves a plain name bare and quotes anything
else, so the escaped form of a name can never be read as another name.

>>> escape("a\\nb\\u202ec\\ud800")
'a\\\\nb\\\\u202ec\\\\ud800'
>>> token("rounds/ab12.json"), token("x y"), token("audit PASS\\n")
('rounds/ab12.json', '"x y"', '"audit PASS\\\\n"')
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["escape", "token"]

_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: what may be printed bare: path and identifier characters only
_PLAIN: Final = re.compile(r"[A-Za-z0-9._/:+@=~,\[\]-]+")


def _escaped(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape(text: str, *, backslash: bool = True) -> str:
    """``text`` with every character that is not printable (controls, line and paragraph
    separators, format characters such as bidi overrides, surrogates, unassigned code points)
    escaped; with ``backslash``, a backslash is doubled too, so the escaping can be undone."""
    if text.isprintable() and (not backslash or "\\" not in text):
        return text  # the common case: nothing to do
    out = []
    for char in text:
        if char == "\\" and backslash:
            out.append("\\\\")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(_escaped(char))
    return "".join(out)


def token(text: str) -> str:
    """``text`` bare if it is a plain name or path, else double-quoted and escaped."""
    if _PLAIN.fullmatch(text):
        return text
    return '"' + escape(text).replace('"', '\\"') + '"'
