"""Pause and resume a rollout with the operator's skip label, remembering which labels were ours.

Pause puts ``nvidia.com/gpu-driver-upgrade.skip=true`` on every node of the stack's pools that is not
done (:func:`checks.nodestate.node_done`: ``upgrade-done`` *and* on its pool's target driver) and
records itself in the annotation ``gpu-driver-upgrade.io/paused-by`` (the stack name) in the same merge
patch, so each node is either fully paused by us or untouched. Resume removes the label and the
annotation from exactly the nodes carrying our annotation; a skip label someone else set (a held
pool, an operator's manual hold) has no annotation of ours and is never removed. On a node of a pool
the stack holds now (``FleetSpec.pool_held``), resume drops only our annotations and keeps the label:
the stack wants it there. Both are idempotent: re-running after an interruption finishes the nodes
that were not done.

Neither touches a node's cordon. A node the validation job holds after a failed validation
(:mod:`checks.hold`) stays cordoned through `resume`, which lists it (``validation_held``): only
`gpu-rollout release-node` releases it, and until then `watch` pauses the rollout again.

Each patched node is reported through ``on_change`` as soon as the patch succeeded, and a failure
midway raises :class:`ChangeInterrupted` carrying what was changed before it, so the caller can show
exactly what is on the cluster now.

A pool's nodes are found by :func:`fleetspec.membership.node_membership` (the project's pool label, else the
cloud's pool label, else the declared ``existing.nodeSelector``), so a fleet the stack has not labelled
yet is paused on exactly its pools' nodes. Before any patch the cluster's identity is checked
(:func:`checks.identity.require_stack_cluster`, on the same node LIST): another cluster raises
:class:`checks.errors.WrongClusterError` and nothing is written.

Only a stack whose GPU Operator owns the driver can be paused. Where the node image owns it
(``driver.owner: image``) the operator's driver is disabled, so its skip label holds nothing back:
both verbs raise :class:`ImageOwnedDriver` before any call to the cluster. Such a rollout is held by
not adding a new generation, and rolled back by keeping the old generation live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from checks import kube as k
from checks.errors import ClusterError
from checks.hold import held_nodes
from checks.identity import ClusterIdentity, refuse_if_refuted, require_stack_cluster
from checks.inventory import pool_nodes_of
from checks.nodestate import node_done, require_nodes
from checks.objects import Obj, annotations_of, labels_of, name_of
from gpu_knowledge import labels
from fleetspec.membership import Membership
from fleetspec.model import DriverOwner, FleetSpec

# on_change(action, node): action is "labelled" (pause), "released" or "unclaimed" (resume, held pool).
OnChange = Callable[[str, str], None]
OnIdentity = Callable[[ClusterIdentity], None]


@dataclass
class PauseReport:
    changed: list[str] = field(default_factory=list)  # nodes this run labelled (pause) or released (resume)
    unchanged: list[str] = field(default_factory=list)  # already paused by this stack (pause)
    foreign: list[str] = field(default_factory=list)  # skip label set by someone else: left alone
    done: list[str] = field(default_factory=list)  # upgrade-done on the pool's target driver: nothing to hold
    held: list[str] = field(default_factory=list)  # resume: pool held by the stack; our annotation dropped, label kept
    validation_held: list[str] = field(default_factory=list)  # resume: cordoned by a failed validation; left so

    def as_json(self) -> dict[str, list[str]]:
        return {"changed": self.changed, "unchanged": self.unchanged, "foreign": self.foreign, "done": self.done,
                "held": self.held, "validationHeld": self.validation_held}


class ImageOwnedDriver(Exception):
    """pause/resume on a stack whose node image owns the driver: nothing to do, and nothing was done."""

    def __init__(self, verb: str) -> None:
        super().__init__(
            f"{verb}: the node image owns the driver on this stack (driver.owner: image): there is no operator "
            f"upgrade to {verb}; hold the rollout by not adding a new generation, and roll back by keeping the "
            "old generation live (retired: false)"
        )


def refuse_image_owned(spec: FleetSpec, verb: str) -> None:
    """Raise :class:`ImageOwnedDriver` when the node image owns the stack's driver."""
    if spec.driver.owner == DriverOwner.IMAGE:
        raise ImageOwnedDriver(verb)


class ChangeInterrupted(ClusterError):
    """A patch failed midway; ``report`` holds what this run changed before it (still on the cluster)."""

    def __init__(self, message: str, report: PauseReport) -> None:
        super().__init__(message)
        self.report = report


def _nodes(kube: k.Kube, spec: FleetSpec, verb: str, identity: ClusterIdentity | None,
           on_identity: OnIdentity) -> list[tuple[Obj, Membership]]:
    """The stack's pool nodes, by name, after the cluster's identity was checked on the same LIST."""
    nodes = kube.list(k.NODES)
    if identity is None:
        identity = require_stack_cluster(kube, spec, nodes)
    else:
        refuse_if_refuted(kube, identity)
    on_identity(identity)
    found = pool_nodes_of(spec, nodes)
    require_nodes(found, spec, verb)
    return found


def _patch(kube: k.Kube, verb: str, node: str, body: Obj, report: PauseReport) -> None:
    try:
        kube.patch(k.NODES, node, body)
    except ClusterError as exc:
        changed = report.changed + report.held
        raise ChangeInterrupted(
            f"{verb} stopped at node {node} after changing {len(changed)} node(s)"
            + (f" ({', '.join(changed)})" if changed else "") + f"; re-run `{verb}` to finish: {exc}",
            report,
        ) from exc


def pause(kube: k.Kube, spec: FleetSpec, stack: str, reason: str = "paused by gpu-rollout",
          on_change: OnChange = lambda action, node: None, *, identity: ClusterIdentity | None = None,
          on_identity: OnIdentity = lambda i: None) -> PauseReport:
    """Skip-label every node of the stack's pools that is not done. ``identity``: a verdict the caller
    already has for this cluster (watch's auto-pause); else it is checked here, before any patch."""
    refuse_image_owned(spec, "pause")
    report = PauseReport()
    for node, _ in _nodes(kube, spec, "pause", identity, on_identity):
        name, node_labels = name_of(node), labels_of(node)
        ours = annotations_of(node).get(labels.ANNOTATION_PAUSED_BY) == stack
        if node_labels.get(labels.SKIP_UPGRADE) == "true":
            (report.unchanged if ours else report.foreign).append(name)
            continue
        if node_done(spec, node) and not ours:
            report.done.append(name)
            continue
        # One merge patch: the label and our claim on it land together or not at all.
        claim = {labels.ANNOTATION_PAUSED_BY: stack, labels.ANNOTATION_PAUSED_REASON: reason[:500]}
        _patch(kube, "pause", name, {"metadata": {"labels": {labels.SKIP_UPGRADE: "true"}, "annotations": claim}},
               report)
        report.changed.append(name)
        on_change("labelled", name)
    return report


def resume(kube: k.Kube, spec: FleetSpec, stack: str,
           on_change: OnChange = lambda action, node: None, *, identity: ClusterIdentity | None = None,
           on_identity: OnIdentity = lambda i: None) -> PauseReport:
    refuse_image_owned(spec, "resume")
    report = PauseReport()
    held = {p.name for p in spec.nodePools if spec.pool_held(p)}
    nodes = _nodes(kube, spec, "resume", identity, on_identity)
    report.validation_held = [h.name for h in held_nodes(nodes)]
    for node, membership in nodes:
        name, node_labels = name_of(node), labels_of(node)
        if annotations_of(node).get(labels.ANNOTATION_PAUSED_BY) != stack:
            if node_labels.get(labels.SKIP_UPGRADE) == "true":
                report.foreign.append(name)
            continue
        drop_claim = {labels.ANNOTATION_PAUSED_BY: None, labels.ANNOTATION_PAUSED_REASON: None}
        if membership.pool.name in held:
            # The stack holds this pool now (pulumi up put the pool-level skip label back): keep the label.
            _patch(kube, "resume", name, {"metadata": {"annotations": drop_claim}}, report)
            report.held.append(name)
            on_change("unclaimed", name)
            continue
        _patch(kube, "resume", name, {"metadata": {"labels": {labels.SKIP_UPGRADE: None}, "annotations": drop_claim}},
               report)
        report.changed.append(name)
        on_change("released", name)
    return report
