"""Every policy id of the pack, stable kebab-case: the name a pack config (``policy/<stage>.json``), ``gpu-rollout
plan``'s report, the engine's output and docs/policies.md use. Each rule declares its id from here
(``@stack_policy(PolicyId.CANARY_ATTESTED, ...)``, :mod:`policy.metadata`); the registry (:mod:`policy.registry`)
holds exactly these, and the CLI names a policy through this enum too (``gpu-rollout init`` edits the prod gate's
``trustedKeys``)."""

from __future__ import annotations

from enum import StrEnum


class PolicyId(StrEnum):
    """The registered policies, in the registry's order (by rule module, then as written)."""

    # policy.compat_rules
    DRIVER_VERSION_PINNED = "driver-version-pinned"
    SINGLE_DRIVER_OWNER = "single-driver-owner"
    NVIDIADRIVER_SELECTORS_DISJOINT = "nvidiadriver-selectors-disjoint"
    CUDA_DRIVER_COMPATIBLE = "cuda-driver-compatible"
    GPU_SUPPORTED_BY_DRIVER = "gpu-supported-by-driver"
    OPERATOR_SUPPORTS_DRIVER = "operator-supports-driver"
    # policy.platform_rules
    OPERATOR_SUPPORTS_OS = "operator-supports-os"
    FABRIC_MANAGER_MATCHES = "fabric-manager-matches"
    POOL_HARDWARE_MATCHES_SIZE = "pool-hardware-matches-size"
    # policy.transition_rules
    CLOUD_POOL_NOT_REPLACED = "cloud-pool-not-replaced"
    CAPACITY_BLOCK_UPDATED_EMPTY = "capacity-block-updated-empty"
    PER_POOL_MODE_OWN_CHANGE = "per-pool-mode-own-change"
    # policy.capacity_rules
    CANARY_ONE_NODE_AT_A_TIME = "canary-one-node-at-a-time"
    PARALLELISM_WITHIN_SPARE_CAPACITY = "parallelism-within-spare-capacity"
    SPARE_CAPACITY = "spare-capacity"
    # policy.budget_rules
    EVICTION_RESPECTS_PDB = "eviction-respects-pdb"
    PDB_ALLOWS_DRAIN = "pdb-allows-drain"
    MODEL_REDUNDANCY = "model-redundancy"
    # policy.process_rules
    CHANGE_TICKET = "change-ticket"
    FACTS_READABLE = "facts-readable"
    GUARD_IMAGE_DIGEST = "guard-image-digest"
    # policy.upgrade_rules
    UPGRADE_CONTROLLER_ENABLED = "upgrade-controller-enabled"
    WAIT_FOR_BATCH_JOBS = "wait-for-batch-jobs"
    HELD_POOL_PINNED = "held-pool-pinned"
    # policy.discipline_rules
    WAVES_IN_ORDER = "waves-in-order"
    OLD_GENERATION_KEPT = "old-generation-kept"
    VALIDATION_JOB_REQUIRED = "validation-job-required"
    SOAK_FLOOR = "soak-floor"
    MAINTENANCE_WINDOW = "maintenance-window"
    # policy.promotion_rules
    CANARY_ATTESTED = "canary-attested"

# The pack's advice policy, which carries every rule's advice into the engine: no rule of its own, so no PolicyId,
# but a pack config may name it.
ADVICE_POLICY_ID = "policy-advice"
# What a pack config means by every policy: no policy may be called so.
ALL_POLICIES = "all"
