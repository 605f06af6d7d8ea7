"""Declarations written on functions, gathered in a fixed order: the one mechanism behind the policy registry
(:mod:`policy.registry`, ``@stack_policy``/``@resource_policy``) and the check catalogue (:mod:`checks.catalogue`,
``@check``).

A decorator records a definition on the function it declares and returns the function unchanged (tests call rules
and checks directly); it registers nothing. :class:`Declarations` reads them back: :meth:`~Declarations.of` the
definition on one function, :meth:`~Declarations.declared` those a module writes, in the order it writes them.
:class:`Register` holds definitions by id in the order they are added and refuses a malformed id, a reserved one
and an id twice, so an id means one thing wherever it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any, Generic, TypeVar

D = TypeVar("D")
F = TypeVar("F", bound=Callable[..., Any])

KEBAB_CASE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class Declarations(Generic[D]):
    """Definitions of type ``kind`` kept on functions under the attribute ``attribute``."""

    def __init__(self, attribute: str, kind: type[D]) -> None:
        self.attribute = attribute
        self.kind = kind

    def declare(self, function: F, definition: D) -> F:
        """Record ``definition`` on ``function``; the function is unchanged."""
        setattr(function, self.attribute, definition)
        return function

    def of(self, value: object) -> D | None:
        """The definition declared on ``value``, if it is a declared function."""
        found = getattr(value, self.attribute, None)
        return found if isinstance(found, self.kind) else None

    def declared(self, module: ModuleType) -> list[D]:
        """The definitions ``module`` declares, in the order it writes them (functions it imports from elsewhere
        do not count)."""
        found = []
        for value in vars(module).values():
            definition = self.of(value)
            if definition is not None and getattr(value, "__module__", None) == module.__name__:
                found.append(definition)
        return found

    def gather(self, modules: Iterable[ModuleType]) -> list[D]:
        """What ``modules`` declare: module by module, each in its written order."""
        return [definition for module in modules for definition in self.declared(module)]


class Register(Generic[D]):
    """Definitions by id, in the order added. ``what`` names an id in messages ("policy", "check id"); ``reserved``
    maps an id no definition may take to why; ``check`` refuses a malformed definition (a ValueError); with
    ``pattern``, an id must match it; ``where`` says where a definition is written, for the message of an id
    declared twice."""

    def __init__(self, what: str, id_of: Callable[[D], str], *, pattern: re.Pattern[str] | None = None,
                 reserved: Mapping[str, str] | None = None, check: Callable[[D], None] | None = None,
                 where: Callable[[D], str] | None = None) -> None:
        self.what = what
        self.id_of = id_of
        self.pattern = pattern
        self.reserved = dict(reserved or {})
        self.check = check
        self.where = where
        self.by_id: dict[str, D] = {}

    def add(self, definition: D) -> None:
        key = str(self.id_of(definition))
        if self.pattern is not None and not self.pattern.fullmatch(key):
            raise ValueError(f"{self.what} {key!r} is not kebab-case" if self.pattern is KEBAB_CASE
                             else f"{self.what} {key!r} does not match {self.pattern.pattern}")
        if key in self.reserved:
            raise ValueError(f"'{key}' {self.reserved[key]}")
        if self.check is not None:
            self.check(definition)
        existing = self.by_id.get(key)
        if existing is not None:
            where = f": {self.where(existing)} and {self.where(definition)}" if self.where is not None else ""
            raise ValueError(f"{self.what} {key!r} is registered twice{where}")
        self.by_id[key] = definition

    def add_all(self, definitions: Iterable[D]) -> None:
        for definition in definitions:
            self.add(definition)

    def __iter__(self) -> Iterator[D]:
        return iter(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)
