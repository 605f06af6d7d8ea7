"""Preflight: every live check of the runbook's opening and sections 1-2, read-only.

One inventory read (a fixed number of LISTs), then the cluster's identity
(:func:`checks.identity.judge`: another cluster raises :class:`checks.errors.WrongClusterError` before
any check runs; an unconfirmed one is the ``cluster-identity`` warning), then pure check functions over
the inventory. Nothing here writes to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable

from checks import compatibility, disruption, owner
from checks import kube as k
from checks.identity import ClusterIdentity, Verdict, judge, refuse_if_refuted
from checks.inventory import Inventory, read_inventory
from checks.results import SECTIONS, CheckResult, passed, warned
from spec.model import FleetSpec


def identity_result(identity: ClusterIdentity) -> CheckResult:
    status = passed if identity.verdict == Verdict.CONFIRMED else warned
    return status("cluster-identity", "cluster", identity.message)


def _identity(inventory: Inventory) -> list[CheckResult]:
    return [identity_result(judge(inventory.spec, inventory.identity_records, inventory.nodes))]


CHECKS: dict[str, Callable[[Inventory], list[CheckResult]]] = {
    "cluster-identity": _identity,
    "pool-membership": owner.check_pool_membership,
    "cluster-policy": owner.check_cluster_policy,
    "driver-owner": owner.check_driver_owner,
    "per-pool-mode": owner.check_per_pool_mode,
    "two-driver-owners": owner.check_two_driver_owners,
    "driver-versions": owner.check_driver_versions,
    "node-image": owner.check_node_image,
    "gpu-supported-by-driver": compatibility.check_gpu_supported_by_driver,
    "serving-images-cuda": compatibility.check_serving_images_cuda,
    "operator-supports-driver": compatibility.check_operator_supports_driver,
    "kernel-precompiled": owner.check_kernel_precompiled,
    "fabric-manager": owner.check_fabric_manager,
    "mig-timeslicing": owner.check_mig_timeslicing,
    "change-ticket": disruption.check_change_ticket,
    "spare-capacity": disruption.check_spare_capacity,
    "model-replicas": disruption.check_model_replicas,
    "model-pdb": disruption.check_model_pdb,
    "pdb-blocks-drain": disruption.check_pdb_blocks_drain,
    "readiness-probe": disruption.check_readiness_probe,
    "weights-cache": disruption.check_weights_cache,
}
assert list(CHECKS) == list(SECTIONS), "every check id has a runbook section, in the same order"


def evaluate(inventory: Inventory) -> list[CheckResult]:
    results: list[CheckResult] = []
    for check in CHECKS.values():
        results.extend(check(inventory))
    return results


def run_preflight(kube: k.Kube, spec: FleetSpec) -> list[CheckResult]:
    """Read the cluster once, refuse another cluster, and run every check; ClusterError propagates (no
    partial report), WrongClusterError included."""
    inventory = read_inventory(kube, spec)
    refuse_if_refuted(kube, judge(spec, inventory.identity_records, inventory.nodes))
    return evaluate(inventory)
