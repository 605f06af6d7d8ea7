"""A live check's metadata, declared on its function: ``@check(id, section)``.

A section is a step of docs/runbook.md, run by one ``gpu-rollout`` verb; its checks live in one module
named after it (:mod:`checks.cluster`, :mod:`checks.owner`, :mod:`checks.compatibility`,
:mod:`checks.disruption` for ``preflight``; :mod:`checks.validation` for ``verify``)::

    @check(CheckId.DRIVER_OWNER, OWNERSHIP)
    def check_driver_owner(inv: Inventory) -> list[Finding]:
        return [passed(pool.name, "...") for pool in inv.spec.nodePools]

The decorator keeps the function as it is (tests call checks directly) and records its :class:`Check` on
it (:data:`CHECKS`, the declarations mechanism of :mod:`vocabulary.declarations`, the policy rules' too); it
registers nothing. :mod:`checks.catalogue` imports every section module (a plain import), gathers what they
declare and refuses an id twice or a malformed one, as ``policy.registry`` does for the policy rules. The ids are
:class:`vocabulary.check_ids.CheckId`'s. A
check function returns :class:`checks.results.Finding`\\ s and never names itself: :meth:`Check.run`
stamps each with the id, so an id is written in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from checks.results import CheckResult, Finding
from vocabulary.declarations import Declarations


@dataclass(frozen=True)
class Section:
    title: str  # the heading of the verb's table for this section (and the runbook's name for it)
    runbook: str  # the heading in docs/runbook.md whose step these checks automate
    verb: str  # the gpu-rollout verb that runs them


CLUSTER = Section("The stack's cluster", "Which cluster the live commands reach", "preflight")
OWNERSHIP = Section("Who owns the driver", "1. Who owns the driver, and compatibility (before any change)",
                    "preflight")
COMPATIBILITY = Section("1. Compatibility checks", "1. Who owns the driver, and compatibility (before any change)",
                        "preflight")
CAPACITY = Section("2. Capacity and disruption controls", "2-3. Capacity and the upgrade policy", "preflight")
VALIDATION = Section("5. Validate the canary", "5. Validate the canary", "verify")

# Every section, in the order the verbs run and print them.
SECTIONS = (CLUSTER, OWNERSHIP, COMPATIBILITY, CAPACITY, VALIDATION)


@dataclass(frozen=True)
class Check:
    id: str  # stable kebab-case id (a CheckId's string), the same in docs/runbook.md and in JSON output
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


# The Checks declared on check functions (under their attribute ``__check__``).
CHECKS: Declarations[Check] = Declarations("__check__", Check)

CheckFunction = TypeVar("CheckFunction", bound=Callable[..., Iterable[Finding]])


def check(check_id: str, section: Section) -> Callable[[CheckFunction], CheckFunction]:
    """Declare the decorated function check ``check_id`` of ``section``; the function is unchanged."""

    def declare(function: CheckFunction) -> CheckFunction:
        return CHECKS.declare(function, Check(str(check_id), section, function))

    return declare


def definition(function: object) -> Check | None:
    """The Check declared on a function, if it is one."""
    return CHECKS.of(function)
