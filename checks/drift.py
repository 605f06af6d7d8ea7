"""Drift: what the guard (:mod:`checks.guard`) sees wrong with the stack's GPU nodes between rollouts. Each kind
raises an alert (a metric, an Event on the node), never a pause: nothing is moving that a pause would hold.

- ``other-driver``: a node that is not upgrading (no upgrade-state label, or ``upgrade-done``) runs another driver
  than its pool's target (``FleetSpec.pool_target``), as GFD reports it, in a pool some of whose nodes run the
  target already: a node that joined (autoscaling, repair, reimage) with another driver. A pool none of whose nodes
  has moved yet is a rollout about to start, not drift. Operator-owned stacks only (an image-owned pool's
  generations each run their own).
- ``unvalidated``: where the stack validates (``validation`` set) a node of a released pool, not upgrading, that
  has run for longer than the guard's validation deadline without a passing result for the driver it runs.
- ``gfd-labels``: GFD's ``nvidia.com/gpu.product`` or ``nvidia.com/gpu.count`` contradicts the pool's declaration,
  as preflight's pool-hardware judges it (:func:`checks.cluster.gfd_contradiction`).
- ``xid``, ``dcgm-silent``: where Prometheus is configured, a node whose DCGM Exporter reported a new Xid over the
  last ``XID_WINDOW`` (``DCGM_FI_DEV_XID_ERRORS`` changed; 43 and 45 are what a killed process leaves and are
  ignored, as verify ignores them), and a node for which no DCGM Exporter series is there at all. A node is found
  in a series by the node labels the exporter deployments use (``checks.soak_metrics.DCGM_NODE_LABELS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checks.cluster import gfd_contradiction
from checks.nodestate import node_driver_version, upgrade_state
from checks.objects import Obj, labels_of, meta, name_of
from checks.progress import epoch
from checks.prometheus import Prometheus, PrometheusError, regex_union
from checks.soak_metrics import DCGM_NODE_LABELS
from checks.validation import EXPECTED_XIDS
from checks.verify_facts import DCGM_SERIES, DCGM_XID
from fleetspec.membership import Membership
from fleetspec.model import DriverOwner, FleetSpec
from gpu_knowledge import labels
from vocabulary.triggers import DriftKind
from workload import result as job_result

XID_WINDOW = "10m"  # a new Xid within this long is drift now


@dataclass(frozen=True)
class Drift:
    kind: DriftKind
    subject: str  # the node (or the Prometheus, when it cannot be read)
    pool: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "pool": self.pool, "message": self.message}


def node_drift(spec: FleetSpec, nodes: list[tuple[Obj, Membership]], now: float,
               validation_deadline: float) -> list[Drift]:
    """``other-driver``, ``unvalidated`` and ``gfd-labels`` on the stack's nodes (``pool_nodes_of``)."""
    out: list[Drift] = []
    operator_owned = spec.driver.owner == DriverOwner.OPERATOR
    # A pool whose rollout has not begun (none of its nodes on the target yet) is a rollout pending, not drift.
    arrived = {m.pool.name for n, m in nodes if upgrade_state(n) in ("", labels.UPGRADE_DONE)
               and (running := node_driver_version(n)) is not None
               and job_result.driver_matches(spec.pool_target(m.pool).driver, running)}
    for node, membership in nodes:
        pool, name, node_labels = membership.pool, name_of(node), labels_of(node)
        settled = upgrade_state(node) in ("", labels.UPGRADE_DONE)
        running = node_driver_version(node)
        target = spec.pool_target(pool).driver
        if (operator_owned and settled and running is not None and pool.name in arrived
                and not job_result.driver_matches(target, running)):
            out.append(Drift(DriftKind.OTHER_DRIVER, name, pool.name,
                             f"node {name} (pool {pool.name}) runs driver {running}, not its pool's target {target} "
                             f"({spec.pool_target(pool).why})"))
        if (spec.validation is not None and settled and running is not None and not spec.pool_held(pool)
                and _age(node, now) > validation_deadline and not _passed(node_labels, running)):
            outcome = node_labels.get(job_result.LABEL_OUTCOME)
            validated = node_labels.get(job_result.LABEL_VALIDATED_DRIVER)
            why = (f"its last result is {outcome} for driver {validated}" if outcome and validated
                   else "it has no validation result")
            out.append(Drift(DriftKind.UNVALIDATED, name, pool.name,
                             f"node {name} (pool {pool.name}) runs driver {running} and {why}"))
        wrong = gfd_contradiction(name, node_labels, pool)
        if wrong is not None:
            out.append(Drift(DriftKind.GFD_LABELS, name, pool.name,
                             f"pool {pool.name} declares {pool.gpusPerNode} x {pool.gpuProduct}, but {wrong}"))
    return out


def _passed(node_labels: dict[str, Any], running: str) -> bool:
    validated = node_labels.get(job_result.LABEL_VALIDATED_DRIVER)
    return (node_labels.get(job_result.LABEL_OUTCOME) == job_result.PASSED and bool(validated)
            and job_result.driver_matches(str(validated), running))


def _age(node: Obj, now: float) -> float:
    created = epoch(meta(node).get("creationTimestamp"))
    return now - created if created is not None else float("inf")


def _node_of(series_labels: dict[str, str], names: set[str]) -> str | None:
    return next((series_labels[key] for key in DCGM_NODE_LABELS if series_labels.get(key) in names), None)


def metric_drift(prometheus: Prometheus, nodes: list[tuple[Obj, Membership]]) -> list[Drift]:
    """``xid`` and ``dcgm-silent`` for the stack's nodes, in two instant queries; a Prometheus that cannot be read
    is said as one ``dcgm-silent`` about itself (missing evidence is never a pass)."""
    pool_of = {name_of(node): membership.pool.name for node, membership in nodes}
    if not pool_of:
        return []
    names = set(pool_of)
    selector = " or ".join(f'{DCGM_SERIES}{{{key}=~"{regex_union(sorted(names))}"}}' for key in DCGM_NODE_LABELS)
    by = ", ".join(DCGM_NODE_LABELS)
    xid_expr = f"max by ({by}) ({DCGM_XID}) and max by ({by}) (changes({DCGM_XID}[{XID_WINDOW}]) > 0)"
    try:
        seen = {_node_of(s.labels, names) for s in prometheus.query(f"count by ({by}) ({selector})")}
        xids = [(node, int(s.value)) for s in prometheus.query(xid_expr)
                if (node := _node_of(s.labels, names)) is not None]
    except PrometheusError as error:
        return [Drift(DriftKind.DCGM_SILENT, prometheus.where, "", f"Prometheus {prometheus.where} could not be "
                      f"read ({error}): Xid errors and DCGM Exporter silence are not seen")]
    out = [Drift(DriftKind.DCGM_SILENT, name, pool_of[name],
                 f"node {name} (pool {pool_of[name]}): no {DCGM_SERIES} series in Prometheus {prometheus.where}: "
                 "its DCGM Exporter is silent or gone") for name in sorted(names - seen)]
    out += [Drift(DriftKind.XID, node, pool_of[node],
                  f"node {node} (pool {pool_of[node]}) reported Xid {xid} within the last {XID_WINDOW}")
            for node, xid in sorted(xids) if xid not in EXPECTED_XIDS]
    return out
