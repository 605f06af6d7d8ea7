"""Label, annotation, taint and tag keys, by who owns them: Kubernetes, GPU Feature Discovery and Node Feature
Discovery, the GPU Operator, the clouds, and this project.

Kept in one module so components, policy rules and live checks agree on spelling. Every key others own is
spelled as they set it; each label has a name of its own, a deprecated one too.
"""

from __future__ import annotations

# ---------------------------------------------------------------- Kubernetes

TOPOLOGY_REGION = "topology.kubernetes.io/region"  # the cloud region of a node (EKS: the cluster's region)
TOPOLOGY_ZONE = "topology.kubernetes.io/zone"  # its availability zone
# The node's VM size (AKS) or EC2 instance type (EKS), as the cloud provider sets it.
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
HOSTNAME = "kubernetes.io/hostname"  # one value per node: the topology of "not on the same node"

# ---------------------------------------------------------------- GPU Feature Discovery and Node Feature Discovery

GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"  # GPUs on the node
GPU_REPLICAS = "nvidia.com/gpu.replicas"  # "1" unless time-slicing/MPS shares each GPU
GPU_SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"  # none | time-slicing | mps
MIG_STRATEGY = "nvidia.com/mig.strategy"  # none | single | mixed (set on every node under a strategy)
# A node's driver version (GFD >= v0.15.0), and its branch: the label the validation job selects a bare branch by.
GFD_DRIVER_VERSION = "nvidia.com/cuda.driver-version.full"
GFD_DRIVER_VERSION_MAJOR = "nvidia.com/cuda.driver-version.major"
# The deprecated form of the same, still emitted: read as a fallback where the full version is missing.
GFD_DRIVER_MAJOR_DEPRECATED = "nvidia.com/cuda.driver.major"
GFD_DRIVER_MINOR_DEPRECATED = "nvidia.com/cuda.driver.minor"
GFD_DRIVER_REV_DEPRECATED = "nvidia.com/cuda.driver.rev"
KERNEL_VERSION = "feature.node.kubernetes.io/kernel-version.full"  # NFD: the node's kernel

# ---------------------------------------------------------------- the GPU Operator and its operands

GPU_PRESENT = "nvidia.com/gpu.present"  # the operator's, from NFD's PCI labels
DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"
MIG_CONFIG = "nvidia.com/mig.config"  # the MIG layout (operator / mig-manager); default all-disabled
MIG_CONFIG_DISABLED = "all-disabled"  # the layout of whole GPUs: the operator's default value of MIG_CONFIG
GPU_RESOURCE = "nvidia.com/gpu"  # the device plugin's extended resource
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"  # extended resources of MIG devices (nvidia.com/mig-1g.10gb ...)
DRIVER_OWNER = "nvidia.com/gpu-operator.driver.owner"  # operator >= 26.7 sets it; never set by us
PRECOMPILED = "nvidia.com/precompiled"  # "true" on the operator's precompiled driver DaemonSets
# The operator's driver pods, by chart release: (label key, value) pairs, any one of which marks one.
DRIVER_POD_LABELS = (("app.kubernetes.io/component", "nvidia-driver"), ("app", "nvidia-driver-daemonset"))

# The upgrade controller (k8s-operator-libs, driver name "gpu"): a node's state, and the label that holds it.
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
SKIP_UPGRADE = "nvidia.com/gpu-driver-upgrade.skip"
# The states (values of UPGRADE_STATE) that the live verbs act on.
UPGRADE_REQUIRED = "upgrade-required"  # waiting for an upgrade slot: the next node the operator starts
UPGRADE_DONE = "upgrade-done"
UPGRADE_FAILED = "upgrade-failed"
# The states where the controller waits up to a timeout of the upgrade policy (waitForCompletion, podDeletion, drain).
WAIT_FOR_JOBS_REQUIRED, POD_DELETION_REQUIRED, DRAIN_REQUIRED = (
    "wait-for-jobs-required", "pod-deletion-required", "drain-required")
UPGRADE_IN_PROGRESS = ("cordon-required", WAIT_FOR_JOBS_REQUIRED, POD_DELETION_REQUIRED, DRAIN_REQUIRED,
                       "pod-restart-required", "validation-required", "uncordon-required")

# ---------------------------------------------------------------- the clouds

# Their own node labels: a pool's nodes carry them from their first boot, before this stack labels them.
AKS_AGENT_POOL = "kubernetes.azure.com/agentpool"
AKS_CLUSTER = "kubernetes.azure.com/cluster"  # the node resource group, MC_<resource group>_<cluster>_<location>
AKS_NODE_IMAGE_VERSION = "kubernetes.azure.com/node-image-version"  # e.g. AKSUbuntu-2204gen2containerd-202510.14.0
EKS_NODE_GROUP = "eks.amazonaws.com/nodegroup"

# ---------------------------------------------------------------- this project

# Every GPU node carries its pool, role and rollout wave, so a NVIDIADriver can select one pool and checks
# can group nodes without cloud-specific labels.
DOMAIN = "gpu-driver-upgrade.io"
POOL = f"{DOMAIN}/pool"
ROLE = f"{DOMAIN}/role"
WAVE = f"{DOMAIN}/wave"
GENERATION = f"{DOMAIN}/generation"
MODEL = f"{DOMAIN}/model"

# Pool facts on every node of a pool (AKS nodeLabels, EKS labels), so policy rules see the pool's
# hardware as declared. GFD's nvidia.com/gpu.product stays the observed truth; live checks compare.
POOL_GPU_PRODUCT = f"{DOMAIN}/gpu-product"
POOL_GPUS_PER_NODE = f"{DOMAIN}/gpus-per-node"
POOL_NVSWITCH = f"{DOMAIN}/nvswitch"
POOL_FABRIC_MANAGER = f"{DOMAIN}/fabric-manager"  # driver-container | image | host
POOL_FABRIC_MANAGER_VERSION = f"{DOMAIN}/fabric-manager-version"  # host-installed FM only
POOL_IMAGE_DRIVER = f"{DOMAIN}/image-driver"  # driver shipped by the node image of a generation
POOL_MIG_CONFIG = f"{DOMAIN}/mig-config"  # declared MIG layout; written only when not all-disabled
POOL_OS = f"{DOMAIN}/os"  # declared OS of a custom AMI or an existing pool (AKS osSku, EKS amiType say it)

# ConfigMaps a stack writes about itself in the cluster (namespace kube-system), told apart by this label:
# ``cluster-identity`` (which cluster this is, checked by the live verbs) and ``pool`` (a pool of a
# ``cloud: existing`` cluster, whose cloud resource this stack does not own).
RECORD = f"{DOMAIN}/record"
RECORD_CLUSTER_IDENTITY = "cluster-identity"
RECORD_POOL = "pool"
RECORD_PROMOTION = "promotion"  # a prod stack's gate record: the canary attestations it relies on (issue 10)
ANNOTATION_NODE_SELECTOR = f"{DOMAIN}/node-selector"  # a pool record's declared nodeSelector, as JSON

# Annotations carrying facts the policy pack needs to see on the resource itself.
ANNOTATION_STAGE = f"{DOMAIN}/stage"
ANNOTATION_REPLICAS = f"{DOMAIN}/replicas"
ANNOTATION_GPUS_PER_REPLICA = f"{DOMAIN}/gpus-per-replica"
ANNOTATION_CUDA = f"{DOMAIN}/cuda-version"
ANNOTATION_IMAGE = f"{DOMAIN}/image"
ANNOTATION_POOLS = f"{DOMAIN}/node-pools"
ANNOTATION_FORWARD_COMPAT = f"{DOMAIN}/cuda-forward-compat"
ANNOTATION_CHANGE_TICKET = f"{DOMAIN}/change-ticket"
# On the train's Lease of each cluster: the pool events announced there (announcements/), so each is sent once.
ANNOTATION_ANNOUNCED = f"{DOMAIN}/announced"
ANNOTATION_OWNERS = f"{DOMAIN}/owners"  # a model's owners (GitHub @org/team or @user), comma-separated
ANNOTATION_OPERATOR_VERSION = f"{DOMAIN}/operator-version"  # GPU Operator release the driver runs under
ANNOTATION_TARGET_DRIVER = f"{DOMAIN}/target-driver"  # the stack's driver.version
ANNOTATION_HELD = f"{DOMAIN}/held"  # "true" while the pool is held on previousVersion
ANNOTATION_BATCH_SELECTORS = f"{DOMAIN}/batch-job-selectors"  # newline-separated label selectors
ANNOTATION_DCGM_EXPORTER = f"{DOMAIN}/dcgm-exporter"  # the DCGM Exporter image tag the stack declares

# gpu-rollout pause: the stack that set a node's skip label, and why (resume removes only its own).
ANNOTATION_PAUSED_BY = f"{DOMAIN}/paused-by"
ANNOTATION_PAUSED_REASON = f"{DOMAIN}/paused-reason"
# The in-cluster guard's own node annotations all start so (its admission policy lets it write only these besides
# the pause label and annotations).
GUARD_ANNOTATION_PREFIX = f"{DOMAIN}/guard-"
# The fleet's train (fleetspec/fleet_file.py): on its Lease, why and since when it is halted (JSON: cause, at, by); nothing moves
# until `gpu-rollout fleet resume` removes it. Each cluster of the fleet holds its own record, on a Lease of the same name
# (the lease stack's cluster: the train's lock itself), so a halt is recorded wherever it can reach.
ANNOTATION_FLEET_HALTED = f"{DOMAIN}/fleet-halted"
# ... and the waves a rollback halted (JSON: wave -> cause, at, by): that wave and the later ones stay where they are.
ANNOTATION_FLEET_WAVES_HALTED = f"{DOMAIN}/fleet-waves-halted"
# ... and, per stack, the update whose `verify --smoke` passed (JSON: stack -> update version), so it is not asked again.
ANNOTATION_FLEET_VERIFIED = f"{DOMAIN}/fleet-verified"
# ... and, per stack and pool, the target its nodes were first seen complete on by a passing verify, and when (JSON:
# stack -> pool -> {target, at}): the next wave's dwell, and an old generation's keep, count from it.
ANNOTATION_FLEET_POOLS_VERIFIED = f"{DOMAIN}/fleet-pools-verified"
# ... and, per stack, what its guard (`gpu-rollout guard`, docs/guard.md) saw last (JSON: stack -> at, holder, paused,
# triggers, drift), so `fleet status` and `advance` take a cluster's triggers seconds old.
ANNOTATION_GUARD_STATUS = f"{DOMAIN}/guard-status"
# On the guard's election Lease, set by a person for planned work: until then (RFC 3339) the guard judges and reports
# but pauses, evicts and records nothing (docs/guard.md, "Silencing it").
ANNOTATION_GUARD_SILENCED_UNTIL = f"{DOMAIN}/guard-silenced-until"
# A model's pod template annotated so declares its weights baked into (and pre-pulled with) the image.
ANNOTATION_WEIGHTS_IN_IMAGE = f"{DOMAIN}/weights-in-image"

# The taint that keeps non-GPU pods off GPU pools, under NVIDIA's resource name, which the operator's pods tolerate.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NoSchedule"

# Cloud tags on every pool. Azure tag names may not contain '/', so tags use ':' (valid on AWS too).
TAG_PREFIX = "gpu-driver-upgrade:"
TAG_POOL = f"{TAG_PREFIX}pool"
TAG_STAGE = f"{TAG_PREFIX}stage"
TAG_DRIVER_OWNER = f"{TAG_PREFIX}driver-owner"
TAG_CHANGE_TICKET = f"{TAG_PREFIX}change-ticket"
TAG_NODE_IMAGE = f"{TAG_PREFIX}node-image"
TAG_IMAGE_DRIVER = f"{TAG_PREFIX}image-driver"
TAG_DEPLOYED_WITH = f"{TAG_PREFIX}deployed-with"  # replace-only fields as last deployed (gpu_knowledge.replacement)
