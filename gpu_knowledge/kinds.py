"""The Kubernetes kinds this project writes or reads: group, version, kind and plural, each spelled once.

The program registers some of them (through pulumi_kubernetes, whose type tokens embed group and version:
``engine_contracts.resource_facts.tokens``); the live checks list or patch others (``checks/kube.py`` addresses them by
group, version and plural); RBAC rules and admission policies name them by group and plural, object
references by group and kind. The kubeconfig's ``v1`` ``Config`` is a client file, no kind the API serves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str  # the resource name in URLs and RBAC rules
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``apiVersion`` as an object states it: ``group/version``, the bare version in the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version


# Core.
NODE = Kind("", "v1", "Node", "nodes", namespaced=False)
POD = Kind("", "v1", "Pod", "pods", namespaced=True)
EVENT = Kind("", "v1", "Event", "events", namespaced=True)
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps", namespaced=True)
NAMESPACE = Kind("", "v1", "Namespace", "namespaces", namespaced=False)
SERVICE_ACCOUNT = Kind("", "v1", "ServiceAccount", "serviceaccounts", namespaced=True)
SERVICE = Kind("", "v1", "Service", "services", namespaced=True)  # an in-cluster Prometheus's proxy; the guard's

# Workloads and their disruption budgets.
DEPLOYMENT = Kind("apps", "v1", "Deployment", "deployments", namespaced=True)
DAEMON_SET = Kind("apps", "v1", "DaemonSet", "daemonsets", namespaced=True)
POD_DISRUPTION_BUDGET = Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", namespaced=True)
# The body posted to a pod's eviction subresource (RBAC: pods/eviction); no resource of its own is addressed.
EVICTION = Kind("policy", "v1", "Eviction", "evictions", namespaced=True)

# The fleet's train holds one Lease (fleetspec/fleet_file.py: LEASE_NAMESPACE, LEASE_NAME), so two `fleet advance` never run
# at once.
LEASE = Kind("coordination.k8s.io", "v1", "Lease", "leases", namespaced=True)

# The validation job's identity and the admission policy that narrows it (components/validation.py).
RBAC_GROUP = "rbac.authorization.k8s.io"
CLUSTER_ROLE = Kind(RBAC_GROUP, "v1", "ClusterRole", "clusterroles", namespaced=False)
CLUSTER_ROLE_BINDING = Kind(RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False)
# The guard's namespaced grants: its own Lease, the fleet's halt record, a Prometheus Service's proxy.
ROLE = Kind(RBAC_GROUP, "v1", "Role", "roles", namespaced=True)
ROLE_BINDING = Kind(RBAC_GROUP, "v1", "RoleBinding", "rolebindings", namespaced=True)
# The guard records why it paused as Events of either API (core v1 and events.k8s.io).
EVENTS_EVENT = Kind("events.k8s.io", "v1", "Event", "events", namespaced=True)
ADMISSION_GROUP = "admissionregistration.k8s.io"
VALIDATING_ADMISSION_POLICY = Kind(ADMISSION_GROUP, "v1", "ValidatingAdmissionPolicy",
                                   "validatingadmissionpolicies", namespaced=False)
VALIDATING_ADMISSION_POLICY_BINDING = Kind(ADMISSION_GROUP, "v1", "ValidatingAdmissionPolicyBinding",
                                           "validatingadmissionpolicybindings", namespaced=False)

# The GPU Operator's custom resources (its CRDs: tests/data/crds/).
NVIDIA_GROUP = "nvidia.com"
CLUSTER_POLICY = Kind(NVIDIA_GROUP, "v1", "ClusterPolicy", "clusterpolicies", namespaced=False)
NVIDIA_DRIVER = Kind(NVIDIA_GROUP, "v1alpha1", "NVIDIADriver", "nvidiadrivers", namespaced=False)

# The Prometheus Operator's custom resources (their CRDs: tests/data/monitoring-crds/), declared for the guard
# where a stack says the cluster has them (guard.prometheusOperator).
MONITORING_GROUP = "monitoring.coreos.com"
SERVICE_MONITOR = Kind(MONITORING_GROUP, "v1", "ServiceMonitor", "servicemonitors", namespaced=True)
PROMETHEUS_RULE = Kind(MONITORING_GROUP, "v1", "PrometheusRule", "prometheusrules", namespaced=True)
