"""The catalogue of live checks: every check of every section module, gathered once, in output order.

Each check's id and section are declared on its function (:mod:`checks.metadata`), in the module of its
runbook section. This catalogue imports those modules (:data:`SECTION_MODULES`, plain imports, so the
import contracts in pyproject.toml see every one), gathers the checks each declares in the order they are
written, and refuses an id twice, a malformed id or a section it does not list. A verb runs its sections in
the order of :data:`checks.metadata.SECTIONS`, and the checks of a section in the order their module
declares them; that order is the order of the verb's output (tables and JSON). Ids are unique across verbs:
one id, one meaning, in the docs and in every JSON document.

A new section: a :class:`~checks.metadata.Section` in :data:`~checks.metadata.SECTIONS`, a module named
after it whose checks are declared with ``@check(id, SECTION)``, and that module in :data:`SECTION_MODULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from checks import cluster, compatibility, disruption, owner, validation
from checks.metadata import CHECKS, SECTIONS, Check, Section
from checks.results import CheckResult
from vocabulary.declarations import KEBAB_CASE, Register

__all__ = ["CATALOGUE", "CHECK_ID", "SECTION_MODULES", "Catalogue", "declared"]

CHECK_ID = KEBAB_CASE

# One module per section, in the runbook's order: preflight's (the stack's cluster, who owns the driver,
# section 1, section 2), then verify's (section 5).
SECTION_MODULES: tuple[ModuleType, ...] = (cluster, owner, compatibility, disruption, validation)


class Catalogue:
    """Checks by id, in their sections; refuses an id twice, a malformed id and a section it does not list."""

    def __init__(self, sections: Iterable[Section], checks: Iterable[Check]) -> None:
        self._sections = tuple(sections)
        if len({s.title for s in self._sections}) != len(self._sections):
            raise ValueError("two sections with one title")
        register: Register[Check] = Register("check id", lambda check: check.id, pattern=CHECK_ID,
                                             check=self._in_a_section, where=lambda check: _where(check.function))
        register.add_all(checks)
        self._checks = register.by_id

    def _in_a_section(self, check: Check) -> None:
        if check.section not in self._sections:
            raise ValueError(f"check {check.id}: section {check.section.title!r} is not one of this catalogue's")

    def sections(self, verb: str) -> list[Section]:
        return [s for s in self._sections if s.verb == verb]

    def checks(self, verb: str) -> list[Check]:
        """The verb's checks in output order: by section, then as their module declares them."""
        return [c for s in self.sections(verb) for c in self._checks.values() if c.section == s]

    def section_of(self, check_id: str) -> Section:
        return self._checks[check_id].section

    def run(self, verb: str, facts: Any) -> list[CheckResult]:
        """Every check of ``verb`` over ``facts`` (one read of the cluster), in output order."""
        results: list[CheckResult] = []
        for check in self.checks(verb):
            results.extend(check.run(facts))
        return results


def declared(module: ModuleType) -> list[Check]:
    """The checks a module declares, in the order it writes them (functions it imports from elsewhere do not
    count)."""
    return CHECKS.declared(module)


def _where(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{getattr(function, '__qualname__', function)}"


CATALOGUE = Catalogue(SECTIONS, CHECKS.gather(SECTION_MODULES))
