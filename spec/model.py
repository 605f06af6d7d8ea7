"""FleetSpec: the whole stack config as typed, validated pydantic models.

Keys are spelled as in ``Pulumi.<stack>.yaml`` (camelCase); ``upgradePolicy`` is spelled exactly as the
ClusterPolicy CRD spells it (``podDeletion``, not the Helm key ``gpuPodDeletion``). Every model forbids
unknown keys, so a typo fails the load instead of being ignored.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

from spec.versions import ChartVersion, CudaVersion, DriverVersion, ImageRelease, chart_key, is_branch_only

PROJECT = "gpu-driver-upgrade"

PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]

_PERCENT = re.compile(r"^(100|[1-9]?\d)%$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_AKS_POOL = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_EKS_NODEGROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stage(StrEnum):
    CANARY = "canary"
    PROD = "prod"


class Cloud(StrEnum):
    AKS = "aks"
    EKS = "eks"
    EXISTING = "existing"


class DriverOwner(StrEnum):
    OPERATOR = "operator"  # the GPU Operator's containerized driver
    IMAGE = "image"  # the node image (AKS node image, EKS NVIDIA AMI) carries the driver


class ClusterPolicyMode(StrEnum):
    PATCH = "patch"  # patch the existing ClusterPolicy `cluster-policy` (operator installed elsewhere)
    HELM = "helm"  # this stack installs the pinned gpu-operator chart
    EXTERNAL = "external"  # another stack owns the ClusterPolicy; this one never touches it


def _int_or_percent(value: object, what: str) -> int | str:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer or a percentage such as '25%', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        return value
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        return value
    raise ValueError(f"{what} must be an integer or a percentage such as '25%', got {value!r}")


# ---------------------------------------------------------------- GPU Operator upgrade policy


class WaitForCompletion(_Model):
    podSelector: str = Field("", description="Label selector of jobs the upgrade waits for before evicting.")
    timeoutSeconds: NonNegativeInt = Field(0, description="How long to wait; 0 waits forever.")


class PodDeletion(_Model):
    force: StrictBool = Field(False, description="Delete GPU pods that have no controller.")
    timeoutSeconds: NonNegativeInt = Field(300, description="Eviction timeout; 0 waits forever.")
    deleteEmptyDir: StrictBool = Field(False, description="Delete pods with emptyDir volumes.")


class Drain(_Model):
    enable: StrictBool = Field(False, description="Drain the whole node when GPU pod deletion is not enough.")
    force: StrictBool = False
    podSelector: str = ""
    timeoutSeconds: NonNegativeInt = 300
    deleteEmptyDir: StrictBool = False


class UpgradePolicy(_Model):
    """``spec.driver.upgradePolicy`` of the ClusterPolicy CRD (and of NVIDIADriver on operator >= 26.7)."""

    autoUpgrade: StrictBool = Field(True, description="Let the operator's upgrade controller roll the nodes.")
    maxParallelUpgrades: NonNegativeInt = Field(1, description="Nodes upgraded at once; 0 means unlimited.")
    maxUnavailable: int | str = Field("25%", description="Nodes that may be unavailable, count or percent.")
    waitForCompletion: WaitForCompletion = WaitForCompletion()
    podDeletion: PodDeletion = PodDeletion()
    drain: Drain = Drain()

    @field_validator("maxUnavailable", mode="before")
    @classmethod
    def _max_unavailable(cls, value: object) -> int | str:
        return _int_or_percent(value, "maxUnavailable")

    def as_crd(self) -> dict[str, object]:
        """The policy exactly as the CRD spells it."""
        return self.model_dump(mode="json")

    def as_helm_values(self) -> dict[str, object]:
        """The same policy under the chart's value names (``gpuPodDeletion`` for ``podDeletion``)."""
        values = self.model_dump(mode="json")
        values["gpuPodDeletion"] = values.pop("podDeletion")
        return values


class GpuOperator(_Model):
    chartVersion: ChartVersion = Field(description="GPU Operator release (chart version), e.g. v26.7.0.")
    namespace: str = Field("gpu-operator", description="Namespace the operator runs in.")
    clusterPolicy: ClusterPolicyMode = Field(
        ClusterPolicyMode.PATCH, description="How this stack owns the ClusterPolicy: patch, helm or external."
    )
    useNvidiaDriverCrd: StrictBool = Field(False, description="One NVIDIADriver per pool instead of one driver.")
    usePrecompiled: StrictBool = Field(False, description="Precompiled driver images (tagged by branch).")
    kernelModuleType: Literal["auto", "open", "proprietary"] = "auto"
    driverRepository: str = Field("nvcr.io/nvidia", description="Registry path of the driver image.")
    upgradePolicy: UpgradePolicy = UpgradePolicy()
    batchJobSelectors: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="Label selectors of batch or fine-tuning pods that must finish rather than be evicted; "
        "upgradePolicy.waitForCompletion.podSelector should cover them.",
    )

    @property
    def per_driver_upgrade_policy(self) -> bool:
        """NVIDIADriver carries its own upgradePolicy (and `default`) from operator v26.7.0 on."""
        return chart_key(self.chartVersion) >= (26, 7, 0)


# ---------------------------------------------------------------- cluster


class AksCluster(_Model):
    resourceGroup: str = Field(min_length=1, description="Resource group of the managed cluster.")
    clusterName: str = Field(min_length=1, description="Name of the existing AKS managed cluster.")
    kubernetesVersion: str | None = Field(None, description="orchestratorVersion for GPU pools.")


class EksCluster(_Model):
    clusterName: str = Field(min_length=1, description="Name of the existing EKS cluster.")
    region: str = Field(min_length=1, description="AWS region, e.g. us-east-1.")
    nodeRoleArn: str = Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$", description="Node IAM role ARN.")
    subnetIds: list[str] = Field(min_length=1, description="Private subnets for the GPU node groups.")
    kubernetesVersion: str | None = None


class Cluster(_Model):
    cloud: Cloud
    name: str = Field(min_length=1, description="Human name of the cluster, used in outputs and attestations.")
    kubeContext: str | None = Field(None, description="kubeconfig context for Kubernetes resources and checks.")
    aks: AksCluster | None = None
    eks: EksCluster | None = None

    @model_validator(mode="after")
    def _cloud_fields(self) -> Self:
        for cloud, block in ((Cloud.AKS, self.aks), (Cloud.EKS, self.eks)):
            if self.cloud == cloud and block is None:
                raise ValueError(f"cloud is '{cloud}', so cluster.{cloud} must be set")
            if self.cloud != cloud and block is not None:
                raise ValueError(f"cluster.{cloud} is set but cloud is '{self.cloud}'")
        return self


# ---------------------------------------------------------------- driver


class Driver(_Model):
    owner: DriverOwner = Field(description="Who installs the driver: operator or image. Never both.")
    version: DriverVersion = Field(description="Target driver version, exact (580.173.02).")
    previousVersion: DriverVersion | None = Field(None, description="Driver the fleet runs now (rollback).")


# ---------------------------------------------------------------- node pools


class AksPool(_Model):
    vmSize: str = Field(pattern=r"^Standard_[A-Za-z0-9_]+$", description="Azure VM size, e.g. Standard_NC40ads_H100_v5.")
    osSku: Literal["Ubuntu", "Ubuntu2204", "AzureLinux", "AzureLinux3"] = "Ubuntu"
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
        surge = _int_or_percent(value, "maxSurge")
        if surge in (0, "0%"):
            raise ValueError("maxSurge must be at least 1 (or 1%): AKS refuses a rolling upgrade with neither surge nor unavailable nodes")
        return str(surge)


class LaunchTemplate(_Model):
    id: str = Field(pattern=r"^lt-[0-9a-f]{8,17}$", description="Launch template id, e.g. lt-0abc1234def567890.")
    version: str = Field(pattern=r"^[1-9][0-9]*$", description="Pinned launch template version (a number, not $Latest).")


class EksPool(_Model):
    instanceTypes: list[str] = Field(min_length=1, description="EC2 instance types, e.g. [p5.48xlarge].")
    amiType: Literal[
        "AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64"
    ] | None = Field(None, description="Defaults by driver owner: NVIDIA AMI for image, standard for operator.")
    maxUnavailable: PositiveInt = Field(1, description="updateConfig.maxUnavailable of the node group.")
    updateStrategy: Literal["DEFAULT", "MINIMAL"] = "DEFAULT"
    diskSize: PositiveInt = 200
    capacityType: Literal["ON_DEMAND", "CAPACITY_BLOCK", "SPOT"] = "ON_DEMAND"
    releaseVersion: ImageRelease | None = Field(None, description="Pinned AMI release (required for operator-owned pools).")
    launchTemplate: LaunchTemplate | None = Field(None, description="Required with capacityType CAPACITY_BLOCK.")

    @model_validator(mode="after")
    def _capacity_block(self) -> Self:
        if self.capacityType == "CAPACITY_BLOCK" and self.launchTemplate is None:
            raise _at(
                ("launchTemplate",),
                "capacityType CAPACITY_BLOCK needs a launch template that names the capacity reservation "
                "(EKS creates Capacity Block node groups only from a custom launch template)",
            )
        return self


class Generation(_Model):
    """One node-pool generation of an image-owned pool: a pool (or node group) on one node image."""

    id: PositiveInt
    driverVersion: DriverVersion = Field(description="Driver the node image ships.")
    releaseVersion: ImageRelease | None = Field(None, description="EKS AMI releaseVersion.")
    nodeImageVersion: ImageRelease | None = Field(None, description="AKS node image version (recorded).")
    retired: StrictBool = Field(False, description="True once the next generation ran clean for the soak time.")


class PoolRollout(_Model):
    wave: NonNegativeInt = Field(0, description="Order in which prod pools are released; lowest first.")
    released: StrictBool = Field(False, description="False keeps the skip label on and the old driver pinned.")


class NodePool(_Model):
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
    rollout: PoolRollout = PoolRollout()
    aks: AksPool | None = None
    eks: EksPool | None = None
    generations: list[Generation] | None = Field(None, description="Image-owned pools only: live generations.")

    @property
    def live_generations(self) -> list[Generation]:
        return [g for g in self.generations or [] if not g.retired]

    @property
    def newest_generation(self) -> Generation | None:
        gens = self.generations or []
        return max(gens, key=lambda g: g.id) if gens else None

    def cloud_name(self, generation: Generation | None = None) -> str:
        """Name of the cloud pool: generations get a suffix so old and new can run side by side."""
        if generation is None:
            return self.name
        sep = "" if self.aks is not None else "-"
        return f"{self.name}{sep}g{generation.id}"


# ---------------------------------------------------------------- models and the rest


class Model(_Model):
    name: str = Field(description="Model server name (Deployment name).")
    namespace: str = Field(description="Namespace of the model server.")
    matchLabels: dict[str, str] = Field(min_length=1, description="Pod labels of the model server.")
    replicas: PositiveInt
    minAvailable: int | str = Field(description="PDB minAvailable: an integer or a percentage.")
    gpusPerReplica: PositiveInt
    cudaVersion: CudaVersion = Field(description="CUDA runtime inside the serving image.")
    image: str = Field(min_length=1, description="Serving image with an explicit tag or digest.")
    nodePools: list[str] = Field(min_length=1, description="Pools the model's pods run on.")
    cudaForwardCompat: StrictBool = Field(False, description="Image ships cuda-compat for a newer CUDA.")

    @field_validator("minAvailable", mode="before")
    @classmethod
    def _min_available(cls, value: object) -> int | str:
        result = _int_or_percent(value, "minAvailable")
        if result in (0, "0%"):
            raise ValueError("minAvailable of 0 protects nothing; set at least 1 (or drop the model)")
        return result

    @field_validator("name", "namespace")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not _DNS_LABEL.fullmatch(value):
            raise ValueError(f"'{value}' is not a valid Kubernetes name (lowercase letters, digits, '-')")
        return value

    @field_validator("matchLabels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            prefix, _, name = key.rpartition("/")
            if (prefix and not _LABEL_PREFIX.fullmatch(prefix)) or not _LABEL_NAME.fullmatch(name):
                raise ValueError(f"'{key}' is not a valid label key")
            if not isinstance(val, str) or (val and not _LABEL_NAME.fullmatch(val)):
                raise ValueError(f"'{val}' is not a valid label value for '{key}'")
        return value

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str) -> str:
        last = value.rsplit("/", 1)[-1]
        if "@sha256:" not in value and (":" not in last or last.endswith(":latest")):
            raise ValueError(f"image '{value}' must carry an explicit tag or digest, not latest")
        return value


class Validation(_Model):
    """Settings of the post-upgrade validation job (consumed by `gpu-rollout verify`)."""

    image: str = Field(min_length=1)
    model: str = Field(min_length=1, description="Small model the job loads.")
    prompt: str = "Say hello."
    minTokensPerSecond: Annotated[float, Field(gt=0)] = 20.0


class Promotion(_Model):
    canaryStack: str = Field(min_length=1, description="Stack whose attestation gates this one.")
    minSoakHours: Annotated[float, Field(ge=0)] = Field(24, description="Hours the canary must run clean.")


class FleetSpec(_Model):
    stage: Stage
    changeTicket: str | None = Field(None, description="Change ticket id; required by policy in prod.")
    cluster: Cluster
    driver: Driver
    gpuOperator: GpuOperator
    nodePools: list[NodePool] = Field(min_length=1)
    models: list[Model] = Field(default_factory=list)
    validation: Validation | None = None
    promotion: Promotion | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        self._check_driver_versions()
        self._check_pools()
        self._check_models()
        return self

    def _check_driver_versions(self) -> None:
        if is_branch_only(self.driver.version) and not (
            self.driver.owner == DriverOwner.OPERATOR and self.gpuOperator.usePrecompiled
        ):
            raise _at(
                ("driver", "version"),
                f"'{self.driver.version}' is a branch, not a release; a branch alone is only valid with "
                "gpuOperator.usePrecompiled: true (precompiled images are tagged by branch). Pin an exact "
                "release such as 580.173.02",
            )
        prev = self.driver.previousVersion
        if prev is not None and is_branch_only(prev) and not self.gpuOperator.usePrecompiled:
            raise _at(("driver", "previousVersion"), f"'{prev}' is a branch, not a release")
        if self.driver.owner == DriverOwner.OPERATOR and self.gpuOperator.usePrecompiled:
            # Precompiled images are tagged <branch>-<kernel>-<os>: an exact release names no image.
            for key, version in (("version", self.driver.version), ("previousVersion", prev)):
                if version is not None and not is_branch_only(version):
                    raise _at(
                        ("driver", key),
                        f"'{version}' is an exact release, but precompiled driver images are tagged by "
                        f"branch: write the branch alone (\"{version.split('.')[0]}\")",
                    )
        held = [p.name for p in self.nodePools if self.pool_held(p)]
        if held and prev is None and self.driver.owner == DriverOwner.OPERATOR:
            raise _at(
                ("driver", "previousVersion"),
                f"required while pools are held ({', '.join(held)}): a held pool stays pinned to the driver "
                "it runs now, so new nodes there do not get the new driver",
            )

    def _check_pools(self) -> None:
        seen: set[str] = set()
        cloud = self.cluster.cloud
        for index, pool in enumerate(self.nodePools):
            where = ("nodePools", index)
            if pool.name in seen:
                raise _at((*where, "name"), f"duplicate pool name '{pool.name}'")
            seen.add(pool.name)
            for block in ("aks", "eks"):
                present = getattr(pool, block) is not None
                if cloud == block and not present:
                    raise _at((*where, block), f"cloud is '{cloud}', so every pool needs its '{block}' block")
                if cloud != block and present:
                    raise _at((*where, block), f"'{block}' block on a pool of a '{cloud}' cluster")
            self._check_generations(pool, where)
            self._check_eks_pool(pool, where)
            if pool.fabricManagerVersion is not None and is_branch_only(pool.fabricManagerVersion):
                raise _at((*where, "fabricManagerVersion"), "Fabric Manager must match the driver exactly: give a release")
            for gen in [None, *pool.live_generations]:
                name = pool.cloud_name(gen)
                if cloud == Cloud.AKS and not _AKS_POOL.fullmatch(name):
                    raise _at(
                        (*where, "name"),
                        f"AKS Linux pool name '{name}' is invalid: lowercase letters and digits only, "
                        "starting with a letter, at most 12 characters (generations add 'g<id>')",
                    )
                if cloud == Cloud.EKS and not _EKS_NODEGROUP.fullmatch(name):
                    raise _at((*where, "name"), f"EKS node group name '{name}' is invalid: letters, digits, '-', '_'")
                if cloud == Cloud.EXISTING and not _DNS_LABEL.fullmatch(name):
                    raise _at((*where, "name"), f"pool name '{name}' must be a valid label value")
        if self.stage == Stage.CANARY and not any(p.role == "canary" for p in self.nodePools):
            raise _at(("nodePools",), "the canary stage needs at least one pool with role: canary")
        driver_names: dict[str, str] = {}
        for index, pool in enumerate(self.nodePools):
            other = driver_names.setdefault(kubernetes_name(pool.name), pool.name)
            if other != pool.name:
                raise _at(
                    ("nodePools", index, "name"),
                    f"pools '{other}' and '{pool.name}' map to the same Kubernetes name "
                    f"'{kubernetes_name(pool.name)}' (their NVIDIADrivers would collide); rename one",
                )

    def _check_eks_pool(self, pool: NodePool, where: tuple[object, ...]) -> None:
        if pool.eks is None:
            return
        if self.driver.owner == DriverOwner.OPERATOR and pool.eks.releaseVersion is None:
            raise _at(
                (*where, "eks", "releaseVersion"),
                "required for operator-owned pools: without it the node group follows the newest AMI",
            )
        if self.driver.owner == DriverOwner.IMAGE and pool.eks.amiType and not pool.eks.amiType.endswith("_NVIDIA"):
            raise _at(
                (*where, "eks", "amiType"),
                f"driver.owner is image, but {pool.eks.amiType} carries no NVIDIA driver and the operator's "
                "driver is disabled: no driver would be installed. Use an _NVIDIA AMI",
            )

    def _check_generations(self, pool: NodePool, where: tuple[object, ...]) -> None:
        if self.driver.owner == DriverOwner.OPERATOR:
            if pool.generations is not None:
                raise _at((*where, "generations"), "generations are for image-owned pools (driver.owner: image)")
            return
        if self.cluster.cloud == Cloud.EXISTING:
            return
        if not pool.generations:
            raise _at(
                (*where, "generations"),
                "image-owned pools move by generations: list at least one {id, driverVersion, releaseVersion}",
            )
        ids = [g.id for g in pool.generations]
        if len(set(ids)) != len(ids):
            raise _at((*where, "generations"), f"duplicate generation ids {sorted(ids)}")
        if not pool.live_generations:
            raise _at((*where, "generations"), "every generation is retired; keep at least one live")
        image_key = "releaseVersion" if self.cluster.cloud == Cloud.EKS else "nodeImageVersion"
        for g_index, gen in enumerate(pool.generations):
            if getattr(gen, image_key) is None:
                raise _at((*where, "generations", g_index, image_key), f"required on {self.cluster.cloud} pools")
        for g_index, gen in enumerate(pool.generations):
            if is_branch_only(gen.driverVersion):
                raise _at((*where, "generations", g_index, "driverVersion"), "a node image ships an exact release, not a branch")
        newest = pool.newest_generation
        assert newest is not None
        if newest.retired:
            raise _at((*where, "generations"), f"the newest generation g{newest.id} cannot be retired")
        if self.pool_held(pool) and any(g.driverVersion == self.driver.version for g in pool.live_generations):
            raise _at(
                (*where, "generations"),
                f"pool '{pool.name}' is held (rollout.released: false) but already has a live generation on "
                f"the target driver {self.driver.version}: release the pool or remove that generation",
            )

    def _check_models(self) -> None:
        pools = {p.name for p in self.nodePools}
        budgets: dict[str, str] = {}
        for index, model in enumerate(self.models):
            # A model's PDB resource is named <namespace>-<name>; two models must not share it.
            qualified = f"{model.namespace}/{model.name}"
            other = budgets.setdefault(f"{model.namespace}-{model.name}", qualified)
            if other != qualified or list(budgets.values()).count(qualified) > 1:
                what = "duplicate model" if other == qualified else f"models '{other}' and"
                raise _at(("models", index, "name"), f"{what} '{qualified}' (their PDB resource names collide)")
            for p_index, pool in enumerate(model.nodePools):
                if pool not in pools:
                    raise _at(
                        ("models", index, "nodePools", p_index),
                        f"model '{model.name}' names pool '{pool}', which is not in nodePools "
                        f"(known: {', '.join(sorted(pools))})",
                    )

    # ------------------------------------------------------------ derived facts

    def pool(self, name: str) -> NodePool:
        for pool in self.nodePools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def pool_driver_version(self, pool: NodePool) -> str:
        """Driver a pool is pinned to now: the target once released (or canary), else the previous one."""
        if pool.role == "canary" or pool.rollout.released or self.driver.previousVersion is None:
            return self.driver.version
        return self.driver.previousVersion

    def pool_held(self, pool: NodePool) -> bool:
        """Held pools carry the skip label: the canary is never held, prod pools until released."""
        return pool.role != "canary" and not pool.rollout.released


def kubernetes_name(name: str) -> str:
    """A cloud pool name as a Kubernetes object name (EKS allows '_' and capitals, Kubernetes does not)."""
    return re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")


class _LocatedError(ValueError):
    """A validation error raised by a model validator that knows a more precise key path."""

    def __init__(self, path: tuple[object, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _at(path: tuple[object, ...], message: str) -> _LocatedError:
    return _LocatedError(path, message)
