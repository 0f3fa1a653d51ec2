"""The currencies money may be in: the active codes of ISO 4217, each with its minor-unit exponent.

The list is the ``iso4217`` package's: the maintenance agency's published table (list one,
current codes), updated with each amendment, where a hand-kept table would silently age. Codes
the table lists without a minor unit (gold, silver, the SDR, the test code XTS) are refused:
an amount of minor units means nothing in them. Every boundary that takes a currency (the RPCs'
``currency`` fields, ``fairshoe play --currency``, the Node client through the RPCs) checks it
here, so they agree.

>>> exponent("EUR"), exponent("JPY"), exponent("KWD")
(2, 0, 3)
>>> check("XYZ")
Traceback (most recent call last):
...
rng_service.core.errors.InvalidInput: currency: must be an ISO 4217 ... such as EUR, got 'XYZ'
>>> units_text(-123456, 2), units_text(1234, 0), units_text(5, 3)
('-1,234.56', '1,234', '0.005')
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from iso4217 import Currency

from rng_service.core.errors import InvalidInput, quote

#: ISO 4217 code -> decimal places of its minor unit (EUR 2, JPY 0, KWD 3)
EXPONENTS: Final = MappingProxyType({
    c.code: c.exponent for c in Currency if c.exponent is not None})
_NO_MINOR_UNIT: Final = frozenset(c.code for c in Currency if c.exponent is None)


def exponent(code: str) -> int | None:
    """The decimal places of ``code``'s minor unit; None if it is no currency money may be in."""
    return EXPONENTS.get(code)


def problem(value: object) -> str | None:
    """What is wrong with ``value`` as a currency code, with a hint; None if it is one."""
    if isinstance(value, str) and value in EXPONENTS:
        return None
    if isinstance(value, str) and value in _NO_MINOR_UNIT:
        return (f"{quote(value)} has no minor unit in ISO 4217 (a metal or a unit of account): "
                "use a currency code such as EUR")
    if isinstance(value, str) and value.upper() in EXPONENTS:
        return f"must be an upper-case ISO 4217 code, got {quote(value)} (did you mean " \
               f"{value.upper()}?)"
    return f"must be an ISO 4217 currency code such as EUR, got {quote(value)}"


def check(value: object, field: str = "currency") -> str:
    """``value`` if it is an active ISO 4217 code with a minor unit, else ``InvalidInput``
    naming ``field``."""
    why = problem(value)
    if why is not None:
        raise InvalidInput(field, why)
    assert isinstance(value, str)
    return value


def units_text(minor: int, places: int) -> str:
    """An amount of minor units in currency units, with ``places`` decimals and thousands
    separated by commas (the exponent of the amount's currency)."""
    sign = "-" if minor < 0 else ""
    units, fraction = divmod(abs(minor), 10**places)
    return f"{sign}{units:,}" + (f".{fraction:0{places}d}" if places else "")
