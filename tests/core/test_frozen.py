"""quick_init: the same frozen dataclass, only a cheaper __init__ (rng_service/core/frozen.py)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest

from rng_service.core.frozen import quick_init
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
