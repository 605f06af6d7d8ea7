"""GPU node pools in the FleetSpec: cloud fields, rollout wave and, for image-owned drivers, generations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import Field, StrictBool, field_validator, model_validator

from spec import labels
from spec.base import NonNegativeInt, PositiveInt, SpecModel, at, check_label_map, int_or_percent
from spec.platform import OsId
from spec.versions import DriverVersion, ImageRelease

# A MIG layout name: the value of the node label nvidia.com/mig.config (a Kubernetes label value).
MIG_LAYOUT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

# The EKS API's closed sets for a managed node group (spec/capacity.py reasons about the same values).
EksUpdateStrategy = Literal["DEFAULT", "MINIMAL"]
EksCapacityType = Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"]


class AksPool(SpecModel):
    vmSize: str = Field(pattern=r"^Standard_[A-Za-z0-9_]+$", description="Azure VM size, e.g. Standard_NC40ads_H100_v5.")
    osSku: Literal["Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux", "AzureLinux3"] = "Ubuntu"
    maxSurge: str = Field("1", description="Extra nodes during a node-image upgrade (count or percent).")
    drainTimeoutMinutes: PositiveInt = Field(30, description="How long AKS waits on PDBs per node.")
    nodeSoakMinutes: NonNegativeInt = Field(0, description="Wait after draining a node before reimaging it.")
    availabilityZones: list[str] | None = None

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
    id: str = Field(pattern=r"^lt-[0-9a-f]{8,17}$", description="Launch template id, e.g. lt-0abc1234def567890.")
    version: str = Field(pattern=r"^[1-9][0-9]*$", description="Pinned launch template version (a number, not $Latest).")
    os: OsId | None = Field(
        None,
        description="Operating system of the custom AMI the launch template names (its ImageId), e.g. ubuntu22.04; "
        "required for operator-owned drivers, which run on a custom Ubuntu EKS AMI.",
    )


DEFAULT_EKS_DISK_GIB = 200  # GPU nodes pull large serving images; EKS's own default (20 GiB) is too small


class EksPool(SpecModel):
    instanceTypes: list[str] | None = Field(
        None,
        min_length=1,
        description="EC2 instance types, e.g. [p5.48xlarge]. Required without a launch template; refused with "
        "CAPACITY_BLOCK, whose launch template sets the instance type.",
    )
    amiType: Literal[
        "AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64"
    ] | None = Field(None, description="Defaults by driver owner: NVIDIA AMI for image, standard for operator.")
    maxUnavailable: PositiveInt = Field(1, le=100, description="updateConfig.maxUnavailable of the node group (EKS: 1-100).")
    updateStrategy: EksUpdateStrategy = "DEFAULT"
    diskSize: PositiveInt | None = Field(
        None, description=f"Root volume GiB (default {DEFAULT_EKS_DISK_GIB}); refused beside a launch template."
    )
    capacityType: EksCapacityType = "ON_DEMAND"
    releaseVersion: ImageRelease | None = Field(None, description="Pinned AMI release (required for operator-owned pools).")
    launchTemplate: LaunchTemplate | None = Field(None, description="Required with capacityType CAPACITY_BLOCK.")

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
        None, description="Operating system of the pool's nodes, e.g. ubuntu24.04, so the pack can check it."
    )
    nodeSelector: dict[str, str] = Field(
        min_length=1,
        description="Labels that every node of the pool already carries, e.g. {node.kubernetes.io/instance-type: "
        "p5.48xlarge}; the pool's NVIDIADriver and the live checks find its nodes by them.",
    )

    @field_validator("nodeSelector")
    @classmethod
    def _selector(cls, value: dict[str, str]) -> dict[str, str]:
        return check_label_map(value, "nodeSelector")


class Generation(SpecModel):
    """One node-pool generation of an image-owned pool: a pool (or node group) on one node image."""

    id: PositiveInt
    driverVersion: DriverVersion = Field(description="Driver the node image ships.")
    releaseVersion: ImageRelease | None = Field(None, description="EKS AMI releaseVersion.")
    nodeImageVersion: ImageRelease | None = Field(None, description="AKS node image version (recorded).")
    retired: StrictBool = Field(False, description="True once the next generation ran clean for the soak time.")
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
    wave: NonNegativeInt = Field(0, description="Order in which prod pools are released; lowest first.")
    released: StrictBool = Field(False, description="False keeps the skip label on and the old driver pinned.")


class NodePool(SpecModel):
    name: str = Field(description="Pool name as the cloud spells it.")
    role: Literal["canary", "serving", "batch"] = "serving"
    gpuProduct: str = Field(min_length=1, description="GFD nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3.")
    gpusPerNode: PositiveInt
    nodeCount: PositiveInt
    nvswitch: StrictBool = Field(False, description="HGX/DGX NVSwitch system (needs Fabric Manager).")
    fabricManager: Literal["driver-container", "image", "host"] | None = Field(
        None, description="Where Fabric Manager comes from; defaults by driver owner."
    )
    fabricManagerVersion: DriverVersion | None = Field(
        None, description="Version of a host-installed Fabric Manager; must equal the pool's driver exactly."
    )
    migConfig: str = Field(
        labels.MIG_CONFIG_DISABLED,
        description="The MIG layout the pool's nodes run, as mig-manager's nvidia.com/mig.config names it "
        "(all-1g.10gb, all-balanced, a custom layout); all-disabled: whole GPUs. The prod gate compares it with "
        "the canary pool that attested the driver.",
    )
    rollout: PoolRollout = PoolRollout()
    aks: AksPool | None = None
    eks: EksPool | None = None
    existing: ExistingPool | None = None
    generations: list[Generation] | None = Field(None, description="Image-owned pools only: live generations.")

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
