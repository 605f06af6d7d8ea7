"""Every live check id, stable kebab-case: the id in docs/runbook.md, in ``preflight``'s and ``verify``'s tables and
in their JSON (``checks[].check``). Each check declares its id from here (``@check(CheckId.DRIVER_OWNER,
OWNERSHIP)``, :mod:`checks.metadata`); the catalogue (:mod:`checks.catalogue`) holds exactly these. An id may be
a policy's too (``spare-capacity``): the live check and the policy rule judge one thing, live and offline."""

from __future__ import annotations

from enum import StrEnum


class CheckId(StrEnum):
    """The catalogue's checks, in its order (by section module, then as written)."""

    # checks.cluster: the stack's cluster
    CLUSTER_IDENTITY = "cluster-identity"
    POOL_MEMBERSHIP = "pool-membership"
    POOL_ADOPTED = "pool-adopted"
    POOL_HARDWARE = "pool-hardware"
    # checks.owner: who owns the driver
    CLUSTER_POLICY = "cluster-policy"
    DRIVER_OWNER = "driver-owner"
    PER_POOL_MODE = "per-pool-mode"
    TWO_DRIVER_OWNERS = "two-driver-owners"
    DRIVER_VERSIONS = "driver-versions"
    RUNNING_TODAY = "running-today"
    NODE_IMAGE = "node-image"
    NODE_OS_CHANNEL = "node-os-channel"
    # checks.compatibility: runbook section 1
    GPU_SUPPORTED_BY_DRIVER = "gpu-supported-by-driver"
    SERVING_IMAGES_CUDA = "serving-images-cuda"
    OPERATOR_SUPPORTS_DRIVER = "operator-supports-driver"
    KERNEL_PRECOMPILED = "kernel-precompiled"
    ATTESTED_KERNEL = "attested-kernel"
    FABRIC_MANAGER = "fabric-manager"
    MIG_TIMESLICING = "mig-timeslicing"
    DCGM_EXPORTER = "dcgm-exporter"
    CHANGE_TICKET = "change-ticket"
    # checks.disruption: runbook section 2
    SPARE_CAPACITY = "spare-capacity"
    SURGE_QUOTA = "surge-quota"
    MODEL_REPLICAS = "model-replicas"
    MODEL_PDB = "model-pdb"
    PDB_BLOCKS_DRAIN = "pdb-blocks-drain"
    READINESS_PROBE = "readiness-probe"
    WEIGHTS_CACHE = "weights-cache"
    BATCH_JOBS = "batch-jobs"
    MODEL_METRICS = "model-metrics"
    # checks.validation: verify, runbook section 5
    DRIVER_VERSION = "driver-version"
    GPU_COUNT = "gpu-count"
    OPERATOR_VALIDATOR = "operator-validator"
    MODEL_ANSWERS = "model-answers"
    LATENCY_THROUGHPUT = "latency-throughput"
    MODEL_RESTARTS = "model-restarts"
    NO_NEW_XID = "no-new-xid"
    DCGM_METRICS = "dcgm-metrics"
    VALIDATION_JOB = "validation-job"