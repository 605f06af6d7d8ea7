"""Typed results of the live checks.

A check function returns :class:`Finding`\\ s (status, subject, message) built with :func:`passed`,
:func:`warned` and :func:`failed` (and, for ``verify``, :func:`inconclusive`); the runner
(:meth:`checks.metadata.Check.run`) stamps each with the id the check was declared under, which makes it a
:class:`CheckResult`. So an id is written once, where the check is declared.

``inconclusive`` is for checks that read evidence which may be missing (an empty Prometheus query, a
result the validation job has not written yet): not a pass, and not proof of a failure. Only ``verify``
gives it. ``evidence`` (what a check read: label values, query results) is carried by the checks that have
it (``verify``'s, recorded in the attestation) and appears in JSON only where a check gave some, so
preflight's output is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # the evidence is missing or unreadable (verify only)


@dataclass(frozen=True)
class Finding:
    """What a check found about one subject, before the runner names the check."""

    status: Status
    subject: str  # what was checked: a pool, a node, a model, "cluster"
    message: str
    evidence: dict[str, Any] | None = None  # what the check read, where it records it (verify)


@dataclass(frozen=True)
class CheckResult:
    id: str  # stable kebab-case id, the same in docs and JSON output
    status: Status
    subject: str
    message: str
    evidence: dict[str, Any] | None = None


def passed(subject: str, message: str, evidence: dict[str, Any] | None = None) -> Finding:
    return Finding(Status.PASS, subject, message, evidence)


def warned(subject: str, message: str) -> Finding:
    return Finding(Status.WARN, subject, message)


def failed(subject: str, message: str, evidence: dict[str, Any] | None = None) -> Finding:
    return Finding(Status.FAIL, subject, message, evidence)


def inconclusive(subject: str, message: str, evidence: dict[str, Any] | None = None) -> Finding:
    """The check could not tell: its evidence is missing. Never a pass (verify exits 1 on it)."""
    return Finding(Status.INCONCLUSIVE, subject, message, evidence)


def any_failed(results: list[CheckResult]) -> bool:
    return any(r.status == Status.FAIL for r in results)


def few(names: list[str], limit: int = 5) -> str:
    """Up to ``limit`` of ``names`` (sorted), then how many more: how messages list nodes or objects."""
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
