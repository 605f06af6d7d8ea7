"""GPU node pools in the FleetSpec: cloud fields, rollout wave and, for image-owned drivers, generations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import Field, StrictBool, field_validator, model_validator

from gpu_knowledge import cloud_ids, labels
from fleetspec.base import NonNegativeInt, PositiveInt, SpecModel, SurgeCount, at, check_label_map, int_or_percent
from fleetspec.operator import UpgradePolicy
from gpu_knowledge.capacity import EksCapacityType, EksUpdateStrategy
from gpu_knowledge.platform import OsId
from gpu_knowledge.versions import DriverVersion, ImageRelease

# A MIG layout name: the value of the node label nvidia.com/mig.config (a Kubernetes label value).
MIG_LAYOUT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

# The EKS API's closed sets for a managed node group (gpu_knowledge/capacity.py reasons about the same values).


class AksPool(SpecModel):
    vmSize: str = Field(
        pattern=r"^Standard_[A-Za-z0-9_]+$",
        description="Azure VM size of the pool. Fixed at creation, like the GPU driver setting (`driver.owner`): a "
        "change is refused against the last deployment (policy `cloud-pool-not-replaced`): add a pool or generation "
        "instead.", examples=["Standard_ND96isr_H100_v5"])
    osSku: Literal["Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux", "AzureLinux3"] = Field(
        "Ubuntu", description="Node OS. `Ubuntu` lets AKS pick 22.04 or 24.04 by Kubernetes version. Azure Linux is "
        "refused with an operator-owned driver (no driver image).", examples=["Ubuntu2204"])
    maxSurge: SurgeCount = Field(
        "1", description="Surge nodes during node-image upgrades, a count or a percentage (kept as a string, as AKS "
        "takes it); 0 is refused (AKS needs surge or unavailable nodes).", examples=["33%"])
    drainTimeoutMinutes: PositiveInt = Field(30, description="How long AKS waits on PDBs per node.", examples=[45])
    nodeSoakMinutes: NonNegativeInt = Field(0, description="Wait after draining a node before reimaging it.",
                                            examples=[10])
    availabilityZones: list[str] | None = Field(None, description="Zones of the pool's nodes; none: AKS's choice.",
                                                examples=[["1", "2"]])
    adopt: str | None = Field(
        None, description="Adopt the agent pool the cluster runs already instead of creating one: its resource ID "
        "(`az aks nodepool show --query id`), in `cluster.aks`'s resource group and cluster, named as the pool (its "
        "oldest live generation's cloud name where it has generations). The program declares it with Pulumi's "
        "`import`; `gpu-rollout plan` marks it `adopt`. Declare the fields it runs (`init --from-cluster` reads "
        "them): a field that differs is changed by the first `up` (docs/adopt.md).",
        examples=["/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-inference/providers/"
                  "Microsoft.ContainerService/managedClusters/aks-inference/agentPools/gpuh100"])

    @field_validator("adopt")
    @classmethod
    def _adopt(cls, value: str | None) -> str | None:
        if value is not None:
            cloud_ids.aks_agent_pool_id(value)
        return value

    @field_validator("maxSurge", mode="before")
    @classmethod
    def _surge(cls, value: object) -> str:
        # The AKS API takes maxSurge as a string: "1" or "33%".
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        surge = int_or_percent(value, "maxSurge")
        if surge in (0, "0%"):
            raise ValueError("maxSurge must be at least 1 (or 1%): AKS refuses a rolling upgrade with neither surge nor unavailable nodes")
        return str(surge)


class LaunchTemplate(SpecModel):
    id: str = Field(pattern=r"^lt-[0-9a-f]{8,17}$", description="Launch template id.",
                    examples=["lt-0c4f2a9b7d1e35a60"])
    version: str = Field(pattern=r"^[1-9][0-9]*$", description="Pinned launch template version: a number as a "
                         "string, never `$Latest`.", examples=["3"])
    os: OsId | None = Field(
        None,
        description="Operating system of the custom AMI the launch template names (its `ImageId`, e.g. Canonical's "
        "Ubuntu EKS AMIs); required for operator-owned drivers, and checked against the operator release's "
        "platform-support table.", examples=["ubuntu22.04"],
    )


DEFAULT_EKS_DISK_GIB = 200  # GPU nodes pull large serving images; EKS's own default (20 GiB) is too small


class EksPool(SpecModel):
    instanceTypes: list[str] | None = Field(
        None,
        min_length=1,
        description="EC2 instance types of the node group. Required without a launch template; refused with "
        "`CAPACITY_BLOCK` (the launch template sets the type, and EKS fails a node group that has both); beside "
        "another launch template, give it only if the template sets none.",
        examples=[["p5.48xlarge"]],
    )
    amiType: Literal[
        "AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64"
    ] | None = Field(
        None, description="For image-owned pools; none: the NVIDIA AL2023 AMI when the image owns the driver. A "
        "standard AMI with `driver.owner: image` is refused (no driver anywhere). With `driver.owner: operator` "
        "every amiType is refused: the operator has no driver image for Amazon Linux or Bottlerocket, and an NVIDIA "
        "AMI would be a second driver; the node group runs the custom Ubuntu AMI of its launch template instead.",
        examples=["AL2023_x86_64_NVIDIA"])
    maxUnavailable: PositiveInt = Field(1, le=100, description="`updateConfig.maxUnavailable` of the node group "
                                        "(EKS: 1-100).")
    updateStrategy: EksUpdateStrategy = Field(
        "DEFAULT", description="`DEFAULT` launches new nodes first (surge); `MINIMAL` terminates old ones first (no "
        "surge, for scarce GPUs).", examples=["MINIMAL"])
    diskSize: PositiveInt | None = Field(
        None, description=f"Root volume GiB (model images are large); none: {DEFAULT_EKS_DISK_GIB} without a launch "
        "template. Refused beside a launch template: its block device mappings decide.", examples=[500]
    )
    capacityType: EksCapacityType = Field(
        "ON_DEMAND", description="A Capacity Block (`CAPACITY_BLOCK`) never surges and needs `launchTemplate`.",
        examples=["CAPACITY_BLOCK"])
    releaseVersion: ImageRelease | None = Field(
        None, description="Pinned AMI release of the node group; image-owned pools with generations pin it per "
        "generation instead. Refused for operator-owned pools: a custom-AMI node group takes none; its launch "
        "template version pins the AMI.", examples=["1.33.5-20251120"])
    launchTemplate: LaunchTemplate | None = Field(
        None, description="The launch template: required with `CAPACITY_BLOCK` (it sets the instance type and names "
        "the reservation) and for operator-owned pools (it names the custom Ubuntu AMI, its `ImageId`). `diskSize` "
        "and `remoteAccess` are never sent beside it.")
    adopt: str | None = Field(
        None, description="Adopt the managed node group the cluster runs already instead of creating one: "
        "`<cluster>:<node group>`, in `cluster.eks.clusterName`, named as the pool (its oldest live generation's "
        "cloud name where it has generations). The program declares it with Pulumi's `import`; `gpu-rollout plan` "
        "marks it `adopt`. Declare the fields it runs (`init --from-cluster` reads them): a field that differs is "
        "changed by the first `up` (docs/adopt.md).", examples=["eks-inference:gpu-h100"])

    @field_validator("adopt")
    @classmethod
    def _adopt(cls, value: str | None) -> str | None:
        if value is not None:
            cloud_ids.eks_node_group_id(value)
        return value

    @model_validator(mode="after")
    def _what_eks_accepts(self) -> Self:
        """The combinations CreateNodegroup refuses, refused here with the key named."""
        if self.capacityType == "CAPACITY_BLOCK" and self.launchTemplate is None:
            raise at(
                ("launchTemplate",),
                "capacityType CAPACITY_BLOCK needs a launch template that names the capacity reservation "
                "(EKS creates Capacity Block node groups only from a custom launch template)",
            )
        if self.capacityType == "CAPACITY_BLOCK" and self.instanceTypes is not None:
            raise at(
                ("instanceTypes",),
                "a Capacity Block's launch template sets the instance type of its reservation, and EKS refuses "
                "instanceTypes beside a launch template that sets one: remove instanceTypes",
            )
        if self.launchTemplate is None and self.instanceTypes is None:
            raise at(("instanceTypes",), "required without a launch template (which EC2 instance types to run)")
        if self.launchTemplate is not None and self.diskSize is not None:
            raise at(
                ("diskSize",),
                "EKS refuses diskSize beside a launch template: set the volume size in the launch template's "
                "block device mappings and remove diskSize",
            )
        return self


class ExistingPool(SpecModel):
    """A pool of a cluster this stack does not create (``cluster.cloud: existing``)."""

    os: OsId | None = Field(
        None, description="Operating system of the pool's nodes, so policy `operator-supports-os` can check it "
        "(advice while undeclared).", examples=["ubuntu24.04"]
    )
    nodeSelector: dict[str, str] = Field(
        min_length=1,
        description="Labels every node of the pool already carries; the pool's NVIDIADriver selects them and the "
        "live checks find the pool's nodes by them. Two pools whose selectors nest (one a subset of the other) are "
        "refused.", examples=[{"gpu.example.com/pool": "h100-serving"}],
    )

    @field_validator("nodeSelector")
    @classmethod
    def _selector(cls, value: dict[str, str]) -> dict[str, str]:
        return check_label_map(value, "nodeSelector")


class Generation(SpecModel):
    """One node-pool generation of an image-owned pool: a pool (or node group) on one node image."""

    id: PositiveInt = Field(description="Unique within the pool; the highest is the newest and cannot be retired.",
                            examples=[2])
    driverVersion: DriverVersion = Field(
        description="Driver the node image ships, an exact release. A held pool may not yet have a live generation "
        "on `driver.version`.", examples=["580.173.02"])
    releaseVersion: ImageRelease | None = Field(None, description="Pinned `releaseVersion` of the node group; "
                                                "required on EKS.", examples=["1.33.5-20251120"])
    nodeImageVersion: ImageRelease | None = Field(
        None, description="AKS node image version, required on AKS; recorded as a tag (AKS takes no node image as "
        "input).", examples=["202511.07.0"])
    retired: StrictBool = Field(False, description="Set once the next generation ran clean for the soak time; its "
                                "cloud pool is then removed.")
    nodeCount: NonNegativeInt | None = Field(
        None,
        description="Nodes of this generation (default: the pool's nodeCount). On a Capacity Block the live "
        "generations share the reservation, so a move shifts nodes from the old generation to the new one.",
    )

    @property
    def image(self) -> str | None:
        """The node image it runs: the EKS AMI release, or the AKS node image version."""
        return self.releaseVersion or self.nodeImageVersion


class PoolRollout(SpecModel):
    wave: NonNegativeInt = Field(0, description="Release order of prod pools, lowest (least critical) first.",
                                 examples=[2])
    released: StrictBool = Field(
        False, description="A held pool (not released, not canary) stays on `driver.previousVersion`. Which brake "
        "holds it depends on the mode: with `useNvidiaDriverCrd: true` its NVIDIADriver is pinned to "
        "`previousVersion` (so nodes the autoscaler adds get the old driver too); on AKS and EKS its nodes also carry "
        "the skip label `nvidia.com/gpu-driver-upgrade.skip=true` through the cloud pool's node labels. On `cloud: "
        "existing` the program owns no node, so the pin is the brake (and `gpu-rollout pause` sets the skip label on "
        "the nodes themselves). With `useNvidiaDriverCrd: false` nothing pins a held pool: policy `held-pool-pinned` "
        "fails for every held pool (a node repaired, reimaged or replaced installs the new driver, whatever the "
        "pool's size) unless `gpuOperator.unpinnedHoldReason` says why.")


class NodePool(SpecModel):
    """The GPU pools this stack owns: one cloud pool (AKS agent pool, EKS node group) each, or one per live
    generation where the node image owns the driver; on ``cloud: existing``, the nodes a selector names."""

    name: str = Field(
        description="Cloud pool name, unique. AKS: lowercase letters and digits, starting with a letter, at most 12 "
        "characters (generations add `g<id>`). EKS: letters, digits, `-`, `_`, at most 63 characters. Existing: a "
        "DNS label (lowercase letters, digits, `-`). A pool's nodes are found by the project's label "
        "`gpu-driver-upgrade.io/pool` when they carry it, else by the cloud's own pool label "
        "(`kubernetes.azure.com/agentpool`, `eks.amazonaws.com/nodegroup`), else by `existing.nodeSelector`.",
        examples=["gpuh100"])
    role: Literal["canary", "serving", "batch"] = Field(
        "serving", description="A canary pool is never held; a canary stack needs one.", examples=["canary"])
    gpuProduct: str = Field(min_length=1, description="GFD `nvidia.com/gpu.product` of the pool's GPUs.",
                            examples=["NVIDIA-H100-80GB-HBM3"])
    gpusPerNode: PositiveInt = Field(description="GPUs of one node (allocatable `nvidia.com/gpu`).", examples=[8])
    nodeCount: PositiveInt = Field(
        description="Nodes of the pool (of each live generation, for image-owned pools, unless the generation says "
        "otherwise). Leave one node of spare GPUs where no surge exists.", examples=[4])
    gpuReplicas: PositiveInt = Field(
        1, description="Time-slicing (or MPS) replicas of each GPU, as the device plugin advertises them "
        "(`nvidia.com/gpu.replicas`); 1: whole GPUs. Verify's `gpu-count` expects `gpusPerNode` times this many "
        "allocatable GPUs on each upgraded node, and this label, so an upgrade that drops the sharing config is "
        "seen.", examples=[4])
    nvswitch: StrictBool = Field(False, description="HGX/DGX NVSwitch system (Fabric Manager must match the driver).")
    fabricManager: Literal["driver-container", "image", "host"] | None = Field(
        None, description="Where Fabric Manager comes from; none: by driver owner. The operator's driver container "
        "bundles and pins it, NVIDIA AMIs ship it, `host` means installed on the node by you.", examples=["host"]
    )
    fabricManagerVersion: DriverVersion | None = Field(
        None, description="Version of a host-installed Fabric Manager, an exact release; policy "
        "`fabric-manager-matches` requires it to equal the pool's driver exactly.", examples=["580.173.02"]
    )
    migConfig: str = Field(
        labels.MIG_CONFIG_DISABLED,
        description="The MIG layout the pool's nodes run, as mig-manager's nvidia.com/mig.config names it "
        "(all-1g.10gb, all-balanced, a custom layout); `all-disabled`: whole GPUs. A label value (letters, digits, "
        "`-`, `_`, `.`, at most 63). The prod gate compares it with the canary pool that attested the driver (policy "
        "`canary-attested`); written on the pool's nodes as `gpu-driver-upgrade.io/mig-config` only when it is not "
        "`all-disabled`.",
        examples=["all-1g.10gb"],
    )
    rollout: PoolRollout = Field(PoolRollout(), description="When a prod pool takes the new driver.")
    upgradePolicy: UpgradePolicy | None = Field(
        None,
        description="This pool's own upgrade policy: the keys of `gpuOperator.upgradePolicy`, each one given here "
        "taking that key's place for this pool's NVIDIADriver; a key not given is the stack's, not the default shown "
        "below. Only where each pool "
        "has its own NVIDIADriver that carries a policy (`useNvidiaDriverCrd: true`, operator v26.7.0 or later, "
        "`driver.owner: operator`); refused elsewhere, where one policy governs every node. `gpu-rollout simulate` "
        "recommends it per pool.",
        examples=[{"maxParallelUpgrades": 3, "maxUnavailable": 3}],
    )
    aks: AksPool | None = Field(None, description="The AKS agent pool; required on `cloud: aks`, refused on others.")
    eks: EksPool | None = Field(None, description="The EKS managed node group; required on `cloud: eks`, refused on "
                                "others.")
    existing: ExistingPool | None = Field(None, description="The pool's nodes in a cluster this project does not "
                                          "create; required on `cloud: existing`, refused on others.")
    generations: list[Generation] | None = Field(
        None, description="Image-owned pools (`driver.owner: image`) on AKS and EKS: required, at least one live; "
        "refused for operator-owned pools. One cloud pool per live generation (`<name>-g<id>` on EKS, `<name>g<id>` "
        "on AKS): the new image runs beside the old one. This is also the way to change a replace-only field of a "
        "pool. See `Pulumi.eks-prod.yaml`.")

    @field_validator("migConfig")
    @classmethod
    def _mig_config(cls, value: str) -> str:
        if not MIG_LAYOUT.fullmatch(value):
            raise ValueError(f"'{value}' is not a MIG layout name as nvidia.com/mig.config holds it (a label value: "
                             "letters, digits, '-', '_', '.', at most 63), e.g. all-disabled or all-1g.10gb")
        return value

    @property
    def live_generations(self) -> list[Generation]:
        return [g for g in self.generations or [] if not g.retired]

    def generation_nodes(self, generation: Generation | None) -> int:
        """Nodes of one cloud pool of this pool: the generation's own count, else the pool's."""
        if generation is not None and generation.nodeCount is not None:
            return generation.nodeCount
        return self.nodeCount

    @property
    def newest_generation(self) -> Generation | None:
        """The live generation with the highest id: the one the pool's nodes move to (None without one)."""
        live = self.live_generations
        return max(live, key=lambda g: g.id) if live else None

    @property
    def adopted(self) -> tuple[str, str] | None:
        """The cloud pool this stack adopts rather than creates, and its import ID (``aks.adopt``/``eks.adopt``):
        the pool's own, or its oldest live generation's; None where it creates every one."""
        block = self.aks or self.eks
        if block is None or block.adopt is None:
            return None
        live = self.live_generations
        return self.cloud_name(min(live, key=lambda g: g.id) if live else None), block.adopt

    def cloud_name(self, generation: Generation | None = None) -> str:
        """Name of the cloud pool: generations get a suffix so old and new can run side by side."""
        if generation is None:
            return self.name
        sep = "" if self.aks is not None else "-"
        return f"{self.name}{sep}g{generation.id}"




@dataclass(frozen=True)
class PoolTarget:
    """What a pool moves to in this deployment (``FleetSpec.pool_target``): the one answer the pool summary
    output, the prod gate's attestations, the validation job and `verify` all read."""

    pool: str
    driver: str  # the driver its nodes run once this deployment is done: its pin, or its newest generation's
    image: str | None  # the node image: its newest generation's, else the EKS node group's release
    generation: int | None  # the newest live generation's id, on an image-owned pool that has generations
    held: bool  # kept back by the skip label (and, operator-owned, pinned to the previous driver)
    why: str  # in words: "canary", "released in wave 2", "held: rollout.released is false"

    @property
    def moves(self) -> bool:
        """The pool's nodes take this deployment's driver (what validation and attestation check)."""
        return not self.held
