"""Preflight: every live check of the runbook's opening and sections 1-2, read-only.

One inventory read (a fixed number of LISTs), then pure check functions over it. Nothing here writes
to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable

from checks import compatibility, disruption, owner
from checks import kube as k
from checks.inventory import Inventory, read_inventory
from checks.results import SECTIONS, CheckResult
from spec.model import FleetSpec

CHECKS: dict[str, Callable[[Inventory], list[CheckResult]]] = {
    "driver-owner": owner.check_driver_owner,
    "two-driver-owners": owner.check_two_driver_owners,
    "driver-versions": owner.check_driver_versions,
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
    """Read the cluster once and run every check; ClusterError propagates (no partial report)."""
    return evaluate(read_inventory(kube, spec))
