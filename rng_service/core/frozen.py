"""A cheaper ``__init__`` for frozen dataclasses made on every request.

``@dataclass(frozen=True)`` forbids assignment by overriding ``__setattr__``, so its generated
``__init__`` sets each field through ``object.__setattr__(self, name, value)``: a global look-up,
a method look-up and a call per field, four to five times what a plain dataclass pays. A round
transition makes some thirty such values (its rows, postings, account keys, the view and its
parts), which cost it tens of microseconds in field assignments alone.

Building an ``__init__`` from source text is a trick, kept because it is measured:
``bench/bench_transition_count.py --rounds 110`` counted 2.746 M instructions a transition
without it and 2.527 M with it (-8 %; docs/performance.md, "frozen values made cheaply").

:func:`quick_init` gives such a class an ``__init__`` with the same signature (the same
parameters, order, defaults and default factories, ``__post_init__`` called as dataclasses call
it) that fills the instance's ``__dict__`` directly, which is what ``object.__setattr__`` does
for a class without slots. Everything else of the dataclass (equality, hashing, ``repr``,
``fields``, ``replace``, assignment refused) is left as it was.

>>> from dataclasses import dataclass, field
>>> @quick_init
... @dataclass(frozen=True)
... class Point:
...     x: int
...     y: int = 0
...     tags: list[str] = field(default_factory=list)
>>> Point(1), Point(1, y=2) == Point(1, 2)
(Point(x=1, y=0, tags=[]), True)
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

__all__ = ["quick_init", "quick_replace"]

T = TypeVar("T")


class _Missing:
    """The default of a parameter whose field has a default factory (called when omitted)."""

    def __repr__(self) -> str:
        return "<factory default>"


_FACTORY = _Missing()


def quick_init(cls: type[T]) -> type[T]:
    """Replace frozen dataclass ``cls``'s ``__init__`` by one that writes ``__dict__`` directly.

    Refuses (TypeError) what the generated method would not mirror exactly: a class that is not
    a frozen dataclass, one with slots (no ``__dict__``), keyword-only fields or ``InitVar``
    pseudo-fields."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not frozen: its own __init__ is as cheap")
    if "__slots__" in cls.__dict__ or any("__slots__" in vars(base) for base in cls.__mro__[1:-1]):
        raise TypeError(f"{cls.__name__} has slots: it has no __dict__ to fill")
    fields = dataclasses.fields(cls)
    # the generated method's parameters must be the dataclass's own: an InitVar or a
    # keyword-only field would make them differ
    own = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if [(p.name, p.kind) for p in own] != [(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                           for f in fields if f.init]:
        raise TypeError(f"{cls.__name__}'s __init__ takes other parameters than its fields "
                        "(InitVar or keyword-only fields)")
    if any(f.name.startswith("_quick") for f in fields):
        raise TypeError(f"{cls.__name__} has a field named like quick_init's own names")
    namespace: dict[str, Any] = {"_quick_factory": _FACTORY}
    params_src: list[str] = []
    body: list[str] = ["  _quick_d = self.__dict__"]
    for i, f in enumerate(fields):
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        default, factory = f"_quick_default_{i}", f"_quick_factory_{i}"
        if has_default:
            namespace[default] = f.default
        if has_factory:
            namespace[factory] = f.default_factory
        if not f.init:  # as dataclasses do: a factory's value set, a plain default left to
            if has_factory:  # the class attribute
                body.append(f"  _quick_d[{f.name!r}] = {factory}()")
            continue
        if has_factory:
            params_src.append(f"{f.name}=_quick_factory")
            body.append(f"  _quick_d[{f.name!r}] = {factory}() if {f.name} is _quick_factory "
                        f"else {f.name}")
            continue
        params_src.append(f"{f.name}={default}" if has_default else f.name)
        body.append(f"  _quick_d[{f.name!r}] = {f.name}")
    post_init = hasattr(cls, "__post_init__")
    if post_init:
        body.append("  self.__post_init__()")
    source = f"def __init__(self, {', '.join(params_src)}):\n" + "\n".join(body) + "\n"
    exec(source, namespace)  # the source is built above from the field names alone
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    if not post_init and all(f.init for f in fields):  # a copy of the fields is a new value
        cls._quick_fields = frozenset(f.name for f in fields)  # type: ignore[attr-defined]
    return cls


def quick_replace(value: T, /, **changes: Any) -> T:
    """``dataclasses.replace(value, **changes)`` for a :func:`quick_init` class whose fields
    are all parameters and which has no ``__post_init__``: a copy of ``value``'s fields with
    ``changes`` written over them, which is what its ``__init__`` would make of them (without
    ``replace``'s walk over the fields and keyword call). Anything else, and a change that names
    no field, goes to ``dataclasses.replace`` (and its errors).

    >>> from dataclasses import dataclass
    >>> @quick_init
    ... @dataclass(frozen=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    >>> quick_replace(Point(1, 2), y=3)
    Point(x=1, y=3)
    """
    names = type(value).__dict__.get("_quick_fields")  # the class's own, not a base's
    if names is None or not names.issuperset(changes):
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    new = object.__new__(type(value))
    fields = new.__dict__
    fields.update(value.__dict__)
    fields.update(changes)
    return new
