"""ValidationJob: the post-upgrade validation of every node of the stack's released pools, once per driver version.

One DaemonSet per released pool whose pods can only be placed on a node of that pool that
- runs the pool's target driver (GPU Feature Discovery's driver label),
- is done with its upgrade (the operator's ``nvidia.com/gpu-driver-upgrade-state=upgrade-done``, where the
  operator's upgrade controller owns the driver), and
- is not yet validated for that driver (``gpu-driver-upgrade.io/validated-driver`` absent or another one).

The pod runs the validation program (``workload/``, shipped in a ConfigMap rendered from its source) in the
pinned serving image, with the pool's GPUs and the model from a cache volume. When it has recorded the
result it labels its node validated for the driver, so the node stops matching and the DaemonSet controller
removes the pod: its GPUs go back to the model servers. Nothing waits in between holding a GPU.

A failed result holds its node: the same patch cordons it and records why (``workload.result.node_patch``);
only a person releases it (`gpu-rollout release-node`). A result that cannot be written is retried over a
bounded number of container starts and never validated again in the pod (``workload.validate``).

The pods' identity may patch nodes and nothing else (RBAC); a ValidatingAdmissionPolicy narrows that to
the node the pod is bound to (the service-account token's node claim), to the job's own labels, result
annotations and hold record, and in the node's spec to cordoning it, with a failed result and its hold
record, and nothing else. docs/validation.md explains the choice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options

from gpu_knowledge import kinds, labels
from engine_contracts import resource_facts as rf
from fleetspec.membership import pool_node_selectors
from fleetspec.model import DriverOwner, FleetSpec, NodePool, Validation, kubernetes_name
from gpu_knowledge.capacity import percent_of
from renderers.node_admission import node_patch_policy, unchanged_except
from workload import result

WORKLOAD_DIR = Path(result.__file__).resolve().parent
PROGRAM_DIR = "/opt/gpu-validation"  # the ConfigMap's files in the pod: workload/ and pools/
STATE_DIR = "/run/gpu-validation"  # an emptyDir: survives container restarts, so a node is never validated twice
SERVICE_ACCOUNT = "gpu-validation"
PROGRAM_CONFIG_MAP = "gpu-validation-program"
SERVER_PORT = 8000
LINGER_SECONDS = 300  # after recording, how long the program waits for the DaemonSet controller to remove its pod
POD_LABEL_POOL = f"{labels.DOMAIN}/validation-pool"
APP_LABELS = {"app.kubernetes.io/name": "gpu-validation", "app.kubernetes.io/part-of": "gpu-driver-upgrade"}
ANNOTATION_PROGRAM = f"{labels.DOMAIN}/validation-program"  # sha256 of the program's files
ANNOTATION_CONFIG = f"{labels.DOMAIN}/validation-config"  # sha256 of the pool's configuration
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"  # the node a pod-bound token's pod runs on
# Type tokens of what the job registers (no policy reads them; tests/engine_contracts/test_resource_facts.py lists them).
RESOURCE_TYPES = tuple(rf.kubernetes_type(kind) for kind in (
    kinds.NAMESPACE, kinds.SERVICE_ACCOUNT, kinds.CLUSTER_ROLE, kinds.CLUSTER_ROLE_BINDING,
    kinds.VALIDATING_ADMISSION_POLICY, kinds.VALIDATING_ADMISSION_POLICY_BINDING, kinds.DAEMON_SET,
))
# The serving process reads weights only from the pod's filesystem: no hub, no telemetry.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


# ---------------------------------------------------------------- names


def namespace_name(spec: FleetSpec) -> str:
    """One namespace per stage, so the canary and prod stacks on one cluster never own the same object."""
    return f"gpu-validation-{spec.stage.value}"


def cluster_scoped_name(spec: FleetSpec) -> str:
    return f"gpu-driver-upgrade-validation-{spec.stage.value}"


def daemonset_name(pool: NodePool) -> str:
    return f"gpu-validation-{kubernetes_name(pool.name)}"


def service_account_user(spec: FleetSpec) -> str:
    return f"system:serviceaccount:{namespace_name(spec)}:{SERVICE_ACCOUNT}"


def config_key(pool: NodePool) -> str:
    return f"pool-{kubernetes_name(pool.name)}.json"


def program_key(file: str) -> str:
    return f"workload.{file}"


# ---------------------------------------------------------------- what is validated, on which driver


def validated_pools(spec: FleetSpec) -> list[tuple[NodePool, str]]:
    """The pools that move (a held one does not), each with the driver its nodes run once upgraded."""
    targets = [(pool, spec.pool_target(pool)) for pool in spec.nodePools]
    return [(pool, target.driver) for pool, target in targets if target.moves]


def _fraction(percent: str) -> float:
    value = percent_of(percent)
    assert value is not None  # the spec only lets percentages through
    return value / 100


def server_command(validation: Validation) -> list[str]:
    return ["vllm", "serve", validation.modelPath, "--served-model-name", validation.model,
            "--host", "127.0.0.1", "--port", str(SERVER_PORT), *validation.serverArgs]


def program_config(spec: FleetSpec, pool: NodePool, target: str) -> dict[str, Any]:
    """The pool's configuration as the program reads it (workload.validate.parse_config)."""
    validation = spec.validation
    assert validation is not None
    baseline = validation.baselines.get(pool.name)
    return {
        "apiVersion": result.CONFIG_API_VERSION,
        "stage": spec.stage.value,
        "cluster": spec.cluster.name,
        "pool": pool.name,
        "targetDriver": target,
        "gpusPerNode": pool.gpusPerNode,
        "image": validation.image,
        "model": validation.model,
        "modelPath": validation.modelPath,
        "prompt": validation.prompt,
        "maxTokens": validation.maxTokens,
        "requests": validation.requests,
        "minTokensPerSecond": validation.minTokensPerSecond,
        "baseline": None if baseline is None else {
            "timeToFirstTokenSeconds": baseline.timeToFirstTokenSeconds,
            "tokensPerSecond": baseline.tokensPerSecond,
            "tokenDigest": baseline.tokenDigest,
            "recordedOn": baseline.recordedOn,
        },
        "tolerance": {"timeToFirstToken": _fraction(validation.tolerance.timeToFirstToken),
                      "tokensPerSecond": _fraction(validation.tolerance.tokensPerSecond)},
        "server": {"command": server_command(validation), "url": f"http://127.0.0.1:{SERVER_PORT}",
                   "startupTimeoutSeconds": validation.startupTimeoutSeconds, "requestTimeoutSeconds": 300},
        "textfileDirectory": "/textfile" if validation.textfileDirectory else None,
    }


def program_files() -> dict[str, bytes]:
    """The program as the tests test it: the workload package's files, byte for byte."""
    return {name: (WORKLOAD_DIR / name).read_bytes() for name in result.PROGRAM_FILES}


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_text(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=1, sort_keys=True) + "\n"


def program_config_map_data(spec: FleetSpec) -> dict[str, str]:
    data = {program_key(name): body.decode() for name, body in program_files().items()}
    for pool, target in validated_pools(spec):
        data[config_key(pool)] = config_text(program_config(spec, pool, target))
    return data


# ---------------------------------------------------------------- where the pods may go


def node_affinity(spec: FleetSpec, pool: NodePool, target: str) -> dict[str, Any]:
    """Required node affinity: a node of the pool, on the target driver, upgrade done, not validated for it.

    One term per way the pool's nodes are found (fleetspec.membership: the project's pool label, else the cloud's
    pool label or the declared nodeSelector, the latter only on nodes no stack has labelled yet).
    """
    driver_label = labels.GFD_DRIVER_VERSION if "." in target else labels.GFD_DRIVER_VERSION_MAJOR
    common = [{"key": driver_label, "operator": "In", "values": [target]}]
    if spec.driver.owner == DriverOwner.OPERATOR and spec.upgrade_policy(pool).autoUpgrade:
        # The upgrade controller's last state: uncordoned, driver pod in sync, operator validator passed.
        common.append({"key": labels.UPGRADE_STATE, "operator": "In", "values": [labels.UPGRADE_DONE]})
    common.append({"key": result.LABEL_VALIDATED_DRIVER, "operator": "NotIn", "values": [target]})
    terms = []
    for selector in pool_node_selectors(spec, pool):
        expressions = [{"key": key, "operator": "In", "values": [value]} for key, value in sorted(selector.items())]
        if labels.POOL not in selector:
            expressions.insert(0, {"key": labels.POOL, "operator": "DoesNotExist"})
        terms.append({"matchExpressions": [*expressions, *common]})
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def uses_host_paths(validation: Validation) -> bool:
    return bool(validation.textfileDirectory) or (
        validation.cacheVolume is not None and validation.cacheVolume.hostPath is not None)


def namespace_labels(spec: FleetSpec) -> dict[str, str]:
    validation = spec.validation
    assert validation is not None
    # Pod Security: restricted, unless a host directory is mounted (which only the privileged level allows).
    level = "privileged" if uses_host_paths(validation) else "restricted"
    return {**APP_LABELS, "pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level}


def daemonset_body(spec: FleetSpec, pool: NodePool, target: str) -> dict[str, Any]:
    """metadata and spec of a pool's DaemonSet."""
    validation = spec.validation
    assert validation is not None
    selector = {**APP_LABELS, POD_LABEL_POOL: kubernetes_name(pool.name)}
    files = program_files()
    mounts = [
        {"name": "program", "mountPath": PROGRAM_DIR, "readOnly": True},
        {"name": "state", "mountPath": STATE_DIR},
        {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - an emptyDir of the pod's own
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "program", "configMap": {
            "name": PROGRAM_CONFIG_MAP, "defaultMode": 0o444,
            "items": [*({"key": program_key(name), "path": f"workload/{name}"} for name in result.PROGRAM_FILES),
                      {"key": config_key(pool), "path": f"pools/{config_key(pool)}"}]}},
        {"name": "state", "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "20Gi"}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
    ]
    cache = validation.cacheVolume
    if cache is not None:
        mounts.append({"name": "model-cache", "mountPath": cache.mountPath, "readOnly": True})
        source = ({"persistentVolumeClaim": {"claimName": cache.claimName, "readOnly": True}} if cache.claimName
                  else {"hostPath": {"path": cache.hostPath, "type": "Directory"}})
        volumes.append({"name": "model-cache", **source})
    if validation.textfileDirectory:
        mounts.append({"name": "textfile", "mountPath": "/textfile"})
        volumes.append({"name": "textfile", "hostPath": {"path": validation.textfileDirectory, "type": "Directory"}})
    env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "PYTHONPATH", "value": PROGRAM_DIR},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "HOME", "value": "/tmp/home"},
        {"name": "XDG_CACHE_HOME", "value": "/tmp/cache"},
        {"name": "HF_HOME", "value": "/tmp/hf"},
        *({"name": key, "value": value} for key, value in sorted(OFFLINE_ENV.items())),
    ]
    config_path = f"{PROGRAM_DIR}/pools/{config_key(pool)}"
    gpus = spec.validation_gpus(pool)  # the capacity policy, preflight and the simulator count the same number
    container = {
        "name": "validate",
        "image": validation.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-m", result.ENTRY_MODULE, "--config", config_path, "--state-dir", STATE_DIR,
                    "--linger", str(LINGER_SECONDS)],
        "workingDir": PROGRAM_DIR,
        "env": env,
        "resources": {"requests": {"cpu": "2", "memory": "8Gi", labels.GPU_RESOURCE: str(gpus)},
                      "limits": {labels.GPU_RESOURCE: str(gpus)}},
        # An unrecorded result ends the container with the reason in its log: show its tail in the pod's status.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": mounts,
    }
    config = program_config(spec, pool, target)
    return {
        "metadata": {
            "name": daemonset_name(pool),
            "namespace": namespace_name(spec),
            # The pool it validates, for the capacity rules that count what its pods request.
            "labels": {**selector, **rf.validation_daemonset_labels(pool.name)},
            # Validation pods come and go (and may wait for GPUs): `pulumi up` must not wait for them.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {
                    "labels": selector,
                    "annotations": {ANNOTATION_PROGRAM: result.program_digest(files),
                                    ANNOTATION_CONFIG: _sha256(config_text(config).encode()),
                                    labels.ANNOTATION_TARGET_DRIVER: target},
                },
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "automountServiceAccountToken": True,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 60,
                    "affinity": {"nodeAffinity": node_affinity(spec, pool, target)},
                    "tolerations": [{"key": labels.GPU_TAINT_KEY, "operator": "Exists",
                                     "effect": labels.GPU_TAINT_EFFECT}],
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


# ---------------------------------------------------------------- what the pods may do


def cluster_role_rules() -> list[dict[str, Any]]:
    """Patch nodes, and nothing else: the program's one API call (workload/kube.py)."""
    return [{"apiGroups": [kinds.NODE.group], "resources": [kinds.NODE.plural], "verbs": ["patch"]}]


# Every field of a NodeSpec (core/v1): a cordon may set ``unschedulable`` and must leave each other one as it was.
NODE_SPEC_FIELDS = ("podCIDR", "podCIDRs", "providerID", "taints", "configSource", "externalID")


def admission_policy_spec(spec: FleetSpec) -> dict[str, Any]:
    """What RBAC cannot say: only the node the pod is bound to; only the job's labels, result annotations and hold
    record; in the spec only a cordon, and only together with a failed result and its hold record."""
    allowed = "[" + ", ".join(f"'{key}'" for key in result.NODE_LABELS) + "]"
    prefix = f"{result.RESULT_ANNOTATION_PREFIX}/"
    hold = result.HOLD_ANNOTATION
    failed = (f"('{result.LABEL_OUTCOME}' in variables.newLabels && "
              f"variables.newLabels['{result.LABEL_OUTCOME}'] == '{result.FAILED}')")

    def same_field(name: str) -> str:
        new, old = f"object.spec.{name}", f"oldObject.spec.{name}"
        return (f"(has({new}) ? (has(oldObject.spec) && has({old}) && {new} == {old}) "
                f": !(has(oldObject.spec) && has({old})))")

    cordon = " && ".join([
        "has(object.spec.unschedulable) && object.spec.unschedulable == true",
        *(same_field(name) for name in NODE_SPEC_FIELDS),
        f"'{hold}' in variables.newAnnotations", failed,
    ])
    return node_patch_policy("validation-job", service_account_user(spec), [
        {
            # An absent subresource is no key at all in CEL (the real API server says "no such key").
            "expression": (f"(!has(request.subResource) || request.subResource == '') && "
                           f"has(request.userInfo.extra) && "
                           f"'{NODE_NAME_CLAIM}' in request.userInfo.extra && "
                           f"request.userInfo.extra['{NODE_NAME_CLAIM}'].exists(n, n == object.metadata.name)"),
            "message": "the validation job may change only the node its pod runs on",
            "reason": "Forbidden",
        },
        {
            "expression": unchanged_except("variables.newLabels", "variables.oldLabels", f"k in {allowed}"),
            "message": f"the validation job may change only its own node labels ({', '.join(result.NODE_LABELS)})",
            "reason": "Forbidden",
        },
        {
            "expression": unchanged_except("variables.newAnnotations", "variables.oldAnnotations",
                                           f"k.startsWith('{prefix}') || k == '{hold}'"),
            "message": f"the validation job may change only its result annotations ({prefix}<driver>) and "
                       f"its hold record ({hold})",
            "reason": "Forbidden",
        },
        {
            # A person releases a held node (gpu-rollout release-node); the job only ever adds a hold.
            "expression": (f"(!('{hold}' in variables.oldAnnotations) || '{hold}' in variables.newAnnotations) "
                           f"&& (!('{hold}' in variables.newAnnotations) || "
                           f"('{hold}' in variables.oldAnnotations && "
                           f"variables.oldAnnotations['{hold}'] == variables.newAnnotations['{hold}']) || {failed})"),
            "message": f"the validation job may record a hold ({hold}) only with a failed result, and never "
                       "remove one",
            "reason": "Forbidden",
        },
        {
            "expression": ("(has(object.spec) == has(oldObject.spec) && "
                           f"(!has(object.spec) || object.spec == oldObject.spec)) || (has(object.spec) && {cordon})"),
            "message": ("the validation job may not change a node's spec (taints, unschedulable, ...) except to "
                        "cordon its own node, with a failed result and its hold record"),
            "reason": "Forbidden",
        },
        {
            "expression": ("has(object.metadata.ownerReferences) == has(oldObject.metadata.ownerReferences) && "
                           "(!has(object.metadata.ownerReferences) || "
                           "object.metadata.ownerReferences == oldObject.metadata.ownerReferences) && "
                           "has(object.metadata.finalizers) == has(oldObject.metadata.finalizers) && "
                           "(!has(object.metadata.finalizers) || "
                           "object.metadata.finalizers == oldObject.metadata.finalizers)"),
            "message": "the validation job may not change a node's owners or finalizers",
            "reason": "Forbidden",
        },
    ])


# ---------------------------------------------------------------- the component


class ValidationJobArgs(ComponentArgs):
    namespace: str = Field(description="The job's namespace, one per stage (namespace_name).")
    cluster_scoped_name: str = Field(
        description="The name of its ClusterRole, binding and admission policy, one per stage (cluster_scoped_name).")
    namespace_labels: dict[str, str] = Field(description="The namespace's labels, Pod Security (namespace_labels).")
    admission_policy: dict[str, Any] = Field(
        description="The ValidatingAdmissionPolicy's spec: what the pods may change on their node "
        "(admission_policy_spec).")
    program_data: dict[str, str] = Field(
        description="The program's ConfigMap: the workload's files and each pool's configuration "
        "(program_config_map_data).")
    daemon_sets: dict[str, dict[str, Any]] = Field(
        description="Per released pool, its DaemonSet's metadata and spec (daemonset_body of validated_pools).")


class ValidationJob(pulumi.ComponentResource):
    """Namespace, identity, RBAC, admission policy, the program's ConfigMap and one DaemonSet per released pool."""

    namespace: str
    daemon_sets: dict[str, str]  # pool -> DaemonSet name

    def __init__(self, name: str, args: ValidationJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:validation:ValidationJob", name, None, opts)
        child = child_options(self, opts)
        self.namespace = args.namespace
        cluster_name = args.cluster_scoped_name

        namespace = k8s.core.v1.Namespace(
            self.namespace, metadata={"name": self.namespace, "labels": args.namespace_labels}, opts=child)
        in_namespace = child_options(self, opts, depends_on=[namespace])
        account = k8s.core.v1.ServiceAccount(
            SERVICE_ACCOUNT,
            metadata={"name": SERVICE_ACCOUNT, "namespace": self.namespace, "labels": APP_LABELS},
            automount_service_account_token=False,  # only the validation pods mount its token
            opts=in_namespace,
        )
        role = k8s.rbac.v1.ClusterRole(
            cluster_name, metadata={"name": cluster_name, "labels": APP_LABELS}, rules=cluster_role_rules(),
            opts=child)
        binding = k8s.rbac.v1.ClusterRoleBinding(
            cluster_name,
            metadata={"name": cluster_name, "labels": APP_LABELS},
            role_ref={"apiGroup": kinds.CLUSTER_ROLE.group, "kind": kinds.CLUSTER_ROLE.kind, "name": cluster_name},
            subjects=[{"kind": kinds.SERVICE_ACCOUNT.kind, "name": SERVICE_ACCOUNT, "namespace": self.namespace}],
            opts=child_options(self, opts, depends_on=[role, account]),
        )
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            cluster_name, metadata={"name": cluster_name, "labels": APP_LABELS}, spec=args.admission_policy,
            opts=child)
        policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            cluster_name,
            metadata={"name": cluster_name, "labels": APP_LABELS},
            spec={"policyName": cluster_name, "validationActions": ["Deny"]},
            opts=child_options(self, opts, depends_on=[policy]),
        )
        program = k8s.core.v1.ConfigMap(
            PROGRAM_CONFIG_MAP,
            metadata={"name": PROGRAM_CONFIG_MAP, "namespace": self.namespace, "labels": APP_LABELS},
            data=args.program_data,
            opts=in_namespace,
        )
        # A pod may write to its node only once the admission policy guards that write.
        ready = [program, account, binding, policy_binding]
        self.daemon_sets = {}
        for pool_name, body in args.daemon_sets.items():
            k8s.apps.v1.DaemonSet(
                body["metadata"]["name"], metadata=body["metadata"], spec=body["spec"],
                opts=child_options(self, opts, depends_on=ready),
            )
            self.daemon_sets[pool_name] = body["metadata"]["name"]
        self.register_outputs({"namespace": self.namespace, "daemonSets": self.daemon_sets})
