"""vocabulary.declarations: the one mechanism behind the policy registry and the check catalogue."""

from __future__ import annotations

import types
from dataclasses import dataclass

import pytest

from checks import metadata as check_metadata
from policy import metadata as policy_metadata
from vocabulary.declarations import KEBAB_CASE, Declarations, Register


@dataclass(frozen=True)
class Thing:
    id: str


THINGS: Declarations[Thing] = Declarations("__thing__", Thing)


def _module() -> types.ModuleType:
    module = types.ModuleType("example.things")

    def second() -> None: ...

    def first() -> None: ...

    def imported() -> None: ...

    for function in (second, first):
        function.__module__ = module.__name__
    imported.__module__ = "elsewhere"
    THINGS.declare(second, Thing("b-second"))
    THINGS.declare(first, Thing("a-first"))
    THINGS.declare(imported, Thing("c-imported"))
    vars(module).update(second=second, first=first, imported=imported, helper=lambda: None)
    return module


def test_a_declaration_leaves_the_function_and_reads_back() -> None:
    def f() -> int:
        return 1

    assert THINGS.declare(f, Thing("x")) is f and f() == 1
    assert THINGS.of(f) == Thing("x") and THINGS.of(lambda: None) is None
    assert Declarations("__thing__", int).of(f) is None  # another kind under the same attribute is not one


def test_a_module_s_declarations_in_written_order_without_imports() -> None:
    module = _module()
    assert [t.id for t in THINGS.declared(module)] == ["b-second", "a-first"]
    assert [t.id for t in THINGS.gather([module, module])] == ["b-second", "a-first", "b-second", "a-first"]


def test_the_register_refuses_a_malformed_id_a_reserved_one_and_one_twice() -> None:
    register: Register[Thing] = Register("thing", lambda t: t.id, pattern=KEBAB_CASE, reserved={"all": "is taken"},
                                         where=lambda t: "here")
    register.add_all([Thing("one"), Thing("two")])
    assert list(register.by_id) == ["one", "two"] and len(register) == 2 and list(register) == [Thing("one"),
                                                                                                Thing("two")]
    with pytest.raises(ValueError, match="thing 'Bad_Id' is not kebab-case"):
        register.add(Thing("Bad_Id"))
    with pytest.raises(ValueError, match="^'all' is taken$"):
        register.add(Thing("all"))
    with pytest.raises(ValueError, match="^thing 'one' is registered twice: here and here$"):
        register.add(Thing("one"))


def test_the_register_runs_its_own_check() -> None:
    def odd(thing: Thing) -> None:
        if thing.id == "odd":
            raise ValueError("odd")

    register: Register[Thing] = Register("thing", lambda t: t.id, check=odd)
    with pytest.raises(ValueError, match="odd"):
        register.add(Thing("odd"))
    assert register.by_id == {}


def test_policies_and_checks_are_declared_through_it() -> None:
    assert isinstance(policy_metadata.POLICIES, Declarations) and policy_metadata.POLICIES.kind is policy_metadata.PolicyDef
    assert isinstance(check_metadata.CHECKS, Declarations) and check_metadata.CHECKS.kind is check_metadata.Check
