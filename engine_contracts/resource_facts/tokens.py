"""Type tokens of the resources the program registers, as the engine, the pack and the plan name them."""

from __future__ import annotations

from typing import Protocol

from gpu_knowledge import kinds


def kubernetes_type(kind: kinds.Kind, *, patch: bool = False) -> str:
    """pulumi_kubernetes' type token of a kind (``core`` for the core group); ``patch``: its server-side-apply
    patch resource, which takes over only the fields it states."""
    return f"kubernetes:{kind.group or 'core'}/{kind.version}:{kind.kind}{'Patch' if patch else ''}"


AKS_POOL = "azure-native:containerservice:AgentPool"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CLUSTER_POLICY_PATCH = kubernetes_type(kinds.CLUSTER_POLICY, patch=True)  # what the program registers (patch mode)
CLUSTER_POLICY_CR = kubernetes_type(kinds.CLUSTER_POLICY)  # the whole CR, as a stack that created it registers it
NVIDIA_DRIVER = kubernetes_type(kinds.NVIDIA_DRIVER)
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"  # the provider's own resource type, no Kubernetes kind
PDB = kubernetes_type(kinds.POD_DISRUPTION_BUDGET)
NAMESPACE = kubernetes_type(kinds.NAMESPACE)  # read, never managed: the cluster identity's kube-system UID
CONFIG_MAP = kubernetes_type(kinds.CONFIG_MAP)  # the records: cluster identity, a pool of an existing cluster
DAEMON_SET = kubernetes_type(kinds.DAEMON_SET)  # the validation job's, one per pool it validates
DEPLOYMENT = kubernetes_type(kinds.DEPLOYMENT)  # the in-cluster guard's
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
STACK_REFERENCE = "pulumi:pulumi:StackReference"  # the stack's own last deployment (components/previous.py)
# The component that holds that reference and registers its outputs: stack policies see a component's
# registered outputs, and no StackReference at all.
PREVIOUS_DEPLOYMENT_COMPONENT = "gpu-driver-upgrade:fleet:PreviousDeployment"

CLOUD_POOL_TYPES = (AKS_POOL, EKS_NODE_GROUP)
POOL_TYPES = (AKS_POOL, EKS_NODE_GROUP, CONFIG_MAP)  # a ConfigMap only when it is a pool record
DRIVER_TYPES = (CLUSTER_POLICY_PATCH, CLUSTER_POLICY_CR, NVIDIA_DRIVER, HELM_RELEASE)
CLUSTER_POLICY_TYPES = (CLUSTER_POLICY_PATCH, CLUSTER_POLICY_CR)

OPERATOR_CHART = "gpu-operator"  # the Helm chart whose Release carries the operator's driver values


class Identified(Protocol):
    """A registered resource as anything records it: the plan's record, a rule's view, the pack's proxy."""

    @property
    def type(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def urn(self) -> str: ...


def canonical_order(resource: Identified) -> tuple[str, str, str]:
    """The order every list of resources is read in: by type, then name (then URN, unique in the engine).
    The order resources arrive in is not the program's: the SDK registers each one when its inputs
    resolve, on worker threads, so two runs of one program (or the engine and `gpu-rollout plan`) may
    register them in different orders."""
    return (resource.type, resource.name, resource.urn)
