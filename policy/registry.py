"""Every policy of the pack, with its metadata, registered once under its stable kebab-case id.

The CrossGuard pack (``policy.pack``) and ``gpu-rollout plan`` (``policy.evaluate``) both read this
registry, so a policy id, its rule and its default enforcement exist in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from policy import compat_rules as compat
from policy import disruption_rules as disruption
from policy import facts
from policy import platform_rules as platform
from policy import transition_rules as transition
from policy.facts import Resource
from policy.findings import Finding, Level

ResourceRule = Callable[[Resource], Iterable[Finding]]
StackRule = Callable[[Sequence[Resource]], Iterable[Finding]]


class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


@dataclass(frozen=True)
class PolicyDef:
    id: str
    description: str
    severity: Severity
    topics: tuple[str, ...]
    remediation: str
    level: Level  # default enforcement; the stage's pack config overrides it
    resource_rule: ResourceRule | None = None
    stack_rule: StackRule | None = None
    resource_types: tuple[str, ...] = ()  # which resources a resource rule looks at

    def findings(self, resources: Sequence[Resource]) -> list[Finding]:
        if self.stack_rule is not None:
            return list(self.stack_rule(resources))
        assert self.resource_rule is not None
        return [f for r in resources if r.type in self.resource_types for f in self.resource_rule(r)]


REGISTRY: dict[str, PolicyDef] = {}

# The pack-only advisory policy that carries every rule's advice into the engine (``policy.pack``). It
# has no rule of its own, so it is not registered; pack configs may still name it.
ADVICE_POLICY_ID = "policy-advice"


def register(policy: PolicyDef) -> None:
    if policy.id == "all":
        raise ValueError("'all' is reserved in pack config and cannot name a policy")
    if policy.id == ADVICE_POLICY_ID:
        raise ValueError(f"'{ADVICE_POLICY_ID}' is the pack's advice policy and cannot name a rule")
    if policy.id in REGISTRY:
        raise ValueError(f"policy '{policy.id}' is registered twice")
    if (policy.resource_rule is None) == (policy.stack_rule is None):
        raise ValueError(f"policy '{policy.id}' needs exactly one of resource_rule and stack_rule")
    REGISTRY[policy.id] = policy


M, A = Level.MANDATORY, Level.ADVISORY
DRIVERS = facts.DRIVER_TYPES

for _policy in (
    PolicyDef(
        "driver-version-pinned",
        "Checks that the driver version is an exact release wherever it is set, and that NVIDIA AMI node groups pin releaseVersion.",
        Severity.HIGH, ("compatibility", "drift"),
        "Set driver.version to an exact release (e.g. 580.173.02); for image-owned EKS pools set releaseVersion on every generation.",
        M, resource_rule=compat.driver_version_pinned, resource_types=(*DRIVERS, facts.EKS_NODE_GROUP),
    ),
    PolicyDef(
        "single-driver-owner",
        "Checks that no pool gets a driver from both its node image and the GPU Operator.",
        Severity.CRITICAL, ("ownership",),
        "Either let the operator own the driver (AKS gpuProfile.driver: None, a standard EKS AMI) or disable the operator's driver.",
        M, stack_rule=compat.single_driver_owner,
    ),
    PolicyDef(
        "nvidiadriver-selectors-disjoint",
        "Checks that no node pool is selected by two NVIDIADriver resources.",
        Severity.HIGH, ("ownership",),
        "Give each NVIDIADriver a nodeSelector on its own pool label; never leave one without a nodeSelector.",
        M, stack_rule=compat.nvidiadriver_selectors_disjoint,
    ),
    PolicyDef(
        "cuda-driver-compatible",
        "Checks that every model's CUDA version runs on the driver of every pool it runs on.",
        Severity.CRITICAL, ("compatibility",),
        "Pick a driver at or above the CUDA minimum, or ship cuda-compat in the image (cudaForwardCompat) on a supported branch.",
        M, stack_rule=compat.cuda_driver_compatible,
    ),
    PolicyDef(
        "gpu-supported-by-driver",
        "Checks that the driver branch supports the GPU of every pool.",
        Severity.CRITICAL, ("compatibility",),
        "Stay on a branch that supports the GPU (Volta, Pascal and Maxwell end at R580); move old GPUs to their own pool.",
        M, stack_rule=compat.gpu_supported_by_driver,
    ),
    PolicyDef(
        "operator-supports-driver",
        "Checks that the GPU Operator release lists the driver (advice when only its branch is listed).",
        Severity.HIGH, ("compatibility",),
        "Choose a driver from the operator release's component matrix, or upgrade the operator first.",
        M, stack_rule=compat.operator_supports_driver,
    ),
    PolicyDef(
        "operator-supports-os",
        "Checks that every pool the GPU Operator installs the driver on runs an operating system the operator release ships a driver image for.",
        Severity.CRITICAL, ("compatibility", "platform"),
        "Run operator-owned pools on Ubuntu (AKS osSku Ubuntu2204/Ubuntu2404; EKS a custom Ubuntu AMI through a launch template) or let the node image own the driver (driver.owner: image).",
        M, stack_rule=platform.operator_supports_os,
    ),
    PolicyDef(
        "fabric-manager-matches",
        "Checks that NVSwitch pools with a host-installed Fabric Manager pin it to exactly the driver version.",
        Severity.CRITICAL, ("compatibility", "nvswitch"),
        "Set nodePools[].fabricManagerVersion to the pool's driver version, or let the driver container bring Fabric Manager.",
        M, stack_rule=compat.fabric_manager_matches,
    ),
    PolicyDef(
        "cloud-pool-not-replaced",
        "Checks that no change alters a field the cloud cannot change in place on a node pool (EKS amiType, capacityType, instanceTypes, subnets, diskSize, launch template; AKS vmSize, GPU driver setting).",
        Severity.CRITICAL, ("disruption", "lifecycle"),
        "Keep the pool's replace-only fields as deployed; add a new generation (or pool) with the new settings beside it, move the workloads, then retire the old one.",
        M, resource_rule=transition.cloud_pool_not_replaced, resource_types=(facts.AKS_POOL, facts.EKS_NODE_GROUP),
    ),
    PolicyDef(
        "capacity-block-updated-empty",
        "Checks that a Capacity Block node group changes its AMI release or launch template version only at desired size 0, as AWS documents.",
        Severity.HIGH, ("disruption", "lifecycle", "capacity-block"),
        "Move the reservation's nodes to a new generation one at a time (generations[].nodeCount), or set the generation's nodeCount to 0 before changing its version.",
        M, resource_rule=transition.capacity_block_updated_empty, resource_types=(facts.EKS_NODE_GROUP,),
    ),
    PolicyDef(
        "per-pool-mode-own-change",
        "Checks that per-pool NVIDIADriver mode is switched on in a change of its own, not together with an operator upgrade.",
        Severity.CRITICAL, ("disruption", "migration"),
        "Upgrade the GPU Operator in one change; once it runs clean, set gpuOperator.useNvidiaDriverCrd: true in the next.",
        M, stack_rule=transition.per_pool_mode_own_change,
    ),
    PolicyDef(
        "canary-one-node-at-a-time",
        "Checks that the canary upgrades one node at a time (maxParallelUpgrades: 1).",
        Severity.HIGH, ("disruption", "canary"),
        "Set gpuOperator.upgradePolicy.maxParallelUpgrades: 1 in the canary stack (0 means unlimited).",
        M, stack_rule=disruption.canary_one_node_at_a_time,
    ),
    PolicyDef(
        "parallelism-within-spare-capacity",
        "Checks that prod upgrade parallelism (the operator's upgrade policy, and EKS node group updates that cannot surge) never takes more GPUs out than spare capacity covers, keeping every model at minAvailable.",
        Severity.CRITICAL, ("capacity", "disruption"),
        "Lower maxParallelUpgrades or maxUnavailable (EKS: eks.maxUnavailable), or add nodes to the pool until the spare GPUs cover the nodes upgraded at once.",
        M, stack_rule=disruption.parallelism_within_spare_capacity,
    ),
    PolicyDef(
        "spare-capacity",
        "Checks that each pool has at least one node of spare GPU capacity, or surge enabled.",
        Severity.HIGH, ("capacity",),
        "Add a node to the pool (nodeCount) or reduce replicas; image-owned pools may rely on surge (check quota first), but not on a Capacity Block or with updateStrategy MINIMAL.",
        M, stack_rule=disruption.spare_capacity,
    ),
    PolicyDef(
        "eviction-respects-pdb",
        "Checks that GPU pod deletion and drain never force past PodDisruptionBudgets (advice when a timeout is 0).",
        Severity.CRITICAL, ("disruption",),
        "Set upgradePolicy.podDeletion.force and drain.force to false, and give both a timeout (e.g. 300-900 s).",
        M, resource_rule=disruption.eviction_respects_pdb, resource_types=DRIVERS,
    ),
    PolicyDef(
        "pdb-allows-drain",
        "Checks that every PodDisruptionBudget lets at least one pod go.",
        Severity.HIGH, ("disruption",),
        "Set models[].minAvailable below replicas (or add a replica).",
        M, resource_rule=disruption.pdb_allows_drain, resource_types=(facts.PDB,),
    ),
    PolicyDef(
        "model-redundancy",
        "Checks that every model has more than one replica and a PodDisruptionBudget.",
        Severity.HIGH, ("disruption", "availability"),
        "Run at least two replicas of every model (models[].replicas >= 2).",
        M, resource_rule=disruption.model_redundancy, resource_types=(facts.PDB,),
    ),
    PolicyDef(
        "change-ticket",
        "Checks that the prod stage names a change ticket.",
        Severity.MEDIUM, ("process",),
        "Set changeTicket in the prod stack to the approved change.",
        M, stack_rule=disruption.change_ticket,
    ),
    PolicyDef(
        "upgrade-controller-enabled",
        "Checks that operator-owned drivers have the upgrade controller on (autoUpgrade: true).",
        Severity.MEDIUM, ("rollout",),
        "Set gpuOperator.upgradePolicy.autoUpgrade: true, or plan to delete driver pods by hand.",
        A, resource_rule=disruption.upgrade_controller_enabled, resource_types=DRIVERS,
    ),
    PolicyDef(
        "wait-for-batch-jobs",
        "Checks that waitForCompletion.podSelector covers the declared batch or fine-tuning selectors.",
        Severity.MEDIUM, ("disruption", "batch"),
        "Set gpuOperator.upgradePolicy.waitForCompletion.podSelector to a selector every batch pod matches.",
        A, stack_rule=disruption.wait_for_batch_jobs,
    ),
):
    register(_policy)

POLICY_IDS: tuple[str, ...] = tuple(REGISTRY)
