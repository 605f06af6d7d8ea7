"""Type tokens of the resources the program registers, as the engine, the pack and the plan name them."""

from __future__ import annotations

AKS_POOL = "azure-native:containerservice:AgentPool"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CLUSTER_POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"  # what the program registers (patch mode)
CLUSTER_POLICY_CR = "kubernetes:nvidia.com/v1:ClusterPolicy"  # the whole CR, as a stack that created it registers it
NVIDIA_DRIVER = "kubernetes:nvidia.com/v1alpha1:NVIDIADriver"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"  # the records: cluster identity, a pool of an existing cluster
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
