"""`gpu-rollout init --from-cluster`: the stack files' pools from what the cluster runs (:mod:`cloud_pools.read`),
each adopting its cloud pool by its import ID (``aks.adopt`` / ``eks.adopt``), and what init could not read, in
notes for the team."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cloud_pools.read import CloudPool, ManagedCluster
from gpu_knowledge import cloud_gpus
from fleetspec.pools import Generation

AKS_OS_SKUS = ("Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux", "AzureLinux3")  # fleetspec.pools.AksPool.osSku
EKS_GENERATION = re.compile(r"^(?P<pool>.+)-g(?P<id>[1-9][0-9]*)$")  # how the program names a pool's generation


@dataclass
class Pools:
    """The pools of the two stacks, and what the team must still decide."""

    cluster: ManagedCluster
    canary: list[dict[str, Any]] = field(default_factory=list)
    prod: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """What init read and wrote, and each note, for after its next steps."""
        pools = [f"{p['name']} (canary)" for p in self.canary] + [f"{p['name']} (prod)" for p in self.prod]
        return (f"read from the cluster: {', '.join(pools) or 'no GPU pool'}; each adopted by its ID (docs/adopt.md); "
                "models left for you to declare\n" + "".join(f"  note: {note}\n" for note in self.notes))


def _rollout(canary: bool) -> dict[str, Any]:
    # A prod pool is held until the team releases it (after the canary's attestation): wave 1, not released.
    return {"wave": 0, "released": True} if canary else {"wave": 1, "released": False}


def _gpu(pool: CloudPool, notes: list[str]) -> cloud_gpus.CloudGpu | None:
    rows = [row for row in map(cloud_gpus.any_size, pool.sizes) if row is not None]
    if not rows:
        what = ", ".join(pool.sizes) or "a size only its launch template sets"
        notes.append(f"{pool.name}: {what} is no GPU size gpu_knowledge/cloud_gpus.py knows: left out (declare it by "
                     "hand if it is a GPU pool)")
        return None
    return rows[0]


def _aks_pool(pool: CloudPool, gpu: cloud_gpus.CloudGpu, canary: bool, notes: list[str]) -> dict[str, Any]:
    aks: dict[str, Any] = {"vmSize": pool.sizes[0]}
    if pool.os_sku in AKS_OS_SKUS:
        aks["osSku"] = pool.os_sku
    if pool.max_surge and pool.max_surge not in ("0", "0%"):
        aks["maxSurge"] = pool.max_surge
    if pool.zones:
        aks["availabilityZones"] = list(pool.zones)
    aks["adopt"] = pool.import_id
    if pool.gpu_driver not in (None, "None"):
        notes.append(f"{pool.name}: gpuProfile.driver is {pool.gpu_driver} (AKS installs a driver): with driver.owner "
                     "operator the stack sends None, which AKS cannot change in place: policy cloud-pool-not-replaced "
                     "refuses it, move the pool by a new one")
    return {"name": pool.name, "role": "canary" if canary else "serving", "gpuProduct": gpu.product,
            "gpusPerNode": gpu.gpus, "nodeCount": pool.count, **({"nvswitch": True} if gpu.nvswitch else {}),
            "rollout": _rollout(canary), "aks": aks}


def _eks_pool(pool: CloudPool, gpu: cloud_gpus.CloudGpu, canary: bool, driver: str,
              notes: list[str]) -> dict[str, Any] | None:
    named = EKS_GENERATION.fullmatch(pool.name)
    if named is None:
        notes.append(f"{pool.name}: an image-owned EKS pool moves by generations named <pool>-g<id>; this node group "
                     "cannot be adopted under its name: left out (a new generation beside it can replace it)")
        return None
    eks: dict[str, Any] = {"adopt": pool.import_id}
    if pool.sizes:
        eks["instanceTypes"] = list(pool.sizes)
    if pool.ami_type:
        eks["amiType"] = pool.ami_type
    if pool.capacity_type:
        eks["capacityType"] = pool.capacity_type
    if pool.max_unavailable:
        eks["maxUnavailable"] = pool.max_unavailable
    if pool.launch_template:
        eks["launchTemplate"] = dict(pool.launch_template)
    elif pool.disk_size:
        eks["diskSize"] = pool.disk_size
    try:  # as the stack file's model reads it (fleetspec.pools.Generation), so a release it refuses is not written
        generation = Generation(id=int(named["id"]), driverVersion=driver, releaseVersion=pool.node_image)
    except ValueError:
        notes.append(f"{pool.name}: releaseVersion {pool.node_image!r} is no AMI release a stack file takes: left out")
        generation = Generation(id=int(named["id"]), driverVersion=driver)
    notes.append(f"{named['pool']}: generation {named['id']} is node group {pool.name}; its driverVersion is set to "
                 f"{driver}: put the driver its AMI release {pool.node_image or '?'} carries")
    return {"name": named["pool"], "role": "canary" if canary else "serving", "gpuProduct": gpu.product,
            "gpusPerNode": gpu.gpus, "nodeCount": pool.count, **({"nvswitch": True} if gpu.nvswitch else {}),
            "rollout": _rollout(canary), "eks": eks,
            "generations": [generation.model_dump(mode="json", exclude_none=True, exclude_defaults=True)]}


def pools_of(cluster: ManagedCluster, cloud: str, canary_pools: tuple[str, ...], driver: str) -> Pools:
    """Each GPU pool the cluster runs, adopted: those named in ``canary_pools`` in the canary stack, the others in
    prod. System pools and sizes with no GPU are left out, said in the notes."""
    found = Pools(cluster)
    for pool in cluster.pools:
        if pool.system:
            continue
        gpu = _gpu(pool, found.notes)
        if gpu is None:
            continue
        canary = pool.name in canary_pools
        made = _aks_pool(pool, gpu, canary, found.notes) if cloud == "aks" else \
            _eks_pool(pool, gpu, canary, driver, found.notes)
        if made is not None:
            (found.canary if canary else found.prod).append(made)
        elif canary:
            found.notes.append(f"{pool.name}: named by --canary-pool but left out (above): the canary stack needs a "
                               "pool of its own")
        if pool.labels:
            found.notes.append(f"{pool.name}: its own node labels ({', '.join(f'{k}={v}' for k, v in sorted(pool.labels.items()))}) "
                               "are not declared: the first `up` sets the pool's labels to the project's, so "
                               "nothing may select these nodes by them any more")
    return found


def read(cloud: str, canary_pools: tuple[str, ...], driver: str, *, subscription: str | None, group: str | None,
         cluster: str, region: str | None, endpoint: str | None) -> Pools:
    """Read the cluster through its cloud's API with the credentials in use (Azure: the identity
    DefaultAzureCredential finds; AWS: the environment's keys, SigV4) and make the two stacks' pools of it;
    :class:`refusals.errors.ClusterFailed` when the API refuses or a named canary pool is not there."""
    from cloud_credentials.credentials import AwsSigV4, AzureToken
    from cloud_pools import read as reads
    from refusals.errors import ClusterFailed, InvalidInput

    try:
        if cloud == "aks":
            found = reads.read_aks(subscription or "", group or "", cluster, AzureToken(scope=reads.ARM_SCOPE),
                                   endpoint=endpoint or reads.ARM_ENDPOINT)
        else:
            found = reads.read_eks(region or "", cluster, AwsSigV4(region or "", service=reads.EKS_SERVICE),
                                   endpoint=endpoint)
    except reads.CloudReadError as error:
        raise ClusterFailed(f"init --from-cluster: {error}") from None
    missing = sorted(set(canary_pools) - {p.name for p in found.pools})
    if missing:
        raise InvalidInput(f"init --from-cluster: --canary-pool {', '.join(missing)}: no such pool in the cluster "
                           f"(it runs: {', '.join(p.name for p in found.pools) or 'none'})")
    return pools_of(found, cloud, canary_pools, driver)
