"""quick_init: the same frozen dataclass, only a cheaper __init__ (rng_service/core/frozen.py)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest

from rng_service.core.frozen import quick_init, quick_replace
from rng_service.service import observe, ports, round_parts, views


def _pair() -> tuple[type[Any], type[Any]]:
    """One frozen dataclass twice: as dataclasses make it, and with quick_init's __init__."""

    def make() -> type[Any]:
        @dataclass(frozen=True)
        class Sample:
            a: int
            b: str = "b"
            c: list[int] = field(default_factory=lambda: [1])
            d: int = field(default=4, init=False)
            e: list[str] = field(default_factory=list, init=False)
            f: tuple[int, ...] = ()

            def __post_init__(self) -> None:
                if self.a < 0:
                    raise ValueError("a must not be negative")

        return Sample

    return make(), quick_init(make())


@pytest.mark.parametrize("args, kwargs", [
    ((1,), {}),
    ((1, "x"), {}),
    ((1, "x", [2, 3]), {}),
    ((1,), {"f": (5,)}),
    ((), {"a": 2, "c": [], "b": "y"}),
    ((1, "x", [9], (7, 8)), {}),
])
def test_the_same_values_as_the_dataclass_init(args: tuple[Any, ...], kwargs: dict[str, Any]
                                               ) -> None:
    plain, quick = _pair()
    want, got = plain(*args, **kwargs), quick(*args, **kwargs)
    assert vars(got) == vars(want)
    assert repr(got) == repr(want).replace(plain.__qualname__, quick.__qualname__)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)
    assert got == quick(*args, **kwargs) and hash(got.f) == hash(want.f)


def test_each_default_factory_is_called_per_instance() -> None:
    _, quick = _pair()
    one, two = quick(1), quick(1)
    assert one.c == [1] and one.c is not two.c and one.e == [] and one.e is not two.e
    # a plain init=False default stays the class attribute, as dataclasses leave it
    assert "d" not in vars(one) and one.d == 4


def test_the_same_signature_errors_and_post_init() -> None:
    plain, quick = _pair()
    assert [p.name for p in inspect.signature(quick).parameters.values()] == [
        p.name for p in inspect.signature(plain).parameters.values()]
    for cls in (plain, quick):
        with pytest.raises(TypeError):
            cls()
        with pytest.raises(TypeError):
            cls(1, "x", [], (), "extra")
        with pytest.raises(TypeError):
            cls(1, d=5)  # an init=False field is no parameter
        with pytest.raises(ValueError, match="negative"):
            cls(-1)


def test_still_frozen_and_replaceable() -> None:
    _, quick = _pair()
    value = quick(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.a = 2
    assert dataclasses.replace(value, b="z") == quick(1, "z")


def test_refuses_what_it_would_not_mirror() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclass(frozen=True, kw_only=True)
    class KeywordOnly:
        a: int

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    @dataclass(frozen=True)
    class Clash:
        _quick_d: int

    for cls in (Mutable, Slotted, KeywordOnly, WithInitVar, Clash, int):
        with pytest.raises(TypeError):
            quick_init(cls)


@pytest.mark.parametrize("module", [ports, views, observe, round_parts])
def test_the_service_values_keep_their_dataclass_signature(module: Any) -> None:
    """Every frozen value of the service modules made per request has quick_init's __init__,
    taking the parameters its fields say."""
    for cls in vars(module).values():
        params_of: Any = getattr(cls, "__dataclass_params__", None)
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and \
                cls.__module__ == module.__name__ and params_of.frozen:
            assert "_quick_d" in cls.__init__.__code__.co_varnames, cls
            params = list(inspect.signature(cls).parameters)
            assert params == [f.name for f in dataclasses.fields(cls) if f.init]


def test_quick_replace_is_replace() -> None:
    @quick_init
    @dataclass(frozen=True)
    class Row:
        a: int
        b: str = "b"
        c: tuple[int, ...] = ()

    row = Row(1, "x", (2,))
    for changes in ({}, {"a": 5}, {"b": "y", "c": (3, 4)}):
        new = quick_replace(row, **changes)
        assert new == dataclasses.replace(row, **changes) and type(new) is Row
        assert vars(new) == vars(dataclasses.replace(row, **changes))
    assert quick_replace(row, a=9) is not row and row.a == 1  # a new value, the old untouched
    with pytest.raises(TypeError):  # a name that is no field: replace's own error
        quick_replace(row, z=1)


def test_quick_replace_leaves_what_a_copy_would_not_make_to_replace() -> None:
    plain, quick = _pair()  # init=False fields and a __post_init__: through __init__ again
    value = quick(1)
    with pytest.raises(ValueError, match="negative"):
        quick_replace(value, a=-1)
    assert quick_replace(value, b="z").e is not value.e  # its factory made a new one
    assert quick_replace(plain(1), b="z") == plain(1, "z")  # not quick_init's: replace


def test_the_rows_a_transition_replaces_take_the_quick_copy() -> None:
    assert ports.RoundRow.__dict__["_quick_fields"] == {
        f.name for f in dataclasses.fields(ports.RoundRow)}
    assert ports.ShoeRow.__dict__["_quick_fields"] == {
        f.name for f in dataclasses.fields(ports.ShoeRow)}
