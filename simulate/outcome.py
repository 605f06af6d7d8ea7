"""What one simulated rollout gives: durations per wave and pool, each model's lowest availability, every stall with
its cause, and the peak of what was out at once. Plain values; the engine builds them, the report prints them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Why a node stopped: the causes a stall names.
PDB = "pdb"  # an eviction refused by the model's PodDisruptionBudget
UNMANAGED = "unmanaged-pod"  # a GPU pod no controller owns (pod deletion refuses it without force)
TERMINATING = "pods-terminating"  # the evicted pods were not gone within the step's timeout
JOBS = "wait-for-jobs"  # pods matching waitForCompletion.podSelector still run
DRIVER = "driver-crash-loop"  # the new driver pod restarted more than the controller's limit
VALIDATION = "validation-timeout"  # the operator validator was not Ready within its 600 s
SKIP = "skip-label"  # a skip label nobody removes
NOT_READY = "node-not-ready"
NO_SLOT = "no-upgrade-slot"  # maxUnavailable is used up by nodes cordoned or NotReady for other reasons
WAVE = "wave-not-released"  # an earlier wave never finished
AUTO_UPGRADE_OFF = "auto-upgrade-off"
FAILED_BEFORE = "failed-before"  # upgrade-failed when the simulation started
# The stops less parallelism can avoid: a node that waited on evictions too long. The others (a bare pod, a skip
# label, a crash-looping driver, ...) happen whatever the parallelism.
PARALLELISM_CAUSES = frozenset({PDB, TERMINATING})


@dataclass(frozen=True)
class Stall:
    """A node that could not go on: in ``state`` from ``since`` until ``until`` (None: for the rest of the run)."""

    node: str
    pool: str
    state: str
    cause: str
    detail: str
    since: float
    until: float | None
    pdb: str | None = None  # namespace/name of the blocking PodDisruptionBudget

    @property
    def permanent(self) -> bool:
        return self.until is None

    def as_json(self) -> dict[str, Any]:
        return {"node": self.node, "pool": self.pool, "state": self.state, "cause": self.cause, "pdb": self.pdb,
                "detail": self.detail, "sinceSeconds": round(self.since, 1),
                "untilSeconds": None if self.until is None else round(self.until, 1)}


@dataclass(frozen=True)
class ModelOutcome:
    name: str
    replicas: int
    minimum: int
    lowest: int  # the fewest Ready replicas at any time
    seconds_below: float  # time spent below ``minimum``
    ready_at_start: int  # Ready replicas before the rollout (fewer than replicas where some found no GPUs)

    @property
    def below_minimum(self) -> bool:
        return self.lowest < self.minimum

    def as_json(self) -> dict[str, Any]:
        return {"model": self.name, "replicas": self.replicas, "minAvailable": self.minimum,
                "availableAtStart": self.ready_at_start, "lowestAvailable": self.lowest,
                "minutesBelowMinAvailable": round(self.seconds_below / 60, 1)}


@dataclass(frozen=True)
class Span:
    """A wave or a pool: from its first node leaving upgrade-required (a wave: its release) to its last done."""

    name: str
    nodes: int
    start: float | None
    end: float | None  # None: it never finished

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": self.nodes,
                "startSeconds": None if self.start is None else round(self.start, 1),
                "endSeconds": None if self.end is None else round(self.end, 1),
                "minutes": None if self.start is None or self.end is None else round((self.end - self.start) / 60, 1)}


@dataclass(frozen=True)
class Outcome:
    seconds: float | None  # until the last node was done; None when some never were
    last_event: float
    waves: tuple[Span, ...]
    pools: tuple[Span, ...]
    models: tuple[ModelOutcome, ...]
    stalls: tuple[Stall, ...]
    failed: tuple[str, ...]  # nodes that ended upgrade-failed
    peak_unavailable_nodes: int
    peak_unavailable_gpus: int
    unplaced_at_start: int  # replicas that found no GPUs before the rollout began
    validation_job_waits: int  # upgraded nodes where the validation job found GPUs taken
    aborted: bool = False  # stopped early: the search needed no more than "unsafe"
    longest_pod_deletion: float = 0.0  # seconds, the longest pod-deletion-required that ended with the pods gone

    @property
    def completed(self) -> bool:
        return self.seconds is not None

    @property
    def below_minimum(self) -> tuple[ModelOutcome, ...]:
        return tuple(m for m in self.models if m.below_minimum)

    @property
    def permanent_stalls(self) -> tuple[Stall, ...]:
        return tuple(s for s in self.stalls if s.permanent)

    @property
    def disruptive(self) -> bool:
        """What less parallelism could have avoided: a model below its minimum, or a node stopped for good by
        evictions a PDB refused (failed at the step's timeout, or waiting forever)."""
        return bool(self.below_minimum) or any(s.permanent and s.cause in PARALLELISM_CAUSES for s in self.stalls)

    @property
    def ok(self) -> bool:
        """Nothing stopped for good and no model dropped below its minimum: what exit 0 means."""
        return not self.permanent_stalls and not self.below_minimum and not self.failed

    def as_json(self) -> dict[str, Any]:
        return {
            "seconds": None if self.seconds is None else round(self.seconds, 1),
            "minutes": None if self.seconds is None else round(self.seconds / 60, 1),
            "waves": [w.as_json() for w in self.waves],
            "pools": [p.as_json() for p in self.pools],
            "models": [m.as_json() for m in self.models],
            "stalls": [s.as_json() for s in self.stalls],
            "failedNodes": list(self.failed),
            "peakUnavailableNodes": self.peak_unavailable_nodes,
            "peakUnavailableGpus": self.peak_unavailable_gpus,
            "replicasUnplacedAtStart": self.unplaced_at_start,
            "validationJobWaits": self.validation_job_waits,
        }
