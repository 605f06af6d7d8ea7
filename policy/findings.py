"""What a rule reports: a message about one resource (or the stack), possibly capped at advisory."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from policy.facts import Resource


class Level(StrEnum):
    """Enforcement levels, spelled as CrossGuard's pack config spells them."""

    ADVISORY = "advisory"
    MANDATORY = "mandatory"
    DISABLED = "disabled"


@dataclass(frozen=True)
class Finding:
    message: str
    resource: Resource | None = None  # None: the stack as a whole
    # True for findings the issue grades as advice whatever the policy's level (an operator release
    # that lists only the branch, a timeout of 0, a fact the rule cannot see).
    advisory: bool = False


def advice(message: str, resource: Resource | None = None) -> Finding:
    return Finding(message, resource, advisory=True)
