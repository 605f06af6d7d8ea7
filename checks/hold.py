"""A node held by a failed validation: how the live verbs see it, move its model pods off, and release it.

The validation job holds a node whose result failed: in the same patch as the result it cordons the node and
records why in the annotation ``gpu-driver-upgrade.io/validation-hold`` (``workload.result.hold_record``:
node, pool, driver, the checks that failed, when). Nothing of the project uncordons it but a person, with
:func:`release_node` (`gpu-rollout release-node`), after looking at the node; `resume` never does.

- `watch` reads the holds on the stack's nodes (:func:`held_nodes`): each is a trigger, like
  ``upgrade-failed``, and where the pool says so (``FleetSpec.evicts_on_failed_validation``) it moves the
  node's model pods off through the Eviction API (:func:`evict_model_pods`), so their PodDisruptionBudgets
  decide. A refused eviction (429) is asked again later, never forced by a delete; a ``NoExecute`` taint,
  which ignores PDBs, is never used.
- `verify` fails a held node (checks/validation.py, ``validation-job``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from checks import kube as k
from checks.errors import ClusterError, EvictionRefusedError
from checks.identity import ClusterIdentity, require_stack_cluster
from checks.inventory import pool_nodes_of
from checks.nodestate import node_driver_version, upgrade_state
from checks.objects import Obj, annotations_of, labels_of, meta, name_of, spec_of, status_of
from checks.progress import Trigger, list_model_pods
from gpu_knowledge import labels
from fleetspec.membership import Membership
from fleetspec.model import FleetSpec, NodePool
from workload import result as job_result
from vocabulary.triggers import TriggerKind



@dataclass(frozen=True)
class HeldNode:
    """A node of the stack's pools that carries the job's hold record."""

    node: Obj
    pool: NodePool
    hold: job_result.Hold | None  # None when the record cannot be read
    error: str | None = None  # why it cannot be read

    @property
    def name(self) -> str:
        return name_of(self.node)

    @property
    def why(self) -> str:
        if self.hold is None:
            return f"its hold record cannot be read ({self.error})"
        return self.hold.describe()

    def trigger(self) -> Trigger:
        return Trigger(TriggerKind.VALIDATION_FAILED, self.name,
                       f"node {self.name} (pool {self.pool.name}) failed its validation: {self.why}; the validation "
                       "job holds it cordoned until `gpu-rollout release-node`")


def read_hold(node: Obj) -> tuple[job_result.Hold | None, str | None] | None:
    """The node's hold record (or why it cannot be read); None when the node carries none."""
    text = annotations_of(node).get(job_result.HOLD_ANNOTATION)
    if text is None:
        return None
    try:
        return job_result.parse_hold(text), None
    except ValueError as exc:
        return None, f"annotation {job_result.HOLD_ANNOTATION}: {exc}"


def held_nodes(nodes: list[tuple[Obj, Membership]]) -> list[HeldNode]:
    """The nodes among the stack's (``pool_nodes_of``) that a failed validation holds, by name."""
    found = []
    for node, membership in nodes:
        read = read_hold(node)
        if read is not None:
            found.append(HeldNode(node, membership.pool, *read))
    return found


# ---------------------------------------------------------------- moving the model pods off (watch)


@dataclass
class Evictions:
    """What one round of evictions from held nodes did; pods named ``namespace/name``."""

    evicted: list[str] = field(default_factory=list)  # the API server accepted the eviction
    refused: list[str] = field(default_factory=list)  # a PodDisruptionBudget refused it (429): asked again later
    failed: list[str] = field(default_factory=list)  # "pod: why" for any other error
    kept: list[str] = field(default_factory=list)  # on a pool the stack says not to evict (evictOnFailure false)

    @property
    def pending(self) -> bool:
        """Pods still on a held node that are to be moved off."""
        return bool(self.refused or self.failed)

    def as_json(self) -> dict[str, list[str]]:
        return {"evicted": self.evicted, "refused": self.refused, "failed": self.failed, "kept": self.kept}

    def describe(self) -> str:
        parts = [f"evicted {len(self.evicted)} model pod(s) from held node(s)"]
        if self.refused:
            parts.append(f"{len(self.refused)} refused by their PodDisruptionBudget, asked again later "
                         f"({', '.join(self.refused[:5])})")
        if self.failed:
            parts.append(f"{len(self.failed)} could not be evicted ({'; '.join(self.failed[:3])})")
        if self.kept:
            parts.append(f"{len(self.kept)} left in place (validation.evictOnFailure is false for their pool)")
        return "; ".join(parts)


def _on_node(pod: Obj, node: str) -> bool:
    """A pod bound to ``node`` that still runs there (not finished, not already going)."""
    return (spec_of(pod).get("nodeName") == node and not meta(pod).get("deletionTimestamp")
            and status_of(pod).get("phase") not in ("Succeeded", "Failed"))


def evict_model_pods(kube: k.Kube, spec: FleetSpec, held: list[HeldNode],
                     on_evict: Callable[[str], None] = lambda pod: None) -> Evictions:
    """Evict the declared models' pods from the held nodes whose pool evicts on a failed validation, through the
    Eviction API; a PDB's refusal is recorded, never overridden. One LIST per model (none without a held node)."""
    report = Evictions()
    if not held:
        return report
    by_name = {h.name: h for h in held}
    seen: set[str] = set()
    for pods in list_model_pods(kube, spec).values():
        for pod in pods:
            node = spec_of(pod).get("nodeName")
            key = f"{meta(pod).get('namespace', '')}/{name_of(pod)}"
            if node not in by_name or key in seen or not _on_node(pod, node):
                continue
            seen.add(key)
            if not spec.evicts_on_failed_validation(by_name[node].pool):
                report.kept.append(key)
                continue
            try:
                kube.evict(meta(pod).get("namespace", ""), name_of(pod))
            except EvictionRefusedError:
                report.refused.append(key)
                continue
            except ClusterError as exc:
                report.failed.append(f"{key}: {exc}")
                continue
            report.evicted.append(key)
            on_evict(key)
    return report


# ---------------------------------------------------------------- release (gpu-rollout release-node)


class ReleaseRefused(Exception):
    """release-node changed nothing: the node is not the stack's, not held, or still fails on the driver it runs."""


@dataclass
class Release:
    node: str
    pool: str
    hold: job_result.Hold | None
    uncordoned: bool
    note: str = ""  # why the node was left cordoned, where it was


def still_failing(node: Obj) -> str | None:
    """Why the node is still failed on the driver it runs now (its latest result, for the driver GFD reports,
    failed), or None."""
    node_labels = labels_of(node)
    validated = node_labels.get(job_result.LABEL_VALIDATED_DRIVER)
    running = node_driver_version(node)
    if node_labels.get(job_result.LABEL_OUTCOME) != job_result.FAILED or not validated or running is None:
        return None
    if not job_result.driver_matches(validated, running):
        return None
    return f"its latest validation, on driver {validated}, which it still runs, failed"


def release_node(kube: k.Kube, spec: FleetSpec, name: str, *, accept_failed: bool = False,
                 keep_cordoned: bool = False,
                 on_identity: Callable[[ClusterIdentity], None] = lambda i: None) -> Release:
    """Remove the hold record from ``name`` and uncordon it, in one merge patch, after the cluster's identity is
    checked. Refused (:class:`ReleaseRefused`, nothing written) for a node of no pool of the stack, a node
    without a hold record, and, unless ``accept_failed``, a node whose latest result failed on the driver it
    still runs. The cordon stays with ``keep_cordoned``, or while the operator's upgrade of the node is in
    progress (the operator uncordons it at its end)."""
    nodes = kube.list(k.NODES)
    on_identity(require_stack_cluster(kube, spec, nodes))
    found = {name_of(n): (n, m) for n, m in pool_nodes_of(spec, nodes)}
    if name not in found:
        raise ReleaseRefused(f"release-node: {name} is not a node of this stack's pools; nothing changed")
    node, membership = found[name]
    read = read_hold(node)
    if read is None:
        raise ReleaseRefused(f"release-node: node {name} is not held by a failed validation (no "
                             f"{job_result.HOLD_ANNOTATION} annotation); nothing changed")
    hold, _error = read
    failing = still_failing(node)
    if failing and not accept_failed:
        raise ReleaseRefused(
            f"release-node: node {name} is held because {hold.describe() if hold else 'its validation failed'}, and "
            f"{failing}. Validate it again while it stays held (`kubectl label node {name} "
            f"{job_result.LABEL_VALIDATED_DRIVER}-`: the job runs on a cordoned node) and release it once it "
            "passes, or pass --accept-failed to serve on it anyway; nothing changed")
    state = upgrade_state(node)
    note = ""
    if keep_cordoned:
        note = "left cordoned (--keep-cordoned)"
    elif state in labels.UPGRADE_IN_PROGRESS:
        note = f"left cordoned: the operator's upgrade of the node is in progress ({state})"
    body: dict[str, Any] = {"metadata": {"annotations": {job_result.HOLD_ANNOTATION: None}}}
    if not note:
        body["spec"] = {"unschedulable": None}
    kube.patch(k.NODES, name, body)
    return Release(name, membership.pool.name, hold, uncordoned=not note, note=note)
