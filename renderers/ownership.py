"""Which objects a stack owns, so two stacks on one cluster never own the same object.

In the default topology the canary and prod stacks share a cluster: the canary stack owns the canary
pool, its NVIDIADriver and its model's PDB; the prod stack owns the ClusterPolicy, the prod pools, their
NVIDIADrivers and the prod PDBs. Two owners of one object would undo each other's `pulumi up`.
"""

from __future__ import annotations

from gpu_knowledge import kinds
from renderers import manifests
from fleetspec.model import ClusterPolicyMode, DriverOwner, FleetSpec


def owned_objects(spec: FleetSpec) -> set[str]:
    """Every object the stack's program creates or patches, as "<kind> <name>"."""
    owned = set()
    for pool in spec.nodePools:
        for generation in manifests.pool_generations(pool):
            owned.add(f"node pool {pool.cloud_name(generation)}")
        if spec.driver.owner == DriverOwner.OPERATOR and spec.gpuOperator.useNvidiaDriverCrd:
            owned.add(f"{kinds.NVIDIA_DRIVER.kind} {manifests.nvidia_driver_name(pool)}")
    if spec.gpuOperator.clusterPolicy != ClusterPolicyMode.EXTERNAL:
        owned.add(f"{kinds.CLUSTER_POLICY.kind} {manifests.CLUSTER_POLICY_NAME}")
    for model in spec.models:
        owned.add(f"{kinds.POD_DISRUPTION_BUDGET.kind} {model.namespace}/{manifests.pdb_name(model)}")
    if spec.guard_enabled:  # the in-cluster guard's objects live in its namespace (cluster-scoped ones per stage)
        owned.add(f"{kinds.NAMESPACE.kind} {spec.guard.namespace}")
    return owned


def shared_objects(first: FleetSpec, second: FleetSpec) -> list[str]:
    """Objects both stacks would own; empty when they work on different clusters."""
    if first.cluster.name != second.cluster.name:
        return []
    return sorted(owned_objects(first) & owned_objects(second))
