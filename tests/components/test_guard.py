"""The in-cluster guard as the real program renders it under mocks (components/guard.py): declared in prod by
default and nowhere else unless asked; the contract's command line, environment, probes and placement; RBAC that
grants exactly what the guard's process needs; the admission policy's narrowing; the stack file as deployed;
monitoring objects that validate against the Prometheus Operator's CRDs. tests/e2e/test_guard_rbac.py applies
the same objects to a real API server."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from components import guard
from engine_contracts import resource_facts as rf
from fleetspec.load import config_strings, load_stack_file, spec_from_config
from fleetspec.observability import PrometheusService, prometheus_access
from gpu_knowledge import labels
from preview.run import ProgramRun, run_program
from renderers.ownership import shared_objects
from tests.prometheus.server import MISSING, binary
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR, change, stack_config

KUBERNETES_VERSION = "1.33.0"
MONITORING_CRDS = PROJECT_DIR / "tests" / "data" / "monitoring-crds"
IMAGE = "ghcr.io/example-org/gpu-driver-upgrade@sha256:" + "ab" * 32
KINDS = {
    "kubernetes:core/v1:Namespace": ("v1", "Namespace"),
    "kubernetes:core/v1:ServiceAccount": ("v1", "ServiceAccount"),
    "kubernetes:core/v1:ConfigMap": ("v1", "ConfigMap"),
    "kubernetes:core/v1:Service": ("v1", "Service"),
    "kubernetes:apps/v1:Deployment": ("apps/v1", "Deployment"),
    "kubernetes:policy/v1:PodDisruptionBudget": ("policy/v1", "PodDisruptionBudget"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": ("rbac.authorization.k8s.io/v1", "Role"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy":
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding":
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
}
SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"

# What the guard's process needs (the contract between the two halves of issue 35), written out here, not read
# from the module under test: (apiGroup, resource) -> verbs, and the names a rule is narrowed to.
CLUSTER_WIDE = {
    ("", "nodes", None): {"get", "list", "watch", "patch"},
    ("", "pods", None): {"get", "list", "watch"},
    ("", "pods/eviction", None): {"create"},
    ("apps", "deployments", None): {"get", "list", "watch"},  # `watch`'s model rows
    ("policy", "poddisruptionbudgets", None): {"get", "list", "watch"},
    ("nvidia.com", "clusterpolicies", None): {"get", "list", "watch"},
    ("nvidia.com", "nvidiadrivers", None): {"get", "list", "watch"},
    ("", "events", None): {"get", "list", "watch", "create"},  # `watch` reads the operator's node Events
    ("events.k8s.io", "events", None): {"create"},
    ("", "namespaces", ("kube-system",)): {"get"},  # the cluster's identity: kube-system's UID
}


def guard_objects(run: ProgramRun) -> list[Any]:
    return [r for r in run.custom_resources if "gpu-driver-upgrade:guard:Guard$" in r.urn]


def of(run: ProgramRun, type_token: str) -> list[dict[str, Any]]:
    return [r.inputs for r in guard_objects(run) if r.type == type_token]


def one(run: ProgramRun, type_token: str) -> dict[str, Any]:
    (found,) = of(run, type_token)
    return found


def flat(rules: list[dict[str, Any]]) -> dict[tuple[str, str, tuple[str, ...] | None], set[str]]:
    """(apiGroup, resource, resourceNames or None) -> verbs."""
    out: dict[tuple[str, str, tuple[str, ...] | None], set[str]] = {}
    for rule in rules:
        names = tuple(rule["resourceNames"]) if "resourceNames" in rule else None
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource, names), set()).update(rule["verbs"])
    return out


@pytest.fixture(scope="module")
def prometheus_prod() -> ProgramRun:
    """The prod example with the Prometheus Operator declared and Prometheus read through its Service."""
    config = change(stack_config("prod"), "guard", lambda g: g.update(
        prometheusOperator=True, monitoringLabels={"release": "kube-prometheus-stack"}))
    config = change(config, "validation", lambda v: v.update(prometheus="monitoring/prometheus-k8s:web"))
    return run_program(config, "prod")


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_declared_in_prod_by_default_and_nowhere_else(rendered: dict[str, ProgramRun], stack: str) -> None:
    run = rendered[stack]
    components = [r for r in run.resources if r.type == "gpu-driver-upgrade:guard:Guard"]
    if "prod" not in stack:
        assert components == [] and guard_objects(run) == []
        return
    assert len(components) == 1
    deployment = one(run, "kubernetes:apps/v1:Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith("@sha256:" + "0" * 64)
    # Every object of the guard is a child of the component, in its namespace where it is namespaced (or, for
    # the Role that lets it reach Prometheus through the API server, in the Prometheus Service's namespace).
    validation = load_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml").validation
    access = prometheus_access(validation.prometheus) if validation and validation.prometheus else None
    allowed = {None, "gpu-rollout-guard", "kube-system"}
    if isinstance(access, PrometheusService):
        allowed.add(access.namespace)
    for obj in guard_objects(run):
        namespace = obj.inputs["metadata"].get("namespace")
        assert namespace in allowed, obj.name
    for resource in guard_objects(run):
        api_version, kind = KINDS[resource.type]
        kubernetes_validate.validate({"apiVersion": api_version, "kind": kind, **copy.deepcopy(resource.inputs)},
                                     KUBERNETES_VERSION, strict=True)


def test_a_canary_may_ask_for_it_in_a_namespace_of_its_own() -> None:
    config = stack_config("canary")
    config["gpu-driver-upgrade:guard"] = json.dumps(
        {"enabled": True, "namespace": "gpu-rollout-guard-canary", "replicas": 3, "image": IMAGE})
    run = run_program(config, "canary")
    deployment = one(run, "kubernetes:apps/v1:Deployment")
    assert deployment["metadata"]["namespace"] == "gpu-rollout-guard-canary" and deployment["spec"]["replicas"] == 3
    role = one(run, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert role["metadata"]["name"] == "gpu-driver-upgrade-guard-canary"  # beside prod's on a shared cluster


def test_the_container_runs_the_contracts_command_line(rendered: dict[str, ProgramRun]) -> None:
    pod = one(rendered["existing-prod"], "kubernetes:apps/v1:Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == [
        "gpu-rollout", "guard", "--stack", "existing-prod", "--project-dir", "/etc/gpu-rollout/project",
        "--in-cluster", "--listen", "0.0.0.0:9400", "--lease-namespace", "gpu-rollout-guard",
        "--lease-name", "gpu-rollout-guard"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert container["ports"] == [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    security = container["securityContext"]
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["runAsUser"] != 0
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert {"name": "project", "mountPath": "/etc/gpu-rollout/project", "readOnly": True} in container["volumeMounts"]
    assert {"name": "project", "configMap": {"name": "gpu-rollout-guard-project", "defaultMode": 0o444}} in pod["volumes"]
    assert pod["serviceAccountName"] == "gpu-rollout-guard" and pod["automountServiceAccountToken"] is True


def test_it_never_lands_on_a_gpu_node_it_might_pause(rendered: dict[str, ProgramRun]) -> None:
    for stack, pool_label in (("existing-prod", "gpu.example.com/pool"), ("prod", labels.AKS_AGENT_POOL),
                              ("eks-prod", labels.EKS_NODE_GROUP)):
        pod = one(rendered[stack], "kubernetes:apps/v1:Deployment")["spec"]["template"]["spec"]
        assert "tolerations" not in pod  # the GPU taint keeps it off GPU nodes
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        expressions = {e["key"]: e for e in term["matchExpressions"]}
        assert expressions[labels.GPU_PRESENT]["operator"] == "DoesNotExist"
        assert expressions[labels.POOL]["operator"] == "NotIn"
        assert expressions[pool_label]["operator"] == "NotIn" and expressions[pool_label]["values"], stack
        spread = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_a_budget_keeps_one_replica_through_a_drain_and_a_service_serves_metrics(
        rendered: dict[str, ProgramRun]) -> None:
    run = rendered["prod"]
    pod_labels = one(run, "kubernetes:apps/v1:Deployment")["spec"]["template"]["metadata"]["labels"]
    budget = one(run, "kubernetes:policy/v1:PodDisruptionBudget")
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": pod_labels}}
    service = one(run, "kubernetes:core/v1:Service")
    assert service["metadata"]["name"] == "gpu-rollout-guard" and service["spec"]["selector"] == pod_labels
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9400, "targetPort": "metrics"}]


def test_the_cluster_role_grants_exactly_what_the_process_needs(rendered: dict[str, ProgramRun]) -> None:
    role = one(rendered["prod"], "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert flat(role["rules"]) == CLUSTER_WIDE
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in role["rules"])
    binding = one(rendered["prod"], "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-rollout-guard",
                                    "namespace": "gpu-rollout-guard"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "gpu-driver-upgrade-guard-prod"


def test_the_roles_grant_its_lease_the_halt_record_and_the_prometheus_proxy(prometheus_prod: ProgramRun) -> None:
    roles = {r["metadata"]["namespace"]: flat(r["rules"])
             for r in of(prometheus_prod, "kubernetes:rbac.authorization.k8s.io/v1:Role")}
    assert roles == {
        "gpu-rollout-guard": {("coordination.k8s.io", "leases", ("gpu-rollout-guard",)): {"get", "update"},
                              ("coordination.k8s.io", "leases", None): {"create"}},  # create takes no name
        "kube-system": {("coordination.k8s.io", "leases", ("gpu-driver-upgrade-fleet",)): {"get", "update", "patch"},
                        ("coordination.k8s.io", "leases", None): {"create"},
                        ("", "configmaps", None): {"get", "list"}},  # the identity records, read by label
        # Prometheus through the API server's service proxy, as `watch` reads it: POSTs to that one port.
        "monitoring": {("", "services/proxy", ("prometheus-k8s:web",)): {"create"}},
    }
    bindings = of(prometheus_prod, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == set(roles)
    assert all(b["roleRef"]["kind"] == "Role" and b["subjects"][0]["name"] == "gpu-rollout-guard" for b in bindings)


def test_the_admission_policy_binds_only_the_guards_identity(rendered: dict[str, ProgramRun]) -> None:
    policy = one(rendered["prod"], "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == \
        "request.userInfo.username == 'system:serviceaccount:gpu-rollout-guard:gpu-rollout-guard'"
    assert policy["spec"]["failurePolicy"] == "Fail"
    text = " ".join(v["expression"] for v in policy["spec"]["validations"])
    for key in (labels.SKIP_UPGRADE, labels.ANNOTATION_PAUSED_BY, labels.ANNOTATION_PAUSED_REASON,
                "gpu-driver-upgrade.io/guard-"):
        assert key in text
    binding = one(rendered["prod"], "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


@pytest.mark.parametrize("stack", [s for s in EXAMPLE_STACKS if "prod" in s])
def test_the_project_files_load_back_to_the_stack_as_deployed(rendered: dict[str, ProgramRun], stack: str) -> None:
    data = one(rendered[stack], "kubernetes:core/v1:ConfigMap")["data"]
    assert set(data) == {"Pulumi.yaml", f"Pulumi.{stack}.yaml"}
    assert yaml.safe_load(data["Pulumi.yaml"])["name"] == "gpu-driver-upgrade"
    config = config_strings(yaml.safe_load(data[f"Pulumi.{stack}.yaml"]))
    assert all(key.startswith("gpu-driver-upgrade:") for key in config)  # no other namespace's (secret) keys
    assert spec_from_config(config) == spec_from_config(stack_config(stack))


def test_a_prod_stack_without_an_image_declares_no_deployment() -> None:
    config = {k: v for k, v in stack_config("prod").items() if k != "gpu-driver-upgrade:guard"}
    run = run_program(config, "prod")
    assert of(run, "kubernetes:apps/v1:Deployment") == []
    assert one(run, "kubernetes:core/v1:Namespace")["metadata"]["name"] == "gpu-rollout-guard"


def _crd_schema(plural: str) -> dict[str, Any]:
    document = yaml.safe_load((MONITORING_CRDS / f"monitoring.coreos.com_{plural}.yaml").read_text())
    (version,) = [v for v in document["spec"]["versions"] if v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def test_monitoring_only_where_the_operator_is_declared(rendered: dict[str, ProgramRun],
                                                       prometheus_prod: ProgramRun) -> None:
    assert of(rendered["prod"], SERVICE_MONITOR) == [] and of(rendered["prod"], PROMETHEUS_RULE) == []
    monitor, rule = one(prometheus_prod, SERVICE_MONITOR), one(prometheus_prod, PROMETHEUS_RULE)
    for body, plural in ((monitor, "servicemonitors"), (rule, "prometheusrules")):
        assert body["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        schema = _crd_schema(plural)
        jsonschema.Draft7Validator(schema).validate({"apiVersion": body["apiVersion"], "kind": body["kind"],
                                                     "metadata": body["metadata"], "spec": body["spec"]})
        known = schema["properties"]["spec"]["properties"]
        assert set(body["spec"]) <= set(known)  # the API server would prune an unknown field silently
    service = one(prometheus_prod, "kubernetes:core/v1:Service")
    assert monitor["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"]
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    alerts = {r["alert"]: r["expr"] for r in rule["spec"]["groups"][0]["rules"]}
    assert set(alerts) == {"GpuRolloutPausedByGuard", "GpuFleetDrift", "GpuRolloutGuardDown"}
    assert "gpu_rollout_guard_paused" in alerts["GpuRolloutPausedByGuard"]
    assert "gpu_rollout_guard_drift" in alerts["GpuFleetDrift"] and "by (kind)" in alerts["GpuFleetDrift"]
    assert alerts["GpuRolloutGuardDown"] == 'absent(gpu_rollout_guard_up{namespace="gpu-rollout-guard"} == 1)'


def test_a_changed_stack_file_restarts_the_guard() -> None:
    spec = spec_from_config(stack_config("prod"))
    changed = spec_from_config(change(stack_config("prod"), "rollout", lambda r: r.update(waveDwellHours=48)))
    digest = guard.ANNOTATION_PROJECT

    def annotation(s: Any) -> str:
        return str(guard.deployment_body(s, "prod", guard.project_files(s, "prod"))["spec"]["template"]["metadata"]["annotations"][digest])

    assert annotation(spec) == annotation(spec_from_config(stack_config("prod")))
    assert annotation(spec) != annotation(changed)


def test_the_guard_s_budget_is_no_model_s(rendered: dict[str, ProgramRun]) -> None:
    budgets = [r for r in rendered["prod"].custom_resources if r.type == rf.PDB]
    models = [r for r in budgets if rf.is_model_budget(r.type, r.inputs)]
    assert len(budgets) == len(models) + 1 and all(r.name != "gpu-rollout-guard" for r in models)


def test_two_guards_on_one_cluster_need_two_namespaces() -> None:
    prod = spec_from_config(stack_config("prod"))
    canary = stack_config("canary")
    canary["gpu-driver-upgrade:guard"] = json.dumps({"enabled": True, "image": IMAGE})
    assert prod.cluster.name == spec_from_config(canary).cluster.name
    assert shared_objects(prod, spec_from_config(canary)) == ["Namespace gpu-rollout-guard"]
    canary["gpu-driver-upgrade:guard"] = json.dumps({"enabled": True, "image": IMAGE, "namespace": "guard-canary"})
    assert shared_objects(prod, spec_from_config(canary)) == []


def test_promtool_accepts_the_alert_rules(prometheus_prod: ProgramRun, tmp_path: Path) -> None:
    """The rules as Prometheus itself reads them (promtool, from Debian's prometheus package: make prometheus)."""
    promtool = binary("promtool")
    if promtool is None:
        pytest.fail(MISSING)
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(one(prometheus_prod, PROMETHEUS_RULE)["spec"]))
    done = subprocess.run([str(promtool), "check", "rules", str(rules)], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0 and "SUCCESS: 3 rules found" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_project_files_are_the_text_pyyaml_s_own_emitter_writes(stack: str) -> None:
    # libyaml's emitter writes them (speed); the digest that restarts the guard must not depend on which one ran.
    for name, text in guard.project_files(spec_from_config(stack_config(stack)), stack).items():
        width = 120 if name != "Pulumi.yaml" else None
        assert yaml.dump(yaml.safe_load(text), Dumper=yaml.SafeDumper, sort_keys=False, width=width) == text, name
