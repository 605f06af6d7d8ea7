"""What `gpu-rollout verify` read, as plain values: the facts :mod:`checks.verify_read` gathers and the checks of
:mod:`checks.validation` judge.

The soak is a window, from its start (the last upgraded node's finished upgrade) to now, cut into buckets
(``validation.bucketMinutes``, an hour by default) anchored at the start; what Prometheus showed is kept per
bucket, per node and per pod at scrape resolution, never sampled at a coarse step. Also here: which nodes are
upgraded and when each finished, which the soak schedule (:mod:`checks.soak`) reads too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from checks.inventory import pool_nodes_of
from checks.identity import ClusterIdentity
from checks.nodestate import node_driver_version, upgrade_state
from checks.objects import Obj, annotations_of, name_of
from checks.progress import epoch, label_written_at
from checks.serving import Figures
from gpu_knowledge import labels
from fleetspec.model import FleetSpec, Model, NodePool, ServingEngine
from workload import result as job_result

# What was read, by its names: the check messages name them too.
VALIDATOR_LABEL = ("app", "nvidia-operator-validator")  # the operator validator's pods (reference 5)
DCGM_SERIES = "DCGM_FI_DEV_GPU_UTIL"  # in dcgm-exporter's default counters; carries DCGM_FI_DRIVER_VERSION
DCGM_DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"  # a gauge: the last Xid (dcgm-exporter default-counters.csv)
DCGM_XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"  # Xids per `xid` label over the exporter's window, where exported
KSM_INFO = "kube_pod_info"  # kube-state-metrics: where each pod ran (node, pod_ip, created_by_*)
KSM_RESTARTS = "kube_pod_container_status_restarts_total"
KSM_TERMINATED = "kube_pod_container_status_last_terminated_reason"
NO_PROMETHEUS = "no Prometheus: pass --prometheus URL, or set validation.prometheus in the stack"
MIN_BUCKET_SECONDS = 300  # a last bucket shorter than this is left out (too short to judge)


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- which nodes, which driver, since when


@dataclass(frozen=True)
class UpgradedNode:
    node: Obj
    pool: NodePool
    target: str  # the driver the node must run now

    @property
    def name(self) -> str:
        return name_of(self.node)


def upgraded_nodes(spec: FleetSpec, nodes: list[Obj]) -> list[UpgradedNode]:
    """The nodes of every pool the stack moves (an image-owned pool's newest generation's), with their target."""
    found = []
    for node, membership in pool_nodes_of(spec, nodes):
        pool = membership.pool
        target = spec.pool_target(pool)
        if not target.moves:
            continue
        if target.generation is not None and (membership.generation is None or membership.generation.id != target.generation):
            continue  # an older generation's node: it leaves with its generation, it is not upgraded
        found.append(UpgradedNode(node, pool, target.driver))
    return found


def not_yet_upgraded(spec: FleetSpec, nodes: list[Obj]) -> dict[str, list[Obj]]:
    """Pool -> the nodes of each pool the stack moves that do not run its target yet (an image-owned pool's older
    generations, an operator pool's nodes still on the old driver): what the pool advertised before the change."""
    found: dict[str, list[Obj]] = {}
    for node, membership in pool_nodes_of(spec, nodes):
        target = spec.pool_target(membership.pool)
        if not target.moves or target.driver is None:
            continue
        reported = node_driver_version(node)
        if reported is None or not job_result.driver_matches(target.driver, reported):
            found.setdefault(membership.pool.name, []).append(node)
    return found


def validation_result(node: Obj, target: str) -> tuple[job_result.Result | None, str | None]:
    """The job's result on ``node`` for ``target`` (parsed by the job's own reader), or why there is none."""
    text = annotations_of(node).get(job_result.result_annotation(target))
    if text is None:
        return None, None
    try:
        return job_result.parse_result(text), None
    except ValueError as exc:
        return None, f"annotation {job_result.result_annotation(target)} is not a valid result: {exc}"


def upgrade_finished_at(node: Obj, target: str) -> float | None:
    """When the node's upgrade finished: the operator's write of ``upgrade-done`` (the managedFields time of the
    state label), else when the validation job started on it for ``target`` (the job starts only on an
    upgraded node); None when the cluster shows neither."""
    if upgrade_state(node) == labels.UPGRADE_DONE:
        written = label_written_at(node, labels.UPGRADE_STATE)
        if written is not None:
            return written
    parsed, _ = validation_result(node, target)
    return epoch(parsed.startedAt) if parsed is not None else None


# ---------------------------------------------------------------- the window and its buckets


@dataclass(frozen=True)
class Bucket:
    index: int  # 1-based, from the soak's start
    start: float
    end: float
    length: float  # the window's bucket length (the last bucket may be shorter)

    def name(self) -> str:
        unit = "hour" if self.length == 3600 else "day" if self.length == 86400 else "bucket"
        return f"{unit} {self.index} ({stamp(self.start)} to {stamp(self.end)})"

    def as_json(self) -> dict[str, Any]:
        return {"bucket": self.index, "start": stamp(self.start), "end": stamp(self.end)}


@dataclass(frozen=True)
class Window:
    """The soak from ``start`` to ``end``, in buckets of ``bucket`` seconds anchored at ``start``."""

    start: float
    end: float
    bucket: float

    @property
    def full(self) -> int:
        """Whole buckets in the window."""
        return max(0, int((self.end - self.start) // self.bucket))

    def buckets(self) -> list[Bucket]:
        out = [Bucket(i + 1, self.start + i * self.bucket, self.start + (i + 1) * self.bucket, self.bucket)
               for i in range(self.full)]
        rest_start = self.start + self.full * self.bucket
        if self.end - rest_start >= MIN_BUCKET_SECONDS:
            out.append(Bucket(self.full + 1, rest_start, self.end, self.bucket))
        return out

    def as_json(self) -> dict[str, Any]:
        return {"start": stamp(self.start), "end": stamp(self.end), "bucketSeconds": int(self.bucket),
                "hours": round((self.end - self.start) / 3600, 2)}


# ---------------------------------------------------------------- models


@dataclass(frozen=True)
class Probe:
    """What asking one model pod on an upgraded node gave."""

    model: str  # namespace/name of the declared model
    pod: str  # namespace/name
    node: str
    ready: bool
    outcome: str  # answered | failed | not-ready | denied | unknown-engine
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)


BaselineKind = Literal["old-driver pods", "before the upgrade"]


@dataclass(frozen=True)
class Baseline:
    """What a model's new-driver pods are compared with: old-driver pods of the same GPU product and GPUs per pod
    over the same buckets, else the model's own pods over a window before their upgrade."""

    kind: BaselineKind
    pods: list[str]  # the old-driver pods; before the upgrade: the pattern of the model's pod names
    description: str
    start: float | None = None  # before the upgrade: the window compared with
    end: float | None = None
    ends: str | None = None  # before the upgrade: why the window ends where it does

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "pods": self.pods, "description": self.description}
        if self.start is not None and self.end is not None:
            out["window"] = {"start": stamp(self.start), "end": stamp(self.end), "ends": self.ends}
        return out


@dataclass(frozen=True)
class BucketFigures:
    bucket: Bucket
    new: Figures
    baseline: Figures  # the same bucket of old-driver pods, or the window before the upgrade


@dataclass
class Comparison:
    """A model's new-driver pods (one GPU product and GPUs per pod) against its like-for-like baseline, bucket by
    bucket across the soak."""

    model: Model
    engine: ServingEngine | None
    product: str | None  # GFD product of the new-driver pods' nodes
    gpus_per_pod: int | None
    new_pods: list[str]
    baseline: Baseline | None = None
    reason: str | None = None  # why nothing was compared
    excluded: list[str] = field(default_factory=list)  # old-driver pods left out as not like for like, and why
    buckets: list[BucketFigures] = field(default_factory=list)
    whole: tuple[Figures, Figures] | None = None  # (new, baseline) over the whole window
    queries: dict[str, str] = field(default_factory=dict)  # "<metric> new|old" -> the PromQL (one part of a split)
    errors: list[str] = field(default_factory=list)  # queries Prometheus did not answer

    @property
    def subject(self) -> str:
        return f"{self.model.namespace}/{self.model.name}"


@dataclass(frozen=True)
class Restart:
    """Restarts of one container of a model pod on an upgraded node within one bucket."""

    pod: str
    container: str
    node: str
    bucket: Bucket | None  # None: from the pod's own status (when it happened within the window is not known)
    restarts: int
    oom_killed: bool  # the OOM killer ended the container in that bucket (its last termination's reason)


@dataclass
class Restarts:
    """A model's restarts on the upgraded nodes during the window, from where they could be read."""

    model: Model
    source: str  # kube-state-metrics | the pods' status
    pods: list[str]  # the model's pods on upgraded nodes that were looked at
    restarts: list[Restart] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what could not be read, named
    error: str | None = None
    buckets: list[Bucket] = field(default_factory=list)  # the soak's buckets
    judged: set[int] = field(default_factory=set)  # those kube-state-metrics showed the pods' restart counts in


# ---------------------------------------------------------------- DCGM


@dataclass(frozen=True)
class XidEvent:
    node: str
    gpu: str
    xid: int
    at: float
    source: str  # the series it was read from


@dataclass
class NodeXids:
    """Every Xid one node's GPUs logged from its own upgrade's end to now, at scrape resolution."""

    node: str
    since: float | None
    source: str | None = None  # DCGM_EXP_XID_ERRORS_COUNT where exported, else DCGM_FI_DEV_XID_ERRORS
    series: int = 0
    events: list[XidEvent] = field(default_factory=list)


@dataclass
class DcgmNode:
    """DCGM Exporter's series for one node in the last 5 minutes: how many carry each driver label."""

    node: str
    drivers: dict[str, int] = field(default_factory=dict)  # DCGM_FI_DRIVER_VERSION -> series ("" : no label)
    matched_by: str | None = None  # how its series were told to be this node's


@dataclass
class DcgmCoverage:
    """Which buckets of the soak DCGM samples arrived in for each GPU of one upgraded node
    (``count_over_time`` of DCGM_SERIES per bucket): a GPU's bucket without any is not judged."""

    node: str
    gpus: list[str]  # the GPUs judged: the pool's gpusPerNode ("0".."n-1") and any other DCGM showed
    buckets: list[Bucket]
    seen: dict[str, set[int]] = field(default_factory=dict)  # gpu -> bucket indexes with samples

    def missing(self) -> dict[int, list[str]]:
        """Bucket index -> the GPUs with no sample in it."""
        out: dict[int, list[str]] = {}
        for bucket in self.buckets:
            lacking = [g for g in self.gpus if bucket.index not in self.seen.get(g, set())]
            if lacking:
                out[bucket.index] = lacking
        return out


@dataclass
class VerifyFacts:
    spec: FleetSpec
    now: float
    identity: ClusterIdentity
    nodes: list[UpgradedNode]
    operator_pods: dict[str, list[Obj]]  # node -> the operator's pods on it
    finished_at: dict[str, float | None]  # node -> when its upgrade finished (soak start of that node)
    probes: list[Probe]
    comparisons: list[Comparison]
    prometheus: str | None  # where it was read (a URL, or a Service through the proxy); None: none given
    window: Window | None = None  # the soak: None while a node's finished upgrade is not known
    dcgm: dict[str, DcgmNode] = field(default_factory=dict)
    dcgm_error: str | None = None
    dcgm_query: str | None = None
    xids: dict[str, NodeXids] = field(default_factory=dict)
    xid_error: str | None = None
    xid_queries: list[str] = field(default_factory=list)
    restarts: list[Restarts] = field(default_factory=list)
    coverage: dict[str, DcgmCoverage] = field(default_factory=dict)  # node -> DCGM samples per GPU per bucket
    coverage_error: str | None = None
    coverage_query: str | None = None
    exporter_history: str | None = None  # how exporter pods of the past were traced to nodes, or the gap
    # pool -> (model, its pods on the pool's upgraded nodes, requests they served during the soak, or why not known)
    traffic: dict[str, list[tuple[Model, list[str], float | None, str | None]]] = field(default_factory=dict)
    kube_system_uid: str | None = None  # metadata.uid of the kube-system Namespace: the cluster's own identity
    old_nodes: dict[str, list[Obj]] = field(default_factory=dict)  # pool -> its nodes not yet upgraded

    @property
    def soak_start(self) -> float | None:
        """When the last upgraded node finished: the canary as a whole is upgraded from then on."""
        times = [self.finished_at.get(n.name) for n in self.nodes]
        return None if not times or any(t is None for t in times) else max(t for t in times if t is not None)
