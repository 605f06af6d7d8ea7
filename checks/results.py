"""Typed results of the live checks, and the runbook section each check belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class CheckResult:
    id: str  # stable kebab-case id, the same in docs and JSON output
    status: Status
    subject: str  # what was checked: a pool, a node, a model, "cluster"
    message: str

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "status": self.status.value, "subject": self.subject, "message": self.message}


CLUSTER = "The stack's cluster"
OWNERSHIP = "Who owns the driver"
COMPATIBILITY = "1. Compatibility checks"
CAPACITY = "2. Capacity and disruption controls"

# Every preflight id, in the runbook's order, with its section.
SECTIONS: dict[str, str] = {
    "cluster-identity": CLUSTER,
    "pool-membership": CLUSTER,
    "cluster-policy": OWNERSHIP,
    "driver-owner": OWNERSHIP,
    "per-pool-mode": OWNERSHIP,
    "two-driver-owners": OWNERSHIP,
    "driver-versions": OWNERSHIP,
    "node-image": OWNERSHIP,
    "gpu-supported-by-driver": COMPATIBILITY,
    "serving-images-cuda": COMPATIBILITY,
    "operator-supports-driver": COMPATIBILITY,
    "kernel-precompiled": COMPATIBILITY,
    "fabric-manager": COMPATIBILITY,
    "mig-timeslicing": COMPATIBILITY,
    "change-ticket": COMPATIBILITY,
    "spare-capacity": CAPACITY,
    "model-replicas": CAPACITY,
    "model-pdb": CAPACITY,
    "pdb-blocks-drain": CAPACITY,
    "readiness-probe": CAPACITY,
    "weights-cache": CAPACITY,
}


def passed(check_id: str, subject: str, message: str) -> CheckResult:
    return CheckResult(check_id, Status.PASS, subject, message)


def warned(check_id: str, subject: str, message: str) -> CheckResult:
    return CheckResult(check_id, Status.WARN, subject, message)


def failed(check_id: str, subject: str, message: str) -> CheckResult:
    return CheckResult(check_id, Status.FAIL, subject, message)


def any_failed(results: list[CheckResult]) -> bool:
    return any(r.status == Status.FAIL for r in results)
