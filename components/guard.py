"""Guard: the in-cluster guard (gpu-rollout's guard verb) of the stack, where ``guard.enabled`` (on in prod).

A Deployment (``guard.replicas``, two by default; one leader by a Lease) runs the project's own image with the stack
file as deployed (a ConfigMap rendered from the spec: no other config key, so no provider secret, reaches it). It
is never placed on a GPU node it might pause: no GPU toleration, and a required node affinity away from GFD's GPU
nodes and the stack's pools. A PodDisruptionBudget keeps one replica through a drain; a Service serves `/metrics`
and `/healthz`; where the stack says the Prometheus Operator's CRDs exist (``guard.prometheusOperator``: a claim,
since the program declares the same resources in preview and update and a read of an absent CRD fails the update
instead of answering "none"), a ServiceMonitor and the alerts: rollout paused, drift, guard down.

What it may do is exactly what the process needs (read the fleet, pause, evict, record): RBAC below, and a
ValidatingAdmissionPolicy that narrows its node patches to the pause label and annotations and its own
``gpu-driver-upgrade.io/guard-*`` annotations, as components/validation.py narrows the validation job's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options
from engine_contracts import resource_facts as rf
from fleetspec.base import PROJECT
from fleetspec.fleet_file import LEASE_NAME as HALT_RECORD_LEASE, LEASE_NAMESPACE as HALT_RECORD_NAMESPACE
from fleetspec.membership import pool_node_selectors
from fleetspec.model import FleetSpec
from fleetspec.observability import PrometheusService, prometheus_access
from fleetspec.notifications import WEBHOOK_NAMESPACE
from gpu_knowledge import kinds, labels
from renderers.node_admission import node_patch_policy, unchanged_except
from renderers.manifests import RECORD_NAMESPACE

NAME = rf.GUARD_NAME  # Deployment, ServiceAccount, Service, PodDisruptionBudget and the leader's Lease
PROJECT_CONFIG_MAP = "gpu-rollout-guard-project"
PROJECT_MOUNT = "/etc/gpu-rollout/project"
PORT = 9400
PORT_NAME = "metrics"
ANNOTATION_PROJECT = f"{labels.DOMAIN}/guard-project"  # sha256 of the project files: a change restarts the pods
RUN_AS = 65532  # the image's non-root user (Dockerfile)
# The pause writes (checks/pause.py): the label, and who paused and why.
PAUSE_ANNOTATIONS = (labels.ANNOTATION_PAUSED_BY, labels.ANNOTATION_PAUSED_REASON)
READ = ["get", "list", "watch"]
# Type tokens of what the guard registers besides its ConfigMap and PDB (the Deployment is what policy
# guard-image-digest reads; tests/engine_contracts/test_resource_facts.py lists them).
RESOURCE_TYPES = tuple(rf.kubernetes_type(kind) for kind in (
    kinds.NAMESPACE, kinds.SERVICE_ACCOUNT, kinds.CLUSTER_ROLE, kinds.CLUSTER_ROLE_BINDING, kinds.ROLE,
    kinds.ROLE_BINDING, kinds.VALIDATING_ADMISSION_POLICY, kinds.VALIDATING_ADMISSION_POLICY_BINDING, kinds.SERVICE,
    kinds.DEPLOYMENT, kinds.SERVICE_MONITOR, kinds.PROMETHEUS_RULE,
))
MONITORING_TYPES = tuple(rf.kubernetes_type(kind) for kind in (kinds.SERVICE_MONITOR, kinds.PROMETHEUS_RULE))


# ---------------------------------------------------------------- names


def cluster_scoped_name(spec: FleetSpec) -> str:
    """ClusterRole, binding and admission policy: one per stage, so a canary and a prod guard on one cluster
    never own the same object."""
    return f"{PROJECT}-guard-{spec.stage.value}"


def service_account_user(spec: FleetSpec) -> str:
    return f"system:serviceaccount:{spec.guard.namespace}:{NAME}"


# ---------------------------------------------------------------- what it runs


def command(stack: str, namespace: str) -> list[str]:
    """The process's command line (the contract with gpu-rollout's guard verb)."""
    return ["gpu-rollout", "guard", "--stack", stack, "--project-dir", PROJECT_MOUNT, "--in-cluster",
            "--listen", f"0.0.0.0:{PORT}", "--lease-namespace", namespace, "--lease-name", NAME]


def project_files(spec: FleetSpec, stack: str) -> dict[str, str]:
    """Pulumi.yaml and Pulumi.<stack>.yaml as the process loads them: the project's name, and the stack's config
    as deployed, rendered from the spec (only the keys the stack file set; ``fleetspec.load`` reads it back to the
    same spec)."""
    values = spec.model_dump(mode="json", exclude_unset=True)
    config = {f"{PROJECT}:{key}": value for key, value in values.items()}
    return {
        "Pulumi.yaml": _yaml({"name": PROJECT, "runtime": "python"}),
        f"Pulumi.{stack}.yaml": _yaml({"config": config}, width=120),
    }


# libyaml's emitter where PyYAML has it: the same text as the pure-Python one (a port of it), a fifth of the time
# on a 150-pool stack, which every plan renders.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _yaml(document: dict[str, Any], width: int | None = None) -> str:
    return yaml.dump(document, Dumper=_SafeDumper, sort_keys=False, width=width)


def node_affinity(spec: FleetSpec) -> dict[str, Any]:
    """Required: a node without GPUs (GFD's label) and in none of the stack's pools, as far as one term can say so
    (every single-label way of finding a pool's nodes; fleetspec.membership)."""
    excluded: dict[str, set[str]] = {}
    for pool in spec.nodePools:
        for selector in pool_node_selectors(spec, pool):
            if len(selector) == 1:
                (key, value), = selector.items()
                excluded.setdefault(key, set()).add(value)
    expressions: list[dict[str, Any]] = [{"key": labels.GPU_PRESENT, "operator": "DoesNotExist"}]
    expressions += [{"key": key, "operator": "NotIn", "values": sorted(values)}
                    for key, values in sorted(excluded.items())]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": expressions}]}}


def _sha256(files: dict[str, str]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def deployment_body(spec: FleetSpec, stack: str, files: dict[str, str]) -> dict[str, Any]:
    """metadata and spec of the guard's Deployment (needs ``guard.image``); ``files``: :func:`project_files`,
    whose digest restarts the pods when the stack file changes."""
    guard = spec.guard
    assert guard.image is not None
    selector = rf.guard_labels()
    field_env = [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
                 for name, path in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"))]
    probe = {"httpGet": {"path": "/healthz", "port": PORT_NAME}, "periodSeconds": 10, "timeoutSeconds": 5}
    container = {
        "name": "guard",
        "image": guard.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command(stack, guard.namespace),
        # The root filesystem is read-only: whatever the process writes goes to the pod's own /tmp.
        "env": [*field_env, {"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "HOME", "value": "/tmp"}],
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        # Ready while its watch streams are live and it leads or follows; restarted after ~2 min without.
        "readinessProbe": {**probe, "failureThreshold": 3},
        "livenessProbe": {**probe, "initialDelaySeconds": 30, "failureThreshold": 12},
        # A 10,000-node cluster's slim records stay under 300 MB (benchmarks/).
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True, "runAsUser": RUN_AS,
                            "runAsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "project", "mountPath": PROJECT_MOUNT, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],  # noqa: S108 - an emptyDir of the pod's own
    }
    return {
        "metadata": {"name": NAME, "namespace": guard.namespace, "labels": selector},
        "spec": {
            "replicas": guard.replicas,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": selector,
                             "annotations": {ANNOTATION_PROJECT: _sha256(files)}},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": True,  # --in-cluster: the ServiceAccount's token
                    "enableServiceLinks": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    # No GPU toleration, and away from GPU nodes: the guard never runs where it pauses or drains.
                    "affinity": {
                        "nodeAffinity": node_affinity(spec),
                        # Preferred, not required: a cluster with one spare node still runs both replicas.
                        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": selector},
                                                                "topologyKey": labels.HOSTNAME}}]},
                    },
                    "containers": [container],
                    "volumes": [{"name": "project", "configMap": {"name": PROJECT_CONFIG_MAP, "defaultMode": 0o444}},
                                {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


# ---------------------------------------------------------------- what it may do


def _rule(kind: kinds.Kind, verbs: list[str], *, sub: str = "", names: list[str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [kind.group], "resources": [f"{kind.plural}/{sub}" if sub else kind.plural],
                            "verbs": verbs}
    if names is not None:
        rule["resourceNames"] = names
    return rule


def cluster_role_rules() -> list[dict[str, Any]]:
    """Cluster-wide: read what `watch` reads (nodes, pods, Deployments, PDBs, Events, the operator's CRs, the
    kube-system Namespace whose UID names the cluster); patch nodes (narrowed by the admission policy); evict pods;
    record Events in either API."""
    return [
        _rule(kinds.NODE, [*READ, "patch"]),
        _rule(kinds.POD, READ),
        _rule(kinds.POD, ["create"], sub="eviction"),
        _rule(kinds.DEPLOYMENT, READ),
        _rule(kinds.POD_DISRUPTION_BUDGET, READ),
        _rule(kinds.CLUSTER_POLICY, READ),
        _rule(kinds.NVIDIA_DRIVER, READ),
        _rule(kinds.EVENT, [*READ, "create"]),
        _rule(kinds.EVENTS_EVENT, ["create"]),
        _rule(kinds.NAMESPACE, ["get"], names=[RECORD_NAMESPACE]),  # its UID names the cluster
    ]


def namespaced_roles(spec: FleetSpec) -> dict[str, list[dict[str, Any]]]:
    """Per namespace, the Role's rules: its own Lease (create cannot be scoped to a name), the fleet's halt record
    and the cluster identity records in kube-system, and where Prometheus is an in-cluster Service, its proxy."""
    own = [_rule(kinds.LEASE, ["get", "update"], names=[NAME]), _rule(kinds.LEASE, ["create"])]
    roles: dict[str, list[dict[str, Any]]] = {spec.guard.namespace: own}
    roles.setdefault(HALT_RECORD_NAMESPACE, []).extend(
        [_rule(kinds.LEASE, ["get", "update", "patch"], names=[HALT_RECORD_LEASE]), _rule(kinds.LEASE, ["create"])])
    # The cluster identity records, read by label (checks/identity.py).
    roles.setdefault(RECORD_NAMESPACE, []).append(_rule(kinds.CONFIG_MAP, ["get", "list"]))
    # The model owners' webhook URL (announcements/), where the stack names one: that one Secret, read only.
    webhook = spec.notifications.webhook if spec.notifications else None
    if webhook is not None:
        roles.setdefault(WEBHOOK_NAMESPACE, []).append(_rule(kinds.SECRET, ["get"], names=[webhook.secret]))
    validation = spec.validation
    access = prometheus_access(validation.prometheus) if validation and validation.prometheus else None
    if isinstance(access, PrometheusService):
        # The service proxy's name segment is [https:]<name>:<port> (checks/kube.py); queries are POSTs.
        scheme = "https:" if access.scheme == "https" else ""
        roles.setdefault(access.namespace, []).append(
            _rule(kinds.SERVICE, ["create"], sub="proxy", names=[f"{scheme}{access.name}:{access.port}"]))
    return roles


def admission_policy_spec(spec: FleetSpec) -> dict[str, Any]:
    """What RBAC cannot say: in a node, only the pause label, the pause annotations and the guard's own
    annotations may change; nothing in its spec, owners or finalizers; no subresource."""
    pause_label = labels.SKIP_UPGRADE
    allowed_annotations = "[" + ", ".join(f"'{key}'" for key in PAUSE_ANNOTATIONS) + "]"
    prefix = labels.GUARD_ANNOTATION_PREFIX

    def same(path: str) -> str:
        return (f"has(object.{path}) == has(oldObject.{path}) && "
                f"(!has(object.{path}) || object.{path} == oldObject.{path})")

    return node_patch_policy("gpu-rollout-guard", service_account_user(spec), [
        {"expression": "!has(request.subResource) || request.subResource == ''",
         "message": "the guard may not change a node's status", "reason": "Forbidden"},
        {"expression": unchanged_except("variables.newLabels", "variables.oldLabels", f"k == '{pause_label}'"),
         "message": f"the guard may change only the pause label ({pause_label}) of a node",
         "reason": "Forbidden"},
        {"expression": unchanged_except("variables.newAnnotations", "variables.oldAnnotations",
                                        f"k in {allowed_annotations} || k.startsWith('{prefix}')"),
         "message": f"the guard may change only the pause annotations ({', '.join(PAUSE_ANNOTATIONS)}) and its "
                    f"own ({prefix}*) of a node",
         "reason": "Forbidden"},
        {"expression": " && ".join([same("spec"), same("metadata.ownerReferences"), same("metadata.finalizers")]),
         "message": "the guard may not change a node's spec (taints, unschedulable, ...), owners or finalizers",
         "reason": "Forbidden"},
    ])


# ---------------------------------------------------------------- watching the watcher


def alert_rules(namespace: str) -> list[dict[str, Any]]:
    """The alerts over the guard's metrics (checks/guard_metrics.py; both replicas serve them: max, never sum)."""
    where = f'namespace="{namespace}"'
    runbook = "see the guard's page in the project's docs/"
    return [
        {"alert": "GpuRolloutPausedByGuard", "expr": f"max(gpu_rollout_guard_paused{{{where}}}) > 0", "for": "1m",
         "labels": {"severity": "critical"},
         "annotations": {"summary": "The guard paused the GPU driver rollout",
                         "description": f"A trigger fired and the guard set the pause label; {runbook}."}},
        {"alert": "GpuFleetDrift", "expr": f"max by (kind) (gpu_rollout_guard_drift{{{where}}}) > 0",
         "for": "15m", "labels": {"severity": "warning"},
         "annotations": {"summary": "GPU fleet drift: {{ $labels.kind }}",
                         "description": f"The guard sees drift between rollouts (no pause); {runbook}."}},
        # No replica healthy (its watch streams live, its Lease current), or none scraped at all.
        {"alert": "GpuRolloutGuardDown", "expr": f"absent(gpu_rollout_guard_up{{{where}}} == 1)", "for": "5m",
         "labels": {"severity": "critical"},
         "annotations": {"summary": "No healthy GPU rollout guard",
                         "description": "Nothing watches the GPU driver rollout in this cluster."}},
    ]


def service_monitor_spec() -> dict[str, Any]:
    return {"selector": {"matchLabels": rf.guard_labels()},
            "endpoints": [{"port": PORT_NAME, "path": "/metrics", "interval": "30s"}]}


# ---------------------------------------------------------------- the component


class GuardArgs(ComponentArgs):
    namespace: str = Field(description="The guard's namespace (guard.namespace).")
    cluster_scoped_name: str = Field(
        description="The name of its ClusterRole, binding and admission policy, one per stage (cluster_scoped_name).")
    cluster_role_rules: list[dict[str, Any]] = Field(description="Its cluster-wide rules (cluster_role_rules).")
    roles: dict[str, list[dict[str, Any]]] = Field(description="Per namespace, its Role's rules (namespaced_roles).")
    admission_policy: dict[str, Any] = Field(
        description="The ValidatingAdmissionPolicy's spec: what it may change on a node (admission_policy_spec).")
    project_files: dict[str, str] = Field(description="The project ConfigMap's files (project_files).")
    deployment: dict[str, Any] | None = Field(
        description="The Deployment's metadata and spec (deployment_body); None without guard.image, which "
        "policy guard-image-digest refuses in prod.")
    monitoring_labels: dict[str, str] | None = Field(
        description="Where the Prometheus Operator's CRDs exist (guard.prometheusOperator), the labels of its "
        "ServiceMonitor and PrometheusRule; None: neither is declared.")


class Guard(pulumi.ComponentResource):
    """Namespace, identity, RBAC, admission policy, project ConfigMap, Deployment, PDB, Service and monitoring."""

    def __init__(self, name: str, args: GuardArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:guard:Guard", name, None, opts)
        child = child_options(self, opts)
        ns, cluster_name, app = args.namespace, args.cluster_scoped_name, rf.guard_labels()

        namespace = k8s.core.v1.Namespace(ns, metadata={"name": ns, "labels": {
            **app, "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}},
            opts=child)
        in_namespace = child_options(self, opts, depends_on=[namespace])
        account = k8s.core.v1.ServiceAccount(
            NAME, metadata={"name": NAME, "namespace": ns, "labels": app}, opts=in_namespace)
        subject = {"kind": kinds.SERVICE_ACCOUNT.kind, "name": NAME, "namespace": ns}
        role = k8s.rbac.v1.ClusterRole(
            cluster_name, metadata={"name": cluster_name, "labels": app}, rules=args.cluster_role_rules, opts=child)
        grants: list[pulumi.Resource] = [k8s.rbac.v1.ClusterRoleBinding(
            cluster_name, metadata={"name": cluster_name, "labels": app},
            role_ref={"apiGroup": kinds.CLUSTER_ROLE.group, "kind": kinds.CLUSTER_ROLE.kind, "name": cluster_name},
            subjects=[subject], opts=child_options(self, opts, depends_on=[role, account]))]
        for where, rules in sorted(args.roles.items()):
            metadata = {"name": cluster_name, "namespace": where, "labels": app}
            waits = [namespace] if where == ns else []
            local = k8s.rbac.v1.Role(f"{cluster_name}-{where}", metadata=metadata, rules=rules,
                                     opts=child_options(self, opts, depends_on=waits))
            grants.append(k8s.rbac.v1.RoleBinding(
                f"{cluster_name}-{where}", metadata=metadata,
                role_ref={"apiGroup": kinds.ROLE.group, "kind": kinds.ROLE.kind, "name": cluster_name},
                subjects=[subject], opts=child_options(self, opts, depends_on=[local, account])))
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            cluster_name, metadata={"name": cluster_name, "labels": app}, spec=args.admission_policy, opts=child)
        policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            cluster_name, metadata={"name": cluster_name, "labels": app},
            spec={"policyName": cluster_name, "validationActions": ["Deny"]},
            opts=child_options(self, opts, depends_on=[policy]))
        project = k8s.core.v1.ConfigMap(
            PROJECT_CONFIG_MAP, metadata={"name": PROJECT_CONFIG_MAP, "namespace": ns, "labels": app},
            data=args.project_files, opts=in_namespace)
        k8s.policy.v1.PodDisruptionBudget(
            NAME, metadata={"name": NAME, "namespace": ns, "labels": app},
            spec={"maxUnavailable": 1, "selector": {"matchLabels": app}}, opts=in_namespace)
        service = k8s.core.v1.Service(
            NAME, metadata={"name": NAME, "namespace": ns, "labels": app},
            spec={"selector": app, "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME}]},
            opts=in_namespace)
        if args.deployment is not None:
            # It may patch a node only once the admission policy guards that patch.
            k8s.apps.v1.Deployment(
                NAME, metadata=args.deployment["metadata"], spec=args.deployment["spec"],
                opts=child_options(self, opts, depends_on=[project, account, *grants, policy_binding]))
        if args.monitoring_labels is not None:
            labelled = {**args.monitoring_labels, **app}
            k8s.apiextensions.CustomResource(
                NAME, api_version=kinds.SERVICE_MONITOR.api_version, kind=kinds.SERVICE_MONITOR.kind,
                metadata={"name": NAME, "namespace": ns, "labels": labelled}, spec=service_monitor_spec(),
                opts=child_options(self, opts, depends_on=[service]))
            k8s.apiextensions.CustomResource(
                f"{NAME}-alerts", api_version=kinds.PROMETHEUS_RULE.api_version, kind=kinds.PROMETHEUS_RULE.kind,
                metadata={"name": NAME, "namespace": ns, "labels": labelled},
                spec={"groups": [{"name": NAME, "rules": alert_rules(ns)}]}, opts=in_namespace)
        self.register_outputs({"namespace": ns, "deployment": NAME if args.deployment is not None else None})
