"""Watch a rollout: progress per pool, the operator's status and events, and the triggers that pause it.

Triggers: a node in ``upgrade-failed``; a node held by a failed validation (the validation job cordoned it
and recorded why: :mod:`checks.hold`); a model whose available replicas fall below its minAvailable;
a node in one in-progress state longer than ``stuck_after``; a model's SLO (``models[].slo``, else relative to its
own baseline) breached on a pool being upgraded for as long as it declares, or no figure of it for as long
(:mod:`checks.slo`, read from Prometheus); outside the stack's
maintenance window (``rollout.maintenanceWindow``), a node of a released pool in ``upgrade-required`` without
the skip label, which the operator would start now (``outside-window``: the pause re-adds the skip label to the
nodes not done, and a node already upgrading finishes its upgrade). Time in state is the earliest of: the
operator's latest ``GPUDriverUpgrade`` event moving the node into that state (events expire after
about an hour), the ``time`` of the node's ``metadata.managedFields`` entry that owns the state label
(a lower bound: that manager may have written the node since), and when this watch first saw the node
in that state. So a node stuck for hours is reported on the first poll, ``--once`` included.

On a trigger the watch pauses the rollout (unless told not to); a pause that fails is reported with
the trigger, never instead of it. With a node held by a failed validation it also evicts the node's model
pods where the stack says so (``FleetSpec.evicts_on_failed_validation``), through the Eviction API so their
PDBs decide: a refusal is asked again at each interval until every such pod is gone or ``stuck_after``
has passed (with ``once``: at the next run), never forced. In loop mode a poll that fails after the adapter's retries is
reported and retried at the next interval; ``max_failed_polls`` consecutive failures end the watch.
Time is injected (``clock``, ``sleep``), so tests never wait.

Before the first poll reads anything further, the watch checks that the cluster is the stack's
(:func:`checks.identity.require_stack_cluster`): another cluster raises
:class:`checks.errors.WrongClusterError`, so it never auto-pauses nodes of the wrong cluster. A pool's
nodes are found by :func:`fleetspec.membership.node_membership` (project label, cloud pool label or the
declared selector), and a model's available replicas are its Ready pods (:mod:`checks.progress`).

On a stack whose node image owns the driver (``driver.owner: image``) none of that applies: there is
no upgrade-state label to follow and no operator upgrade to pause. The watch then follows the pools
by generation instead (:mod:`checks.generations`: its own snapshot, done rule, triggers and JSON
shape) and, on a trigger, reports it and stops without writing anything, a held node included (its
model pods are moved off by hand there: `kubectl drain`, which evicts too).

JSON of the operator snapshot (:meth:`Snapshot.as_json`; ``gpu-rollout watch --json`` adds ``"stack"``,
``"paused"`` and ``"pauseError"``)::

    {"owner": "operator", "at": <epoch seconds>,
     "pools": [{"pool", "target", "held", "done", "total", "skipped", "paused",
                "states": {"<upgrade state>" | "(none)": <nodes>}}],
     "nodes": [{"name", "pool", "state", "driver", "done", "secondsInState", "skipped", "pausedBy"}],
     "models": [{"model": "ns/name", "available", "minAvailable", "replicas"}],
     "operator": [{"kind", "name", "state"}], "events": [{"node", "message"}],
     "triggers": [{"kind": "upgrade-failed" | "validation-failed" | "below-min-available" | "stuck" |
                   "outside-window" | "slo-breach" | "slo-no-data" | "validation-missing" (the guard's), "subject",
                   "message"}],
     "slo": [{"model", "pool", "metric", "objective", "forSeconds", "latest", "breached", "noData", "default",
              "baseline", "figures", "expected", "pods", "error"}]}

and, beside ``"paused"``, ``"evictions"``: ``{"evicted", "refused", "failed", "kept"}`` (pods ``ns/name``) or null.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from checks import kube as k
from checks.errors import ClusterError, GaveUpError, RetryableError
from checks.generations import ImageSnapshot, take_image_snapshot
from checks.hold import Evictions, HeldNode, evict_model_pods, held_nodes
from checks.identity import ClusterIdentity, require_stack_cluster
from checks.inventory import pool_nodes_of
from checks.nodestate import node_done, node_driver_version, require_nodes
from checks.objects import Obj, annotations_of, labels_of, meta, name_of, status_of
from checks.pause import ChangeInterrupted, PauseReport, pause
from checks.progress import StateTracker, Trigger, epoch, label_written_at, list_model_pods, model_rows
from checks.prometheus import Prometheus
from checks.results import few
from checks.slo import SloReading, slo_of, unanswered_since
from gpu_knowledge import kinds, labels
from fleetspec.membership import Membership
from fleetspec.model import DriverOwner, FleetSpec, NodePool
from vocabulary.triggers import TriggerKind
from workload import result as job_result

EVENT_REASON = "GPUDriverUpgrade"


@dataclass(frozen=True)
class NodeProgress:
    name: str
    pool: str
    state: str  # "" when the node has no upgrade-state label
    driver: str | None
    done: bool
    seconds_in_state: float | None
    skipped: bool
    paused_by: str | None = None  # the stack whose `gpu-rollout pause` (or the train's halt) set the skip label

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "pool": self.pool, "state": self.state, "driver": self.driver, "done": self.done,
                "secondsInState": None if self.seconds_in_state is None else round(self.seconds_in_state),
                "skipped": self.skipped, "pausedBy": self.paused_by}


def _all_done(pools: list[dict[str, Any]]) -> bool:
    return all(p["held"] or p["done"] == p["total"] for p in pools)


@dataclass
class Snapshot:
    at: float
    nodes: list[NodeProgress]
    models: list[dict[str, Any]]
    operator: list[dict[str, str]]
    events: list[dict[str, str]]
    triggers: list[Trigger]
    held: list[HeldNode] = field(default_factory=list)  # nodes held by a failed validation
    slo: list[SloReading] = field(default_factory=list)  # the models' objectives on the pools being upgraded

    def pools(self, spec: FleetSpec) -> list[dict[str, Any]]:
        out = []
        for pool in spec.nodePools:
            nodes = [n for n in self.nodes if n.pool == pool.name]
            out.append({"pool": pool.name, "target": spec.pool_target(pool).driver, "held": spec.pool_held(pool),
                        "done": sum(n.done for n in nodes), "total": len(nodes),
                        "skipped": sum(n.skipped for n in nodes),
                        "paused": sum(n.skipped and n.paused_by is not None for n in nodes),
                        "states": dict(sorted(Counter(n.state or "(none)" for n in nodes).items()))})
        return out

    def complete(self, spec: FleetSpec) -> bool:
        """Every node of every released pool runs its target driver and is upgrade-done."""
        return _all_done(self.pools(spec))


# k8s-operator-libs: "Successfully updated node state label to cordon-required"; older releases and the
# docs put the state in brackets ("... to [cordon-required]").
_STATE_MESSAGE = re.compile(r"label to \[?([a-z-]+)\]?$")


def _entered_at(events: list[Obj]) -> dict[tuple[str, str], float]:
    """(node, state) -> when the operator last reported moving the node into that state (Normal events)."""
    out: dict[tuple[str, str], float] = {}
    for event in events:
        if event.get("type", "Normal") != "Normal":
            continue
        match = _STATE_MESSAGE.search((event.get("message") or "").strip())
        when = epoch(event.get("lastTimestamp") or event.get("eventTime") or meta(event).get("creationTimestamp"))
        if match is None or when is None:
            continue
        key = ((event.get("involvedObject") or {}).get("name", ""), match.group(1))
        out[key] = max(when, out.get(key, 0.0))
    return out


@dataclass(frozen=True)
class ClusterObjects:
    """What one look at the cluster reads, whoever reads it: `watch` by LISTs (:func:`read_objects`), the guard
    from its watch streams (:mod:`checks.guard`). Both judge it with :func:`snapshot_of`, so each trigger has one
    home."""

    nodes: list[Obj]  # every node (the stack's are found by membership)
    deployments: list[Obj]
    pods: dict[str, list[Obj]]  # each declared model's pods ("namespace/name" -> pods)
    events: list[Obj]  # the operator's GPUDriverUpgrade events about nodes
    policies: list[Obj]  # ClusterPolicies
    drivers: list[Obj]  # NVIDIADrivers


EVENT_SELECTOR = f"involvedObject.kind={kinds.NODE.kind},reason={EVENT_REASON}"


def read_objects(kube: k.Kube, spec: FleetSpec, listed: list[Obj] | None = None) -> ClusterObjects:
    """One poll's LISTs: nodes (unless ``listed`` holds every node already), Deployments, the operator's events,
    ClusterPolicies, NVIDIADrivers and each model's pods, whatever the fleet's size."""
    return ClusterObjects(kube.list(k.NODES) if listed is None else listed, kube.list(k.DEPLOYMENTS),
                          list_model_pods(kube, spec), kube.list(k.EVENTS, field_selector=EVENT_SELECTOR),
                          kube.list_optional(k.CLUSTER_POLICIES) or [], kube.list_optional(k.NVIDIA_DRIVERS) or [])


def take_snapshot(kube: k.Kube, spec: FleetSpec, tracker: StateTracker, now: float,
                  stuck_after: float, listed: list[Obj] | None = None, prometheus: Prometheus | None = None) -> Snapshot:
    """One poll (:func:`read_objects`), judged by :func:`snapshot_of`."""
    return snapshot_of(spec, read_objects(kube, spec, listed), tracker, now, stuck_after, prometheus)


def snapshot_of(spec: FleetSpec, seen: ClusterObjects, tracker: StateTracker, now: float, stuck_after: float,
                prometheus: Prometheus | None = None, validation_deadline: float | None = None,
                what: str = "watch") -> Snapshot:
    """Every trigger on what was read: each node's (``upgrade-failed``, ``stuck``), ``outside-window``, the
    validation's holds (``validation-failed``), with ``validation_deadline`` (seconds) a node upgraded without a
    result for longer (``validation-missing``), the models (``below-min-available``) and, with ``prometheus``,
    their SLOs on the pools being upgraded (``slo-breach``)."""
    nodes = pool_nodes_of(spec, seen.nodes)
    require_nodes(nodes, spec, what)
    entered = _entered_at(seen.events)
    progress, triggers = [], []
    for node, membership in nodes:
        row = _progress_of(spec, node, membership.pool, entered, tracker, now)
        progress.append(row)
        triggers += node_triggers(spec, row, membership.pool, stuck_after)
    triggers += _outside_window(spec, progress, now)
    held = held_nodes(nodes)
    triggers += [h.trigger() for h in held]
    if validation_deadline is not None:
        triggers += validation_missing(spec, nodes, progress, validation_deadline)
    models, model_triggers = model_rows(spec, seen.deployments, seen.pods)
    triggers += model_triggers
    slo = slo_of(prometheus, spec, seen.pods, nodes, now)
    unanswered_since(slo, tracker, now)
    triggers += [r.trigger() for r in slo if r.triggered]
    operator = [{"kind": o.get("kind", kind), "name": name_of(o), "state": str(status_of(o).get("state", "?"))}
                for kind, objs in ((kinds.CLUSTER_POLICY.kind, seen.policies), (kinds.NVIDIA_DRIVER.kind, seen.drivers))
                for o in objs]
    recent = sorted(seen.events,
                    key=lambda e: epoch(e.get("lastTimestamp") or meta(e).get("creationTimestamp")) or 0)
    event_rows = [{"node": (e.get("involvedObject") or {}).get("name", ""), "message": e.get("message", "")}
                  for e in recent[-10:]]
    return Snapshot(now, progress, models, operator, event_rows, triggers, held, slo)


def _progress_of(spec: FleetSpec, node: Obj, pool: NodePool, entered: dict[tuple[str, str], float],
                 tracker: StateTracker, now: float) -> NodeProgress:
    node_labels = labels_of(node)
    name = name_of(node)
    state = node_labels.get(labels.UPGRADE_STATE, "")
    since = None
    if state:
        seen = [entered.get((name, state)), label_written_at(node, labels.UPGRADE_STATE), tracker.since(name, state, now)]
        since = min(t for t in seen if t is not None)
    seconds = None if since is None else max(0.0, now - since)
    return NodeProgress(name, pool.name, state, node_driver_version(node), node_done(spec, node), seconds,
                        node_labels.get(labels.SKIP_UPGRADE) == "true",
                        annotations_of(node).get(labels.ANNOTATION_PAUSED_BY) or None)


def node_triggers(spec: FleetSpec, row: NodeProgress, pool: NodePool, stuck_after: float) -> list[Trigger]:
    """``upgrade-failed`` and ``stuck``: what one node's upgrade state says."""
    if row.state == labels.UPGRADE_FAILED:
        return [Trigger(TriggerKind.UPGRADE_FAILED, row.name,
                        f"node {row.name} (pool {row.pool}) is in {labels.UPGRADE_FAILED}")]
    if row.state in labels.UPGRADE_IN_PROGRESS and row.seconds_in_state is not None:
        limit, why = stuck_limit(spec, pool, row.state, stuck_after)
        if row.seconds_in_state > limit:
            return [Trigger(TriggerKind.STUCK, row.name,
                            f"node {row.name} has been in {row.state} for {row.seconds_in_state / 60:.0f} min "
                            f"(threshold {limit / 60:.0f} min{why})")]
    return []


def validation_missing(spec: FleetSpec, nodes: list[tuple[Obj, Membership]], progress: list[NodeProgress],
                       deadline: float) -> list[Trigger]:
    """``validation-missing``: a node of a validated pool (``validation`` set, the pool released) that finished its
    upgrade on its pool's target driver longer than ``deadline`` seconds ago with no validation result for that
    driver (neither passed nor failed: the job never ran there, e.g. its GPUs were never freed or its image never
    pulled). A failed result is ``validation-failed``; without a result the operator would move on to the next node."""
    if spec.validation is None:
        return []
    rows = {row.name: row for row in progress}
    out = []
    for node, membership in nodes:
        row = rows[name_of(node)]
        if (spec.pool_held(membership.pool) or not row.done or row.state != labels.UPGRADE_DONE
                or row.seconds_in_state is None or row.seconds_in_state <= deadline or row.driver is None):
            continue
        validated = labels_of(node).get(job_result.LABEL_VALIDATED_DRIVER)
        if validated and job_result.driver_matches(validated, row.driver):
            continue
        out.append(Trigger(TriggerKind.VALIDATION_MISSING, row.name,
                           f"node {row.name} (pool {row.pool}) finished its upgrade to {row.driver} "
                           f"{row.seconds_in_state / 60:.0f} min ago and has no validation result for it (deadline "
                           f"{deadline / 60:.0f} min): the validation job did not run there"))
    return out


# The in-progress states where the upgrade controller itself waits up to a timeout of the upgrade policy.
_POLICY_TIMEOUTS = {labels.WAIT_FOR_JOBS_REQUIRED: ("waitForCompletion", "timeoutSeconds"),
                    labels.POD_DELETION_REQUIRED: ("podDeletion", "timeoutSeconds"),
                    labels.DRAIN_REQUIRED: ("drain", "timeoutSeconds")}


def stuck_limit(spec: FleetSpec, pool: NodePool, state: str, stuck_after: float) -> tuple[float, str]:
    """How long a node of ``pool`` may stay in ``state`` before the watch calls it stuck, and why when it is not
    ``stuck_after``: the controller waits in some states up to a timeout of the policy that rolls the pool
    (``FleetSpec.upgrade_policy``: the pool's own keys, else the stack's), so a node is stuck only past the longer
    of the two. A timeout of 0 waits forever; ``stuck_after`` still holds then."""
    where = _POLICY_TIMEOUTS.get(state)
    if where is None or spec.driver.owner != DriverOwner.OPERATOR:
        return stuck_after, ""
    block, key = where
    timeout = getattr(getattr(spec.upgrade_policy(pool), block), key)
    if timeout <= stuck_after:
        return stuck_after, ""
    if pool.upgradePolicy is None:
        return float(timeout), f": gpuOperator.upgradePolicy.{block}.{key} {timeout}"
    index = [p.name for p in spec.nodePools].index(pool.name)
    return float(timeout), f": nodePools[{index}].upgradePolicy.{block}.{key} {timeout}, pool {pool.name}"


def _outside_window(spec: FleetSpec, progress: list[NodeProgress], now: float) -> list[Trigger]:
    """Outside the stack's maintenance window no new node starts: a trigger when the operator would start one (a
    node of a released pool waiting in ``upgrade-required`` without the skip label)."""
    window = spec.rollout.maintenanceWindow
    if window is None:
        return []
    moment = datetime.fromtimestamp(now, UTC)
    if window.is_open(moment):
        return []
    released = {p.name for p in spec.nodePools if not spec.pool_held(p)}
    waiting = [n.name for n in progress if n.pool in released and n.state == labels.UPGRADE_REQUIRED and not n.skipped]
    if not waiting:
        return []
    upgrading = [n.name for n in progress if n.state in labels.UPGRADE_IN_PROGRESS]
    finishing = f"; {len(upgrading)} node(s) already upgrading finish ({few(upgrading)})" if upgrading else ""
    return [Trigger(TriggerKind.OUTSIDE_WINDOW, window.timeZone,
                    f"the rollout is {window.verdict(moment)}: {len(waiting)} node(s) would start their upgrade "
                    f"({few(waiting)}){finishing}")]


@dataclass
class WatchOutcome:
    snapshot: Snapshot | ImageSnapshot
    paused: PauseReport | None  # set when the watch paused the rollout itself (partial if pause_error)
    pause_error: str | None = None  # the auto-pause failed: why (the trigger still stands)
    evictions: Evictions | None = None  # model pods moved off nodes held by a failed validation (auto-pause only)

    @property
    def triggered(self) -> bool:
        return bool(self.snapshot.triggers)


def _retryable(error: ClusterError) -> bool:
    """A poll worth repeating: the adapter gave up on throttling, 5xx or connection errors."""
    return isinstance(error, (GaveUpError, RetryableError))


def watch(kube: k.Kube, spec: FleetSpec, stack: str, *, interval: float = 30.0, stuck_after: float = 3600.0,
          auto_pause: bool = True, once: bool = False, max_failed_polls: int = 5,
          clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
          on_snapshot: Callable[[Snapshot | ImageSnapshot], None] = lambda s: None,
          on_poll_error: Callable[[ClusterError, int], None] = lambda e, n: None,
          on_identity: Callable[[ClusterIdentity], None] = lambda i: None,
          prometheus: Prometheus | None = None) -> WatchOutcome:
    """Poll until a trigger fires (pause unless told not to), the rollout completes, or once.

    On an image-owned stack the snapshot is :class:`checks.generations.ImageSnapshot` and a trigger
    never pauses (there is no operator upgrade to hold): the outcome carries it with ``paused`` None.

    A failed poll raises at once with ``once`` or when the error is permanent (403, no nodes, another
    cluster); otherwise it is reported through ``on_poll_error(error, consecutive_failures)`` and the watch
    raises only after ``max_failed_polls`` failures in a row. The cluster's identity is checked as part of
    the first poll and reported once through ``on_identity``.
    """
    image_owned = spec.driver.owner == DriverOwner.IMAGE
    poll = take_image_snapshot if image_owned else take_snapshot
    tracker = StateTracker()
    failures = 0
    identity: ClusterIdentity | None = None
    while True:
        try:
            listed = None
            if identity is None:  # the first poll's node LIST serves the identity check too
                listed = kube.list(k.NODES)
                identity = require_stack_cluster(kube, spec, listed)
                on_identity(identity)
            snapshot = poll(kube, spec, tracker, clock(), stuck_after, listed, prometheus)
        except ClusterError as error:
            failures += 1
            if once or not _retryable(error):
                raise
            on_poll_error(error, failures)
            if failures >= max_failed_polls:
                raise GaveUpError(f"watch gave up after {failures} consecutive failed polls; last: {error}") from error
            sleep(interval)
            continue
        failures = 0
        on_snapshot(snapshot)
        if snapshot.triggers:
            if not auto_pause or image_owned:
                return WatchOutcome(snapshot, None)
            outcome = WatchOutcome(snapshot, None)
            reason = "; ".join(t.message for t in snapshot.triggers)
            try:
                outcome.paused = pause(kube, spec, stack, reason, identity=identity)
            except ChangeInterrupted as error:
                outcome.paused, outcome.pause_error = error.report, str(error)
            except ClusterError as error:
                outcome.pause_error = str(error)
            if snapshot.held:
                outcome.evictions = _move_model_pods_off(kube, spec, snapshot.held, once=once, interval=interval,
                                                         patience=stuck_after, clock=clock, sleep=sleep)
            return outcome
        if once or snapshot.complete(spec):
            return WatchOutcome(snapshot, None)
        sleep(interval)


def _move_model_pods_off(kube: k.Kube, spec: FleetSpec, held: list[HeldNode], *, once: bool, interval: float,
                         patience: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> Evictions:
    """Evict the held nodes' model pods; a refused or failed eviction is asked again every ``interval`` for at
    most ``patience`` seconds (once: not at all). What was evicted adds up over the rounds."""
    start = clock()
    done = Evictions()
    while True:
        try:
            this = evict_model_pods(kube, spec, held)
        except ClusterError as error:  # listing the model pods failed: report it as this round's failure
            this = Evictions(failed=[f"listing the model pods: {error}"])
        done.evicted += this.evicted
        done.refused, done.failed, done.kept = this.refused, this.failed, this.kept
        if once or not this.pending or clock() - start + interval > patience:
            return done
        sleep(interval)
