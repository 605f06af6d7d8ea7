"""The guard (`gpu-rollout guard`, docs/guard.md): one stack's cluster watched without a person, through the
Kubernetes watch API.

Its objects come from watch streams (:mod:`checks.informer`: one LIST each, then the changes), kept as the slim
records the LISTs keep (:mod:`checks.slim`): every node, the Deployments, each declared model's pods (its namespace
and matchLabels), the operator's ``GPUDriverUpgrade`` events, ClusterPolicies and NVIDIADrivers. A change is judged
``settle`` seconds after it arrives (a burst once), and everything at least every ``tick`` seconds (the triggers that
time alone fires: stuck, outside the window, the validation deadline), by the same function `watch` judges its
LISTs with (:func:`checks.watch.snapshot_of`), so each trigger has one home. Between rollouts it also judges drift
(:mod:`checks.drift`), which alerts and never pauses. Prometheus (the SLOs, Xids, DCGM Exporter silence) is asked
at most every ``prometheus_every`` seconds; in between, the last answer stands.

Of two or more replicas one leads, elected on a Lease in the guard's namespace (:class:`checks.lease.TrainLease`,
taken as leader election takes one); every replica watches, judges and serves metrics, only the leader writes. On a
trigger the leader pauses the stack exactly as `pause` does (:func:`checks.pause.pause`, with the triggers as the
reason), moves the model pods off a node a failed validation holds through the Eviction API where `watch` would
(``FleetSpec.evicts_on_failed_validation``; a refusal is asked again at each look for ``stuck_after`` at most), and
records why: a Warning Event on the node and on the NVIDIADriver that owns it (else the ClusterPolicy), and, for a
bad sign, the halt record of the cluster's fleet Lease (``kube-system/gpu-driver-upgrade-fleet``), which the fleet's
train reads. A trigger is acted on once while it stands; a pause that failed is tried again at the next look. Its
status (triggers, drift, paused, when) is written on the same Lease every look that changes it and at least every
``status_every`` seconds, so `fleet status` and `advance` read it seconds old.

An image-owned stack (``driver.owner: image``) has no operator upgrade to pause: the guard judges its drift only.
Before anything else the guard checks that the cluster is the stack's (:func:`checks.identity.require_stack_cluster`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from checks import kube as k
from checks.drift import Drift, metric_drift, node_drift
from checks.errors import ClusterError
from checks.hold import Evictions, evict_model_pods
from checks.identity import ClusterIdentity, require_stack_cluster
from checks.informer import Informer
from checks.inventory import pool_nodes_of
from checks.lease import LeaseHeld, TrainLease, micro_time
from checks.objects import Obj, annotations_of, labels_of, name_of
from checks.owner import driver_owner_among
from checks.pause import ChangeInterrupted, pause
from checks.progress import StateTracker, Trigger, epoch, model_key, model_selector
from checks.prometheus import Prometheus
from checks.watch import EVENT_SELECTOR, ClusterObjects, Snapshot, snapshot_of
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from fleetspec.membership import Membership
from fleetspec.model import DriverOwner, FleetSpec
from gpu_knowledge import kinds, labels
from workload import result as job_result

COMPONENT = "gpu-rollout-guard"  # the Events' source, the Lease's default name
REASON_TRIGGER = "GPURolloutPaused"
REASON_DRIFT = "GPUFleetDrift"
EVENT_NAMESPACE = "default"  # where a cluster-scoped object's Events go, as kubectl's do
SHOWN = 20  # triggers and drift written in the status annotation
# The streams, by the kind they follow (the metrics' ``kind`` label); a model's pods are "pods:<namespace>/<name>".
NODES, DEPLOYMENTS, EVENTS = kinds.NODE.plural, kinds.DEPLOYMENT.plural, kinds.EVENT.plural
POLICIES, DRIVERS = kinds.CLUSTER_POLICY.plural, kinds.NVIDIA_DRIVER.plural
EVENTS_PER_LOOK = 20  # new triggers, and new drift, recorded as Events in one look: a burst is not a flood


@dataclass(frozen=True)
class GuardSettings:
    stuck_after: float = 3600.0  # seconds in one upgrade state before a node is stuck (watch's default)
    validation_deadline: float = 1800.0  # seconds after its upgrade a node must have a validation result
    tick: float = 15.0  # every trigger is judged at least this often
    settle: float = 0.5  # after a change, wait this long for more before judging
    lease_duration: int = 15  # seconds a leader that stopped renewing keeps the Lease
    renew_every: float = 5.0
    prometheus_every: float = 60.0
    status_every: float = 30.0  # the status on the fleet Lease is written at least this often
    watch_timeout: int = 300  # each watch stream's timeoutSeconds


@dataclass
class Assessment:
    """One look: the watch's snapshot (None on an image-owned stack, or when it could not be judged), the drift."""

    at: float
    snapshot: Snapshot | None
    drift: list[Drift]
    nodes: list[Obj]  # the stack's nodes, as judged
    error: str | None = None  # why the triggers could not be judged (no node of the stack's pools...)
    states: Counter[tuple[str, str]] = field(default_factory=Counter)  # (pool, upgrade state or "none") -> nodes
    validation: dict[str, tuple[Counter[str], float | None]] = field(default_factory=dict)  # validation_ages
    seconds: float = 0.0  # how long judging took

    @property
    def triggers(self) -> list[Trigger]:
        return list(self.snapshot.triggers) if self.snapshot is not None else []


@dataclass
class Leadership:
    """This replica's view of the guard's Lease."""

    identity: str
    leader: bool = False
    holder: str | None = None
    renewed: float | None = None  # when this replica last renewed (leader) or read the Lease (follower)
    transitions: int = 0  # times this replica became the leader
    silenced_until: float | None = None  # ANNOTATION_GUARD_SILENCED_UNTIL on the Lease, as last read

    def silenced(self, now: float) -> bool:
        return self.silenced_until is not None and now < self.silenced_until


@dataclass
class Counters:
    triggers: Counter[str] = field(default_factory=Counter)  # kind -> triggers acted on
    pauses: int = 0
    pause_failures: int = 0
    evictions: int = 0
    events: int = 0
    event_failures: int = 0
    looks: int = 0
    look_failures: int = 0


class Guard:
    """One stack's guard. :meth:`sync` and :meth:`look` run it a step at a time (tests); :meth:`start` runs it."""

    def __init__(self, kube: k.Kube, spec: FleetSpec, stack: str, identity: str, *, lease_namespace: str,
                 lease_name: str = COMPONENT, settings: GuardSettings | None = None,
                 prometheus: Prometheus | None = None, clock: Callable[[], float] = time.time,
                 notify: Callable[[str], None] = lambda line: None,
                 on_look: Callable[[Assessment], None] = lambda a: None,
                 on_pause: Callable[[list[Trigger]], None] = lambda triggers: None) -> None:
        self.kube, self.spec, self.stack = kube, spec, stack
        self.settings = settings or GuardSettings()
        self.prometheus, self.clock, self.notify, self.on_look = prometheus, clock, notify, on_look
        self.on_pause = on_pause  # after a pause this replica made: who else is told (the model owners' webhook)
        self.operator_owned = spec.driver.owner == DriverOwner.OPERATOR
        self.leadership = Leadership(identity)
        self.election = TrainLease(kube, lease_namespace, lease_name, identity, self.settings.lease_duration, clock)
        self.fleet_lease = TrainLease(kube, LEASE_NAMESPACE, LEASE_NAME, f"{COMPONENT}/{stack}",
                                      self.settings.lease_duration, clock)
        self.counters = Counters()
        self.tracker = StateTracker()
        self.identity: ClusterIdentity | None = None
        self.last: Assessment | None = None
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acted: set[tuple[str, str]] = set()
        self._drift_said: set[tuple[str, str]] = set()
        self._pause_pending = False
        self._paused_now = 0  # nodes the last pause of this look holds (the streams see them at the next look)
        self._evicting_since: float | None = None
        self._evicted_at: float | None = None
        self._metric_drift: list[Drift] = []
        self._slo_triggers: list[Trigger] = []
        self._asked_prometheus: float | None = None
        self._status_written: tuple[float, str] | None = None
        self.informers = self._informers()

    # ------------------------------------------------------------ what it watches

    def _informers(self) -> dict[str, Informer]:
        def informer(resource: k.Resource, **kwargs: Any) -> Informer:
            return Informer(self.kube, resource, on_change=self._changed.set, notify=self.notify,
                            timeout_seconds=self.settings.watch_timeout, **kwargs)

        found = {NODES: informer(k.NODES)}
        if self.operator_owned:
            found[DEPLOYMENTS] = informer(k.DEPLOYMENTS)
            found[EVENTS] = informer(k.EVENTS, field_selector=EVENT_SELECTOR)
            found[POLICIES] = informer(k.CLUSTER_POLICIES, optional=True)
            found[DRIVERS] = informer(k.NVIDIA_DRIVERS, optional=True)
            for model in self.spec.models:
                found[f"pods:{model_key(model)}"] = informer(k.PODS, namespace=model.namespace,
                                                             label_selector=model_selector(model))
        return found

    def objects(self) -> ClusterObjects:
        got = self.informers
        pods = {model_key(m): got[f"pods:{model_key(m)}"].values() for m in self.spec.models} \
            if self.operator_owned else {}

        def values(name: str) -> list[Obj]:
            return got[name].values() if name in got else []

        return ClusterObjects(values(NODES), values(DEPLOYMENTS), pods, values(EVENTS), values(POLICIES),
                              values(DRIVERS))

    @property
    def live(self) -> bool:
        """Every watch stream is listed and open (or reopening after a clean end)."""
        return all(i.live for i in self.informers.values())

    def healthy(self) -> bool:
        """Watching, looking (the last look within four ticks and a minute), and the Lease current: the leader
        renewed, or the follower read it, within its duration."""
        renewed, last, now = self.leadership.renewed, self.last, self.clock()
        return (self.live and renewed is not None and now - renewed <= self.settings.lease_duration
                and last is not None and now - last.at <= 4 * self.settings.tick + 60)

    # ------------------------------------------------------------ one step at a time

    def sync(self) -> None:
        """List every kind afresh, then check that the cluster is the stack's (on the same node list)."""
        for informer in self.informers.values():
            informer.relist()
        if self.identity is None:
            self.identity = require_stack_cluster(self.kube, self.spec, self.informers[NODES].values())

    def elect(self) -> Leadership:
        """Take or renew the guard's Lease; a replica that cannot tell (the API fails) stops leading once its
        last renewal is older than the Lease's duration."""
        me, now = self.leadership, self.clock()
        try:
            state = self.election.renew() if me.leader else self.election.acquire()
            if not me.leader:
                me.transitions += 1
                self.notify(f"leading: Lease {self.election.namespace}/{self.election.name} taken")
            me.leader, me.holder, me.renewed = True, state.holder, now
            me.silenced_until = _silenced_until(state.raw)
        except LeaseHeld:
            if me.leader:
                self.notify("no longer leading: another replica holds the Lease")
            current = self.election.read()
            me.leader, me.holder, me.renewed = False, current.holder if current else None, now
            me.silenced_until = _silenced_until(current.raw) if current else None
        except ClusterError as error:
            self.notify(f"Lease {self.election.namespace}/{self.election.name}: {error}")
            if me.leader and (me.renewed is None or now - me.renewed > self.settings.lease_duration):
                me.leader = False
                self.notify("no longer leading: the Lease could not be renewed within its duration")
        return me

    def assess(self, now: float | None = None) -> Assessment:
        """Judge what the streams hold now: the watch's triggers and the drift."""
        now = self.clock() if now is None else now
        started = time.monotonic()
        seen = self.objects()
        nodes = pool_nodes_of(self.spec, seen.nodes)
        ask = self.prometheus is not None and (
            self._asked_prometheus is None or now - self._asked_prometheus >= self.settings.prometheus_every)
        snapshot, error = None, None
        if self.operator_owned:
            try:
                snapshot = snapshot_of(self.spec, seen, self.tracker, now, self.settings.stuck_after,
                                       self.prometheus if ask else None, self.settings.validation_deadline, "guard")
            except ClusterError as exc:
                error = str(exc)
        if snapshot is not None:
            if ask:
                self._slo_triggers = [r.trigger() for r in snapshot.slo if r.breached]
            else:  # between two looks at Prometheus its last answer stands
                snapshot.triggers += self._slo_triggers
        if ask and self.prometheus is not None:
            self._metric_drift = metric_drift(self.prometheus, nodes)
            self._asked_prometheus = now
        drift = node_drift(self.spec, nodes, now, self.settings.validation_deadline) + self._metric_drift
        states = Counter((m.pool.name, labels_of(n).get(labels.UPGRADE_STATE) or "none") for n, m in nodes)
        return Assessment(now, snapshot, drift, [n for n, _ in nodes], error, states,
                          validation_ages(nodes, now), time.monotonic() - started)

    def look(self, now: float | None = None) -> Assessment:
        """One look: judge, act where this replica leads, publish."""
        found = self.assess(now)
        self.counters.looks += 1
        if self.leadership.leader:
            self.act(found)
        self.last = found
        self.on_look(found)
        return found

    # ------------------------------------------------------------ what the leader does

    def act(self, found: Assessment) -> None:
        if self.leadership.silenced(found.at):  # planned work: judged and reported, nothing written but the status
            self._write_status(found)
            return
        triggers = found.triggers
        self._paused_now = 0
        standing = {(t.kind.value, t.subject) for t in triggers}
        new = [t for t in triggers if (t.kind.value, t.subject) not in self._acted]
        self._acted &= standing  # a trigger that went and comes back is acted on again
        if triggers and (new or self._pause_pending):
            self._pause(triggers)
            for index, trigger in enumerate(new):
                self.counters.triggers[trigger.kind.value] += 1
                if index < EVENTS_PER_LOOK:  # the rest are in the pause's reason, the status and the metrics
                    self._record(trigger, found)
            bad = [t for t in new if t.kind.bad_sign]
            if bad:
                self._halt(bad)
            self._acted |= {(t.kind.value, t.subject) for t in new}
        if found.snapshot is not None and found.snapshot.held:
            self._evict(found)
        else:
            self._evicting_since = self._evicted_at = None
        self._say_drift(found.drift, found.nodes)
        self._write_status(found)

    def _pause(self, triggers: list[Trigger]) -> None:
        reason = "gpu-rollout guard: " + "; ".join(t.message for t in triggers)
        try:
            report = pause(self.kube, self.spec, self.stack, reason, identity=self.identity)
        except ChangeInterrupted as error:
            self._pause_pending = True
            self.counters.pause_failures += 1
            self.notify(f"pause stopped midway: {error}")
            return
        except ClusterError as error:
            self._pause_pending = True
            self.counters.pause_failures += 1
            self.notify(f"pause failed: {error}; tried again at the next look")
            return
        self._pause_pending = False
        self._paused_now = len(report.changed) + len(report.unchanged)
        self.counters.pauses += 1
        self.notify(f"paused {self.stack}: {len(report.changed)} node(s) labelled, {len(report.unchanged)} already "
                    f"paused; {reason}")
        if report.changed:
            self.on_pause(triggers)

    def _evict(self, found: Assessment) -> None:
        assert found.snapshot is not None
        now = found.at
        if self._evicting_since is None:
            self._evicting_since = now
        if now - self._evicting_since > self.settings.stuck_after:
            return  # as watch: asked for stuck_after at most, never forced
        if self._evicted_at is not None and now - self._evicted_at < self.settings.tick:
            return  # a refusal is asked again a tick later, not at every change
        self._evicted_at = now
        try:
            done = evict_model_pods(self.kube, self.spec, found.snapshot.held)
        except ClusterError as error:
            done = Evictions(failed=[f"listing the model pods: {error}"])
        self.counters.evictions += len(done.evicted)
        if done.evicted or done.pending:
            self.notify(done.describe())

    def _owners(self, node: Obj | None, found: Assessment) -> list[Obj]:
        """The operator objects a trigger is recorded on: the NVIDIADriver owning the node, else the
        ClusterPolicies (for a trigger about no node: every NVIDIADriver where there is no ClusterPolicy)."""
        drivers = self.informers[DRIVERS].values() if DRIVERS in self.informers else []
        policies = self.informers[POLICIES].values() if POLICIES in self.informers else []
        if node is not None:
            owner = driver_owner_among(drivers, node, True)
            if owner is not None:
                return [d for d in drivers if name_of(d) == owner]
        return policies or drivers

    def _record(self, trigger: Trigger, found: Assessment) -> None:
        node = next((n for n in found.nodes if name_of(n) == trigger.subject), None)
        targets = ([node] if node is not None else []) + self._owners(node, found)
        for target in targets:
            self._event(target, REASON_TRIGGER, f"{trigger.kind}: {trigger.message}; the guard paused stack "
                        f"{self.stack}", found.at)

    def _say_drift(self, drift: list[Drift], nodes: list[Obj]) -> None:
        by_name = {name_of(n): n for n in nodes}
        standing = {(d.kind.value, d.subject) for d in drift}
        self._drift_said &= standing
        said = 0
        for item in drift:
            key = (item.kind.value, item.subject)
            if key in self._drift_said:
                continue
            self._drift_said.add(key)
            node = by_name.get(item.subject)
            if node is not None and said < EVENTS_PER_LOOK:  # beyond: the metrics and the status count it
                said += 1
                self._event(node, REASON_DRIFT, f"{item.kind}: {item.message} (an alert: nothing was paused)",
                            self.clock())

    def _event(self, target: Obj, reason: str, message: str, at: float) -> None:
        kind = str(target.get("kind") or kinds.NODE.kind)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        body = {
            "apiVersion": kinds.EVENT.api_version, "kind": kinds.EVENT.kind,
            "metadata": {"name": f"{name_of(target)}.{int(at * 1e6):x}{self.counters.events:x}"[:253],
                         "namespace": EVENT_NAMESPACE},
            "involvedObject": {"apiVersion": str(target.get("apiVersion") or "v1"), "kind": kind,
                               "name": name_of(target), "uid": (target.get("metadata") or {}).get("uid")},
            "reason": reason, "message": message[:1024], "type": "Warning",
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": self.leadership.identity, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.kube.create(k.EVENTS, body, EVENT_NAMESPACE)
            self.counters.events += 1
        except ClusterError as error:
            self.counters.event_failures += 1
            self.notify(f"the Event on {kind} {name_of(target)} could not be written: {error}")

    def _halt(self, bad: list[Trigger]) -> None:
        cause = f"guard of stack {self.stack}: " + "; ".join(t.message for t in bad)
        try:
            self.fleet_lease.record_halt(cause)
        except ClusterError as error:
            self.notify(f"the halt record could not be written: {error}")

    def paused_nodes(self, found: Assessment) -> int:
        """The stack's nodes this stack's pause holds (its annotation and the skip label)."""
        seen = sum(1 for n in found.nodes if annotations_of(n).get(labels.ANNOTATION_PAUSED_BY) == self.stack
                   and labels_of(n).get(labels.SKIP_UPGRADE) == "true")
        return max(seen, self._paused_now)

    def status(self, found: Assessment) -> dict[str, Any]:
        """What the fleet reads of this guard (``ANNOTATION_GUARD_STATUS``)."""
        until = self.leadership.silenced_until if self.leadership.silenced(found.at) else None
        return {"at": micro_time(found.at), "holder": self.leadership.identity,
                "silencedUntil": micro_time(until) if until is not None else None,
                "paused": self.paused_nodes(found) > 0, "error": found.error,
                "triggers": [t.as_json() for t in found.triggers[:SHOWN]],
                "drift": [d.as_json() for d in found.drift[:SHOWN]], "driftCount": len(found.drift)}

    def _write_status(self, found: Assessment) -> None:
        status = self.status(found)
        text = json.dumps({key: value for key, value in status.items() if key != "at"}, sort_keys=True)
        last = self._status_written
        if last is not None and last[1] == text and found.at - last[0] < self.settings.status_every:
            return
        try:
            self.fleet_lease.record_guard(self.stack, status)
            self._status_written = (found.at, text)
        except ClusterError as error:
            self.notify(f"the guard's status could not be written on the fleet Lease: {error}")

    # ------------------------------------------------------------ running

    def start(self) -> None:
        """Sync, then run the streams, the election and the looks in threads until :meth:`stop`."""
        self.sync()
        self.stream()
        self.elect()
        self._spawn("election", self._elect_loop)
        self._spawn("looks", self._look_loop)

    def stream(self) -> None:
        """Run every watch stream in a thread of its own until :meth:`stop`."""
        for name, informer in self.informers.items():
            self._spawn(f"watch {name}", informer.run, self._stop)

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()
        if self.leadership.leader:
            try:
                self.election.release()
            except ClusterError as error:
                self.notify(f"the Lease could not be released: {error}")

    def wait(self, timeout: float | None = None) -> bool:
        """Until stopped (True) or ``timeout`` passed (False)."""
        return self._stop.wait(timeout)

    def _elect_loop(self) -> None:
        while not self._stop.wait(self.settings.renew_every):
            self.elect()

    def _look_loop(self) -> None:
        self._changed.set()  # the first look at once
        while not self._stop.is_set():
            changed = self._changed.wait(self.settings.tick)
            if self._stop.is_set():
                return
            if changed:
                self._stop.wait(self.settings.settle)  # a burst of changes is judged once
                self._changed.clear()
            try:
                self.look()
            except Exception as error:  # noqa: BLE001 - a daemon: said and counted (/healthz fails), looked at again
                self.counters.look_failures += 1
                self.notify(f"look failed: {type(error).__name__}: {error}")


def validation_ages(nodes: list[tuple[Obj, Membership]],
                    now: float) -> dict[str, tuple[Counter[str], float | None]]:
    """Per pool: its nodes (``pool_nodes_of``) by their last validation verdict (``passed``, ``failed``, ``none``),
    and the age in seconds of its newest result (None: none)."""
    out: dict[str, tuple[Counter[str], float | None]] = {}
    for node, membership in nodes:
        counts, newest = out.get(membership.pool.name, (Counter(), None))
        node_labels = labels_of(node)
        validated = node_labels.get(job_result.LABEL_VALIDATED_DRIVER)
        verdict = node_labels.get(job_result.LABEL_OUTCOME) if validated else None
        counts[verdict if verdict in (job_result.PASSED, job_result.FAILED) else "none"] += 1
        finished = _finished_at(annotations_of(node).get(job_result.result_annotation(validated))) if validated \
            else None
        if finished is not None:
            age = max(0.0, now - finished)
            newest = age if newest is None else min(newest, age)
        out[membership.pool.name] = (counts, newest)
    return out


def _silenced_until(lease: Obj) -> float | None:
    """When a person's silence on the guard's Lease ends; an unreadable one silences nothing (and is said in the
    metrics as not silenced)."""
    return epoch(annotations_of(lease).get(labels.ANNOTATION_GUARD_SILENCED_UNTIL))


def _finished_at(text: str | None) -> float | None:
    try:
        doc = json.loads(text or "")
    except ValueError:
        return None
    return epoch(doc.get("finishedAt")) if isinstance(doc, dict) else None
