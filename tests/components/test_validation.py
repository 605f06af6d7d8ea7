"""The validation job as the real program renders it under mocks: which objects, what the pods select, the
pinned image and cache volume (nothing fetched at validation time), the program shipped byte for byte, and
RBAC and admission policy that allow one thing. tests/e2e/test_validation_job.py applies the same objects
to a real API server."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_validate.utils import schema_contents

from components import validation
from preview.run import ProgramRun, run_program
from gpu_knowledge import labels
from fleetspec.load import spec_from_config
from tests.conftest import EXAMPLE_STACKS, aks_image_owned, change, edited, stack_config
from workload import result
from workload.validate import parse_config

KUBERNETES_VERSION = "1.33.0"
WITH_VALIDATION = ("canary", "eks-canary", "existing-canary")
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
KINDS = {
    "kubernetes:core/v1:Namespace": ("v1", "Namespace"),
    "kubernetes:core/v1:ServiceAccount": ("v1", "ServiceAccount"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy":
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding":
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    DAEMON_SET: ("apps/v1", "DaemonSet"),
    CONFIG_MAP: ("v1", "ConfigMap"),
}
VALIDATION_BLOCK = {"image": "vllm/vllm-openai:v0.10.2", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                    "modelPath": "/models/qwen", "cacheVolume": {"claimName": "validation-models"}}


def job(run: ProgramRun) -> list[Any]:
    """The custom resources whose parent is the ValidationJob component."""
    return [r for r in run.custom_resources if "gpu-driver-upgrade:validation:ValidationJob$" in r.urn]


def one(run: ProgramRun, type_token: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [r.inputs for r in job(run) if r.type == type_token and (name is None or r.name == name)]
    return found


def daemon_sets(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {r.name: r.inputs for r in job(run) if r.type == DAEMON_SET}


def manifest(resource: Any) -> dict[str, Any]:
    api_version, kind = KINDS[resource.type]
    return {"apiVersion": api_version, "kind": kind, **copy.deepcopy(resource.inputs)}


def with_validation(stack: str, **changes: Any) -> dict[str, str]:
    config = stack_config(stack)
    config["gpu-driver-upgrade:validation"] = json.dumps({**VALIDATION_BLOCK, **changes})
    return config


# ---------------------------------------------------------------- what is declared


@pytest.mark.parametrize("stack", [*EXAMPLE_STACKS, "prod-without-validation"])
def test_only_stacks_with_a_validation_block_declare_the_job(rendered: dict[str, ProgramRun], stack: str) -> None:
    if stack == "prod-without-validation":  # every example declares the job (the prod ones since issue 23)
        config = stack_config("prod")
        del config["gpu-driver-upgrade:validation"]
        run = run_program(config, "prod")
    else:
        run = rendered[stack]
    types = sorted(r.type for r in job(run))
    if stack != "prod-without-validation":
        extra = [DAEMON_SET] * (len(run.outputs["releasedPools"]) - 1)  # a DaemonSet per released pool
        assert types == sorted([*validation.RESOURCE_TYPES, *extra, CONFIG_MAP])
    else:
        assert types == []


@pytest.mark.parametrize("stack", WITH_VALIDATION)
def test_every_object_goes_through_the_stacks_own_provider(rendered: dict[str, ProgramRun], stack: str) -> None:
    run = rendered[stack]
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    for resource in job(run):
        assert resource.provider.startswith(provider.urn + "::"), (resource.type, resource.provider)


@pytest.mark.parametrize("stack", WITH_VALIDATION)
def test_objects_are_named_per_stage(rendered: dict[str, ProgramRun], stack: str) -> None:
    run = rendered[stack]
    assert one(run, "kubernetes:core/v1:Namespace")["metadata"]["name"] == "gpu-validation-canary"
    names = {r.inputs["metadata"]["name"] for r in job(run)
             if r.type.startswith(("kubernetes:rbac", "kubernetes:admissionregistration"))}
    assert names == {"gpu-driver-upgrade-validation-canary"}
    namespaced = [r.inputs["metadata"] for r in job(run) if r.type in
                  ("kubernetes:core/v1:ServiceAccount", CONFIG_MAP, DAEMON_SET)]
    assert {m["namespace"] for m in namespaced} == {"gpu-validation-canary"}


@pytest.mark.parametrize("stack", WITH_VALIDATION)
def test_objects_validate_against_kubernetes_openapi(rendered: dict[str, ProgramRun], stack: str) -> None:
    for resource in job(rendered[stack]):
        kubernetes_validate.validate(manifest(resource), KUBERNETES_VERSION, strict=True)


def test_the_openapi_check_would_catch_a_misspelt_field(rendered: dict[str, ProgramRun]) -> None:
    daemon_set = next(r for r in job(rendered["canary"]) if r.type == DAEMON_SET)
    broken = manifest(daemon_set)
    broken["spec"]["template"]["spec"]["tolerations"][0]["efect"] = "NoSchedule"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


# ---------------------------------------------------------------- the program shipped, and its configuration


def test_the_configmap_carries_the_program_as_the_tests_test_it(rendered: dict[str, ProgramRun]) -> None:
    data = one(rendered["existing-canary"], CONFIG_MAP, "gpu-validation-program")["data"]
    for name in result.PROGRAM_FILES:
        assert data[f"workload.{name}"] == (validation.WORKLOAD_DIR / name).read_text()
    assert set(data) == {*(f"workload.{n}" for n in result.PROGRAM_FILES), "pool-h100-canary.json",
                         "pool-l40s-canary.json"}  # one configuration per pool


def test_each_pools_configuration_is_one_the_program_accepts(rendered: dict[str, ProgramRun]) -> None:
    data = one(rendered["existing-canary"], CONFIG_MAP, "gpu-validation-program")["data"]
    config = parse_config(json.loads(data["pool-l40s-canary.json"]))
    assert (config.pool, config.target_driver, config.gpus_per_node) == ("l40s-canary", "580.173.02", 1)
    assert (config.stage, config.cluster, config.image) == ("canary", "lab-gpu-1", "vllm/vllm-openai:v0.10.2")
    assert config.min_tokens_per_second == 40 and config.prompt == "Count from one to ten."
    assert config.baseline is None and config.tolerance_tokens_per_second == pytest.approx(0.1)
    # The server is started on loopback from the cached weights' path, never from a hub id.
    assert config.server_command == ["vllm", "serve", "/models/Qwen2.5-0.5B-Instruct", "--served-model-name",
                                     "Qwen/Qwen2.5-0.5B-Instruct", "--host", "127.0.0.1", "--port", "8000"]
    assert config.server_url == "http://127.0.0.1:8000"


def test_baselines_and_tolerances_reach_their_pools_configuration() -> None:
    digest = "sha256:" + "c" * 64
    config = with_validation("existing-prod", baselines={
        "l40s-serving": {"timeToFirstTokenSeconds": 0.08, "tokensPerSecond": 150, "tokenDigest": digest}},
        tolerance={"tokensPerSecond": "5%", "timeToFirstToken": "25%"})
    data = one(run_program(config, "existing-prod"), CONFIG_MAP, "gpu-validation-program")["data"]
    parsed = parse_config(json.loads(data["pool-l40s-serving.json"]))
    assert parsed.baseline is not None
    assert (parsed.baseline.tokens_per_second, parsed.baseline.token_digest) == (150, digest)
    assert (parsed.tolerance_tokens_per_second, parsed.tolerance_time_to_first_token) == (0.05, 0.25)
    assert parsed.gpus_per_node == 4


# ---------------------------------------------------------------- the pods: image, GPUs, volumes, nothing fetched


def test_the_pod_runs_the_pinned_image_with_the_pools_gpus_and_the_cached_model(rendered: dict[str, ProgramRun]) -> None:
    run = rendered["existing-canary"]
    ds = daemon_sets(run)["gpu-validation-l40s-canary"]
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.10.2" and container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"][:3] == ["python3", "-m", "workload.validate"]
    assert container["resources"]["limits"] == {labels.GPU_RESOURCE: "1"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["model-cache"]["persistentVolumeClaim"] == {"claimName": "validation-models", "readOnly": True}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["model-cache"] == {"name": "model-cache", "mountPath": "/models", "readOnly": True}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert {k: env[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS")} == {
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    assert env["PYTHONPATH"] == validation.PROGRAM_DIR
    # The ConfigMap's program lands where PYTHONPATH looks, with this pool's configuration only.
    items = {i["key"]: i["path"] for i in volumes["program"]["configMap"]["items"]}
    assert items["workload.validate.py"] == "workload/validate.py"
    assert container["command"][4] == f"{validation.PROGRAM_DIR}/pools/pool-l40s-canary.json"
    assert items["pool-l40s-canary.json"] == "pools/pool-l40s-canary.json"
    assert pod["serviceAccountName"] == "gpu-validation" and pod["automountServiceAccountToken"] is True
    assert {"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert ds["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_the_pod_template_names_the_program_it_runs(rendered: dict[str, ProgramRun]) -> None:
    ds = daemon_sets(rendered["existing-canary"])["gpu-validation-l40s-canary"]
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    assert annotations[validation.ANNOTATION_PROGRAM] == result.program_digest(validation.program_files())
    assert annotations[labels.ANNOTATION_TARGET_DRIVER] == "580.173.02"
    files = validation.program_files()
    files["validate.py"] += b"\n"
    assert result.program_digest(files) != annotations[validation.ANNOTATION_PROGRAM]  # any change rolls the pods


def test_the_pod_meets_the_restricted_pod_security_level(rendered: dict[str, ProgramRun]) -> None:
    run = rendered["existing-canary"]
    namespace = one(run, "kubernetes:core/v1:Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = daemon_sets(run)["gpu-validation-l40s-canary"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True and pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any("hostPath" in v for v in pod["volumes"])


def test_a_host_path_cache_and_the_textfile_directory_mount_the_node(tmp_path: Any) -> None:
    config = with_validation("existing-canary", modelPath="/models/qwen",
                             cacheVolume={"hostPath": "/var/lib/models"}, textfileDirectory="/var/lib/node-exporter")
    run = run_program(config, "existing-canary")
    pod = daemon_sets(run)["gpu-validation-l40s-canary"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["model-cache"]["hostPath"] == {"path": "/var/lib/models", "type": "Directory"}
    assert volumes["textfile"]["hostPath"] == {"path": "/var/lib/node-exporter", "type": "Directory"}
    data = one(run, CONFIG_MAP, "gpu-validation-program")["data"]
    assert json.loads(data["pool-l40s-canary.json"])["textfileDirectory"] == "/textfile"
    # Host directories need the privileged level: the namespace says so rather than have its pods refused.
    namespace = one(run, "kubernetes:core/v1:Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


# ---------------------------------------------------------------- where the pods go


def _matches(term: dict[str, Any], node_labels: dict[str, str]) -> bool:
    """Kubernetes' nodeSelectorRequirement semantics for the operators the job uses."""
    for expression in term["matchExpressions"]:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        value = node_labels.get(key)
        ok = {"In": value in values, "NotIn": value not in values, "DoesNotExist": key not in node_labels,
              "Exists": key in node_labels}[operator]
        if not ok:
            return False
    return True


def selects(affinity: dict[str, Any], node_labels: dict[str, str]) -> bool:
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return any(_matches(term, node_labels) for term in terms)


UPGRADED = {"gpu.example.com/pool": "l40s-canary", labels.GFD_DRIVER_VERSION: "580.173.02",
            labels.UPGRADE_STATE: "upgrade-done"}


@pytest.mark.parametrize(("node", "chosen"), [
    (UPGRADED, True),
    ({**UPGRADED, labels.POOL: "l40s-canary"}, True),  # labelled by the stack: found by the project's label
    ({**UPGRADED, result.LABEL_VALIDATED_DRIVER: "570.195.03"}, True),  # validated on the last driver only
    ({**UPGRADED, result.LABEL_VALIDATED_DRIVER: "580.173.02"}, False),  # done: the pod leaves
    ({**UPGRADED, labels.GFD_DRIVER_VERSION: "570.195.03"}, False),  # not upgraded yet
    ({**UPGRADED, labels.UPGRADE_STATE: "validation-required"}, False),  # still in the operator's hands
    ({**UPGRADED, labels.UPGRADE_STATE: "upgrade-required"}, False),  # the next driver is on its way
    ({k: v for k, v in UPGRADED.items() if k != labels.UPGRADE_STATE}, False),
    ({**UPGRADED, "gpu.example.com/pool": "l40s-serving"}, False),  # another pool
    ({**UPGRADED, labels.POOL: "h100-serving"}, False),  # another stack's pool, whatever its selector says
])
def test_the_pods_go_only_to_upgraded_nodes_not_yet_validated(rendered: dict[str, ProgramRun], node: dict[str, str],
                                                              chosen: bool) -> None:
    pod = daemon_sets(rendered["existing-canary"])["gpu-validation-l40s-canary"]["spec"]["template"]["spec"]
    assert selects(pod["affinity"], node) is chosen


def test_aks_pools_are_found_by_project_or_agent_pool_label(rendered: dict[str, ProgramRun]) -> None:
    pod = daemon_sets(rendered["canary"])["gpu-validation-gpucanary"]["spec"]["template"]["spec"]
    node = {labels.GFD_DRIVER_VERSION: "580.173.02", labels.UPGRADE_STATE: "upgrade-done"}
    assert selects(pod["affinity"], {**node, labels.AKS_AGENT_POOL: "gpucanary"})
    assert selects(pod["affinity"], {**node, labels.POOL: "gpucanary"})
    assert not selects(pod["affinity"], {**node, labels.AKS_AGENT_POOL: "gpua100"})


def test_held_pools_get_no_validation(rendered: dict[str, ProgramRun]) -> None:
    run = run_program(with_validation("existing-prod"), "existing-prod")
    assert set(daemon_sets(run)) == {"gpu-validation-l40s-serving"}  # h100-serving is held on 570.195.03
    data = one(run, CONFIG_MAP, "gpu-validation-program")["data"]
    assert "pool-h100-serving.json" not in data
    released = change(with_validation("existing-prod"), "nodePools",
                      lambda pools: [p["rollout"].update(released=True) for p in pools])
    assert set(daemon_sets(run_program(released, "existing-prod"))) == {
        "gpu-validation-l40s-serving", "gpu-validation-h100-serving"}


def test_image_owned_pools_are_validated_on_their_newest_generations_driver() -> None:
    config = aks_image_owned()
    config["gpu-driver-upgrade:validation"] = json.dumps(VALIDATION_BLOCK)
    spec = spec_from_config(config)
    run = run_program(config, "prod")
    (name,) = daemon_sets(run)
    pod = daemon_sets(run)[name]["spec"]["template"]["spec"]
    keys = {e["key"] for t in pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert labels.UPGRADE_STATE not in keys  # no operator upgrade controller on image-owned nodes
    (pool,) = [p for p in spec.nodePools if spec.pool_target(p).moves]
    assert spec.pool_target(pool).driver == "580.173.02"  # generation 2's driver
    node = {labels.AKS_AGENT_POOL: "gpuh100g2", labels.GFD_DRIVER_VERSION: "580.173.02"}
    assert selects(pod["affinity"], node)
    assert not selects(pod["affinity"], {**node, labels.GFD_DRIVER_VERSION: "570.195.03",
                                         labels.AKS_AGENT_POOL: "gpuh100g1"})


def test_a_branch_target_selects_by_the_drivers_major_label() -> None:
    config = with_validation("existing-canary")
    config = change(config, "driver", lambda d: d.update(version="580", previousVersion="570"))
    config = change(config, "gpuOperator", lambda o: o.update(usePrecompiled=True))
    pod = daemon_sets(run_program(config, "existing-canary"))["gpu-validation-l40s-canary"]["spec"]["template"]["spec"]
    node = {**UPGRADED, labels.GFD_DRIVER_VERSION: "580.95.05", labels.GFD_DRIVER_VERSION_MAJOR: "580"}
    assert selects(pod["affinity"], node)
    assert not selects(pod["affinity"], {**node, labels.GFD_DRIVER_VERSION_MAJOR: "570"})


def test_without_the_operators_upgrade_controller_the_state_label_is_not_required() -> None:
    config = edited("existing-canary", "gpuOperator", lambda o: o["upgradePolicy"].update(autoUpgrade=False))
    pod = daemon_sets(run_program(config, "existing-canary"))["gpu-validation-l40s-canary"]["spec"]["template"]["spec"]
    assert selects(pod["affinity"], {k: v for k, v in UPGRADED.items() if k != labels.UPGRADE_STATE})


# ---------------------------------------------------------------- what the pods may do


def test_rbac_grants_patching_nodes_and_nothing_else(rendered: dict[str, ProgramRun]) -> None:
    run = rendered["existing-canary"]
    role = one(run, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    binding = one(run, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-validation",
                                    "namespace": "gpu-validation-canary"}]
    account = one(run, "kubernetes:core/v1:ServiceAccount")
    assert account["automountServiceAccountToken"] is False  # only the validation pods mount it


def test_the_admission_policy_is_bound_and_applies_to_the_jobs_identity_only(rendered: dict[str, ProgramRun]) -> None:
    run = rendered["existing-canary"]
    policy = one(run, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")["spec"]
    assert policy["failurePolicy"] == "Fail"
    assert policy["matchConditions"] == [{
        "name": "validation-job",
        "expression": "request.userInfo.username == 'system:serviceaccount:gpu-validation-canary:gpu-validation'"}]
    rules = policy["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": [""], "apiVersions": ["*"], "operations": ["UPDATE"],
                      "resources": ["nodes", "nodes/status"]}]
    binding = one(run, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")["spec"]
    assert binding == {"policyName": "gpu-driver-upgrade-validation-canary", "validationActions": ["Deny"]}
    expressions = " ".join(v["expression"] for v in policy["validations"])
    assert validation.NODE_NAME_CLAIM in expressions
    assert all(key in expressions for key in result.NODE_LABELS)


def test_the_admission_policy_allows_the_hold_of_a_failed_node_and_nothing_else_in_the_spec(
        rendered: dict[str, ProgramRun]) -> None:
    policy = one(rendered["existing-canary"],
                 "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")["spec"]
    by_message = {v["message"]: v["expression"] for v in policy["validations"]}
    spec_rule = next(e for m, e in by_message.items() if m.startswith("the validation job may not change a node's spec"))
    # A cordon, only with the hold record and a failed outcome, every other spec field as it was.
    assert "object.spec.unschedulable == true" in spec_rule
    assert f"'{result.HOLD_ANNOTATION}' in variables.newAnnotations" in spec_rule
    assert f"variables.newLabels['{result.LABEL_OUTCOME}'] == '{result.FAILED}'" in spec_rule
    assert all(f"object.spec.{name} == oldObject.spec.{name}" in spec_rule for name in validation.NODE_SPEC_FIELDS)
    hold_rule = next(e for m, e in by_message.items() if m.startswith("the validation job may record a hold"))
    assert f"'{result.HOLD_ANNOTATION}' in variables.oldAnnotations" in hold_rule  # never removed
    # tests/e2e/test_validation_job.py shows the real API server admitting the hold and refusing the rest.


@pytest.mark.parametrize("version", ["1.33.0", "1.36.0"])
def test_the_cordon_rule_names_every_other_field_of_a_node_spec(version: str) -> None:
    """A field Kubernetes adds to NodeSpec would escape the cordon rule: this fails until it is listed."""
    definitions = schema_contents(f"kubernetes-json-schema/v{version}-local/_definitions.json", version)
    fields = set(definitions["$defs"]["io.k8s.api.core.v1.NodeSpec"]["properties"])
    assert fields == {"unschedulable", *validation.NODE_SPEC_FIELDS}


def test_a_validation_pod_requests_the_gpus_the_spec_counts_for_it(rendered: dict[str, ProgramRun]) -> None:
    spec = spec_from_config(stack_config("existing-canary"))
    pods = daemon_sets(rendered["existing-canary"])
    for pool in spec.nodePools:
        (container,) = pods[validation.daemonset_name(pool)]["spec"]["template"]["spec"]["containers"]
        resources = container["resources"]
        assert resources["requests"][labels.GPU_RESOURCE] == str(spec.validation_gpus(pool)) == str(pool.gpusPerNode)
        assert resources["limits"][labels.GPU_RESOURCE] == str(spec.validation_gpus(pool))
        # An unrecorded result ends the container: its log's tail shows in the pod's status.
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_the_daemonsets_wait_for_the_policy_that_guards_their_writes(rendered: dict[str, ProgramRun]) -> None:
    run = rendered["existing-canary"]
    urns = {r.type: r.urn for r in job(run)}
    daemon_sets = [r for r in job(run) if r.type == DAEMON_SET]
    assert len(daemon_sets) == 2  # h100-canary and l40s-canary
    program = next(r.urn for r in job(run) if r.type == CONFIG_MAP)
    for daemon_set in daemon_sets:
        waits_for = set(daemon_set.dependencies)
        assert urns["kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"] in waits_for
        assert urns["kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"] in waits_for
        assert program in waits_for
