"""What each cluster of a fleet shows of its stacks, for `gpu-rollout fleet status` and `fleet advance`.

Each stack is read as `gpu-rollout watch --once --no-auto-pause` reads it (:func:`checks.watch.watch`: the
cluster's identity first, then one poll with every trigger the watch knows), so the train halts on exactly what the
watch would pause a stack for. :func:`observe_all` reads the clusters concurrently, one thread per stack, since
each read waits on its API server; a cluster that cannot be read is reported as such, never as healthy.

:func:`preflight_failures` is what `gpu-rollout preflight` fails on one stack, judged before the train brings it up;
:func:`smoke_verify` is `gpu-rollout verify --smoke` on one stack (the checks of runbook section 5; only a failed
check fails it), and :func:`soak_of` what `gpu-rollout soak` reads: when the stack's upgraded nodes finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from checks.quota import CloudQuotas
from checks.registry import Registry
from cloud_credentials.azure_management import AzureManagement
from checks import kube as k
from checks import soak, validation
from checks.catalogue import CATALOGUE
from checks.errors import ClusterError
from checks.generations import ImageSnapshot
from checks.identity import ClusterIdentity, Verdict
from checks.attested import AttestedDrivers
from checks.preflight import run_preflight
from checks.prometheus import Prometheus, for_stack
from checks.progress import Trigger, epoch
from checks.results import CheckResult, Status
from checks.verify_read import gather
from checks.watch import Snapshot, watch
from gpu_knowledge import labels
from fleetspec.model import DriverOwner, FleetSpec
from vocabulary.check_ids import CheckId
from vocabulary.triggers import TriggerKind

STUCK_AFTER = 3600.0  # seconds in one upgrade state before a node counts as stuck (watch's default)


@dataclass
class ClusterView:
    """One stack as its cluster shows it now."""

    stack: str
    cluster: str  # the stack's cluster.name
    owner: str  # operator | image
    complete: bool  # every node of every released pool runs its target driver (and, operator: upgrade-done)
    triggers: list[Trigger]
    nodes: int
    done: int
    paused: int  # nodes carrying the operator's skip label
    gpus_unavailable: int  # GPUs of nodes in an upgrade's disruptive states (operator) or not Ready (image)
    pools: list[dict[str, Any]] = field(default_factory=list)
    identity: str = ""  # how the cluster's identity was judged, when not confirmed
    guard: dict[str, Any] | None = None  # what the stack's guard last saw (with_guard); None: it has none

    def as_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "cluster": self.cluster, "owner": self.owner, "complete": self.complete,
                "nodes": self.nodes, "done": self.done, "paused": self.paused,
                "gpusUnavailable": self.gpus_unavailable, "pools": self.pools,
                "triggers": [t.as_json() for t in self.triggers], "identity": self.identity or None,
                "guard": self.guard}


def _gpus_per_node(spec: FleetSpec) -> dict[str, int]:
    return {pool.name: pool.gpusPerNode for pool in spec.nodePools}


def view_of(stack: str, spec: FleetSpec, snapshot: Snapshot | ImageSnapshot, identity: str = "") -> ClusterView:
    gpus = _gpus_per_node(spec)
    pools = snapshot.pools(spec)
    if isinstance(snapshot, ImageSnapshot):
        out = [n for n in snapshot.nodes if not n.ready]
        done = sum(sum(g["nodes"] for g in p["generations"]) for p in pools if p["done"] or p["held"])
        return ClusterView(stack, spec.cluster.name, DriverOwner.IMAGE.value, snapshot.complete(spec),
                           list(snapshot.triggers), len(snapshot.nodes), done, 0,
                           sum(gpus.get(n.pool, 0) for n in out), pools, identity)
    disruptive = (*labels.UPGRADE_IN_PROGRESS, labels.UPGRADE_FAILED)
    out_of_service = [n for n in snapshot.nodes if n.state in disruptive]
    return ClusterView(stack, spec.cluster.name, DriverOwner.OPERATOR.value, snapshot.complete(spec),
                       list(snapshot.triggers), len(snapshot.nodes), sum(n.done for n in snapshot.nodes),
                       sum(n.skipped for n in snapshot.nodes), sum(gpus.get(n.pool, 0) for n in out_of_service),
                       pools, identity)


def observe(kube: k.Kube, spec: FleetSpec, stack: str, now: Callable[[], float] = time.time,
            stuck_after: float = STUCK_AFTER) -> ClusterView:
    """One poll of the stack, as `watch --once --no-auto-pause` makes it (nothing is written), its models' SLOs
    read from the stack's own Prometheus (``validation.prometheus``) as watch reads them."""
    noted: list[ClusterIdentity] = []
    outcome = watch(kube, spec, stack, once=True, auto_pause=False, stuck_after=stuck_after, clock=now,
                    on_identity=noted.append, prometheus=stack_prometheus(kube, spec))
    identity = noted[0].message if noted and noted[0].verdict != Verdict.CONFIRMED else ""
    return view_of(stack, spec, outcome.snapshot, identity)


GUARD_FRESH = 300.0  # seconds: an older guard status is a guard that stopped looking (down, or cannot write)


def with_guard(view: ClusterView, status: Mapping[str, Any] | None, now: float,
               fresh: float = GUARD_FRESH) -> ClusterView:
    """``view`` with what the stack's guard (`gpu-rollout guard`, docs/guard.md) wrote on the cluster's fleet Lease:
    where that status is at most ``fresh`` seconds old, the triggers it sees join the poll's (the guard looks every
    few seconds, this poll once), so the train halts on them as on its own; an older one is said, and taken for
    nothing. A stack without a guard keeps its poll alone (``guard`` None). A trigger kind this release does not know
    is named in ``guard.unknown`` and halts nothing here (the guard's own halt record does)."""
    if status is None:
        return view
    at = epoch(str(status.get("at") or ""))
    age = None if at is None else max(0.0, now - at)
    current = age is not None and age <= fresh
    seen = [t for t in status.get("triggers") or [] if isinstance(t, dict)]
    known = {kind.value for kind in TriggerKind}
    guard = {"at": status.get("at"), "ageSeconds": None if age is None else round(age), "fresh": current,
             "holder": status.get("holder"), "paused": bool(status.get("paused")), "triggers": seen,
             "driftCount": status.get("driftCount") or 0, "drift": status.get("drift") or [],
             "unknown": sorted({str(t.get("kind")) for t in seen} - known)}
    triggers = list(view.triggers)
    if current:
        have = {(t.kind.value, t.subject) for t in triggers}
        triggers += [Trigger(TriggerKind(t["kind"]), str(t.get("subject", "")), f"(guard) {t.get('message', '')}")
                     for t in seen if t.get("kind") in known and (t["kind"], str(t.get("subject", ""))) not in have]
    return replace(view, triggers=triggers, guard=guard)


def guard_summary(guard: Mapping[str, Any]) -> str:
    """One line of what a stack's guard said (``ClusterView.guard``), for `fleet status`."""
    age = guard.get("ageSeconds")
    when = "at an unreadable time" if age is None else f"{age} s ago"
    if not guard.get("fresh"):
        return f"last looked {when}: stopped looking (down, or cannot write); its view is not taken"
    triggers = guard.get("triggers") or []
    return (f"looked {when}" + (", paused" if guard.get("paused") else "")
            + f"; {len(triggers)} trigger(s), {guard.get('driftCount') or 0} drift")


@dataclass(frozen=True)
class Target:
    """A stack to read: its spec and how to reach its cluster (an adapter made when it is read)."""

    stack: str
    spec: FleetSpec
    connect: Callable[[], k.Kube]


def observe_all(targets: list[Target], workers: int = 8, now: Callable[[], float] = time.time
                ) -> dict[str, ClusterView | ClusterError]:
    """Every target read concurrently; a cluster that could not be read maps to its error."""

    def one(target: Target) -> ClusterView | ClusterError:
        try:
            return observe(target.connect(), target.spec, target.stack, now)
        except ClusterError as error:
            return error

    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(targets)))) as pool:
        return dict(zip([t.stack for t in targets], pool.map(one, targets), strict=True))


def stack_prometheus(kube: k.Kube, spec: FleetSpec) -> Prometheus | None:
    """The Prometheus the stack declares (``validation.prometheus``: a URL, or a Service through the API server's
    service proxy), as `verify` and `watch` reach it; None where it declares none."""
    return for_stack(spec.validation.prometheus if spec.validation else None, kube)


def smoke_verify(kube: k.Kube, spec: FleetSpec) -> list[CheckResult]:
    """The failed checks of `gpu-rollout verify --smoke` (runbook section 5) on the stack's upgraded nodes; empty
    when it passes. Inconclusive checks (the soak's metrics, with no Prometheus) are the soak's verify's to judge."""
    facts = gather(kube, spec, stack_prometheus(kube, spec))
    return [r for r in CATALOGUE.run(validation.VERB, facts) if r.status == Status.FAIL]


# The preflight checks that gate the train's `up`s: each compares what the stack declares with what the cluster
# (or its registry, quota and managed cluster) shows, which no `up` changes (the hardware, the driver a held pool
# runs, who owns the driver, the node image and its channel, the precompiled driver the kernels need, the quota
# surge needs, the models' metrics watch reads: a prod model watched blind is no `up`'s to fix). The
# checks of what the `up` itself makes or protects (its pools, its PDBs, the spare capacity its upgrade policy and
# PDBs govern) stay a person's to weigh with `gpu-rollout preflight`, where a first deployment would fail them.
GATING_CHECKS = frozenset({CheckId.POOL_HARDWARE, CheckId.RUNNING_TODAY, CheckId.DRIVER_OWNER,
                           CheckId.TWO_DRIVER_OWNERS, CheckId.DRIVER_VERSIONS, CheckId.NODE_IMAGE,
                           CheckId.ATTESTED_KERNEL, CheckId.SURGE_QUOTA, CheckId.MODEL_METRICS,
                           CheckId.KERNEL_PRECOMPILED, CheckId.NODE_OS_CHANNEL})


def preflight_failures(kube: k.Kube, spec: FleetSpec, attested: AttestedDrivers,
                       quotas: CloudQuotas | None = None, registry: Registry | None = None,
                       management: AzureManagement | None = None) -> list[CheckResult]:
    """The failed gating checks of `gpu-rollout preflight` on the stack (``GATING_CHECKS``), with what the verb
    asks besides the cluster: the canary's attestations of its promoted drivers, the cloud's quota reader
    (surge-quota), the driver image's registry (kernel-precompiled) and Resource Manager (node-os-channel). The
    train brings no stack up past one. Another cluster than the stack's is refused by the identity check, which
    raises."""
    return [r for r in run_preflight(kube, spec, attested, registry, management, quotas)
            if r.status == Status.FAIL and r.id in GATING_CHECKS]


def soak_of(kube: k.Kube, spec: FleetSpec) -> soak.SoakFacts:
    """When the stack's upgraded nodes finished their upgrade (`gpu-rollout soak`'s read)."""
    return soak.read(kube, spec)
