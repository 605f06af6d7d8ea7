"""The catalogue of live checks: each check declared once, beside its function, with its id and the
runbook section it automates.

A section is a step of docs/runbook.md, run by one ``gpu-rollout`` verb, and lives in one module named
after it: :mod:`checks.cluster` (the stack's cluster), :mod:`checks.owner` (who owns the driver),
:mod:`checks.compatibility` (section 1), :mod:`checks.disruption` (section 2). A module declares its
checks with the decorator::

    @check("driver-owner", OWNERSHIP)
    def check_driver_owner(inv: Inventory) -> list[Finding]:
        return [passed(pool.name, "...") for pool in inv.spec.nodePools]

A check function returns :class:`checks.results.Finding`\\ s and never names itself: :meth:`Check.run`
stamps each with the id, so an id is written in exactly one place. A verb runs its sections in the
order they are listed in :data:`SECTIONS`, and the checks of a section in the order their module
declares them; that order is the order of the verb's output (tables and JSON).

``gpu-rollout verify`` (runbook section 5, issue 10) joins the same way: a section with
``verb="verify"`` and its own module (``checks/validation.py``), listed in :data:`SECTIONS`, whose
checks register with ``@check(id, VALIDATION)`` and run through ``CATALOGUE.run("verify", facts)``
over whatever its one read of the cluster gathers. Ids are unique across verbs: one id, one meaning,
in the docs and in every JSON document.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from checks.results import CheckResult, Finding

CHECK_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Section:
    title: str  # the heading of the verb's table for this section (and the runbook's name for it)
    runbook: str  # the heading in docs/runbook.md whose step these checks automate
    verb: str  # the gpu-rollout verb that runs them
    module: str  # the module that declares them, named after the section


CLUSTER = Section("The stack's cluster", "Which cluster the live commands reach", "preflight", "checks.cluster")
OWNERSHIP = Section("Who owns the driver", "1. Who owns the driver, and compatibility (before any change)",
                    "preflight", "checks.owner")
COMPATIBILITY = Section("1. Compatibility checks", "1. Who owns the driver, and compatibility (before any change)",
                        "preflight", "checks.compatibility")
CAPACITY = Section("2. Capacity and disruption controls", "2-3. Capacity and the upgrade policy", "preflight",
                   "checks.disruption")
VALIDATION = Section("5. Validate the canary", "5. Validate the canary", "verify", "checks.validation")

# Every section, in the order the verbs run and print them.
SECTIONS = (CLUSTER, OWNERSHIP, COMPATIBILITY, CAPACITY, VALIDATION)


@dataclass(frozen=True)
class Check:
    id: str  # stable kebab-case id, the same in docs/runbook.md and in JSON output
    section: Section
    function: Callable[[Any], Iterable[Finding]]

    def run(self, facts: Any) -> list[CheckResult]:
        """The function's findings over ``facts``, each stamped with this check's id."""
        results = []
        for finding in self.function(facts):
            if not isinstance(finding, Finding):
                raise TypeError(f"check {self.id} returned {finding!r}: a check returns Findings (passed, warned, "
                                "failed), the runner names them")
            results.append(CheckResult(self.id, finding.status, finding.subject, finding.message, finding.evidence))
        return results


CheckFunction = TypeVar("CheckFunction", bound=Callable[..., Iterable[Finding]])


class Registry:
    """Checks by id, in their sections; refuses an id twice, a malformed id and a section it does not list."""

    def __init__(self, sections: Iterable[Section]) -> None:
        self._sections = tuple(sections)
        if len({s.title for s in self._sections}) != len(self._sections):
            raise ValueError("two sections with one title")
        self._checks: dict[str, Check] = {}

    def check(self, check_id: str, section: Section) -> Callable[[CheckFunction], CheckFunction]:
        """Decorator: register the function as check ``check_id`` of ``section``; the function is unchanged."""

        def register(function: CheckFunction) -> CheckFunction:
            self.add(Check(check_id, section, function))
            return function

        return register

    def add(self, check: Check) -> None:
        if not CHECK_ID.fullmatch(check.id):
            raise ValueError(f"check id {check.id!r} is not kebab-case")
        if check.section not in self._sections:
            raise ValueError(f"check {check.id}: section {check.section.title!r} is not one of this registry's")
        existing = self._checks.get(check.id)
        if existing is not None:
            raise ValueError(f"check id {check.id!r} is registered twice: {_where(existing.function)} and "
                             f"{_where(check.function)}")
        self._checks[check.id] = check

    def sections(self, verb: str) -> list[Section]:
        return [s for s in self._sections if s.verb == verb]

    def checks(self, verb: str) -> list[Check]:
        """The verb's checks in output order: by section, then as their module declares them."""
        sections = self.sections(verb)
        for section in sections:
            importlib.import_module(section.module)  # its decorators register its checks
        return [c for s in sections for c in self._checks.values() if c.section == s]

    def get(self, check_id: str) -> Check:
        return self._checks[check_id]

    def section_of(self, check_id: str) -> Section:
        return self._checks[check_id].section

    def run(self, verb: str, facts: Any) -> list[CheckResult]:
        """Every check of ``verb`` over ``facts`` (one read of the cluster), in output order."""
        results: list[CheckResult] = []
        for check_ in self.checks(verb):
            results.extend(check_.run(facts))
        return results


def _where(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{getattr(function, '__qualname__', function)}"


CATALOGUE = Registry(SECTIONS)
check = CATALOGUE.check
