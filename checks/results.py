"""Typed results of the live checks.

A check function returns :class:`Finding`\\ s (status, subject, message) built with :func:`passed`,
:func:`warned` and :func:`failed`; the runner (:mod:`checks.registry`) stamps each with the id the
check was registered under, which makes it a :class:`CheckResult`. So an id is written once, where the
check is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """What a check found about one subject, before the runner names the check."""

    status: Status
    subject: str  # what was checked: a pool, a node, a model, "cluster"
    message: str


@dataclass(frozen=True)
class CheckResult:
    id: str  # stable kebab-case id, the same in docs and JSON output
    status: Status
    subject: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "status": self.status.value, "subject": self.subject, "message": self.message}


def passed(subject: str, message: str) -> Finding:
    return Finding(Status.PASS, subject, message)


def warned(subject: str, message: str) -> Finding:
    return Finding(Status.WARN, subject, message)


def failed(subject: str, message: str) -> Finding:
    return Finding(Status.FAIL, subject, message)


def any_failed(results: list[CheckResult]) -> bool:
    return any(r.status == Status.FAIL for r in results)


def few(names: list[str], limit: int = 5) -> str:
    """Up to ``limit`` of ``names`` (sorted), then how many more: how messages list nodes or objects."""
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
