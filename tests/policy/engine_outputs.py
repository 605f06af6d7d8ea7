"""What the Pulumi engine hands a stack policy: each resource's *outputs*, not the inputs the program sent.

The engine calls resource validation with a resource's inputs, but stack validation (AnalyzeStack) with
the outputs its provider returned: the inputs plus what the provider, the cloud API or the Kubernetes API
server filled in. The offline preview (``preview.run``) only echoes inputs, so this module turns each
recorded registration into the output shape the real provider returns, as literal, documented data:

- ``aws:eks/nodeGroup:NodeGroup``: the terraform-provider-aws ``aws_eks_node_group`` state the AWS bridge
  stores (``resourceNodeGroupRead``/``flattenNodeGroupUpdateConfig`` in
  internal/service/eks/node_group.go): every schema attribute, the computed ones filled from
  DescribeNodegroup, and the SDKv2 zero value for an attribute the API did not return. So ``updateConfig``
  carries both ``maxUnavailable`` and ``maxUnavailablePercentage``, the one EKS did not return as 0
  (EKS returns exactly one of them, ``maxUnavailable: 1`` when none was sent), and ``updateStrategy``
  (``DEFAULT`` when none was sent, terraform-aws-modules/terraform-aws-eks#3625). A group on a launch
  template has no disk size of its own (``diskSize: 0``), and one whose template names a custom AMI
  reads back ``amiType: CUSTOM`` (EKS API reference, Nodegroup.amiType).
- ``azure-native:containerservice:AgentPool``: the AKS GET response of API 2025-09-01 (azure-native
  3.29.0's output properties): the path parameters (resource group, cluster, pool name) are not outputs;
  ``name``, ``type``, ``eTag``, ``provisioningState``, ``powerState``, ``nodeImageVersion``,
  ``currentOrchestratorVersion``, ``maxPods``, ``osDiskSizeGB``, ``osDiskType``, ``kubeletDiskType``,
  ``availabilityZones``, ``securityProfile`` and the ``upgradeSettings`` defaults are.
- Kubernetes objects (``kubernetes:*``): what the API server returns after a server-side apply:
  ``metadata.uid``, ``resourceVersion``, ``creationTimestamp``, ``generation`` (not on a ConfigMap),
  ``managedFields``; CRD defaults (nvidia.com_nvidiadrivers.yaml of GPU Operator v26.7.0, checked
  against the CRD in test_engine_outputs.py); ``status`` where the kind has one (a PDB's counts are
  numbers, its conditions a list of objects with a number inside).
- ``kubernetes:nvidia.com/v1:ClusterPolicyPatch``: the provider returns the *whole* live object, not the
  patch: the ``cluster-policy`` the operator chart created, with every field the chart set (its own
  ``driver.upgradePolicy`` too), the patched fields on top, and ``status``.
- ``kubernetes:helm.sh/v3:Release``: the provider's ``setReleaseAttributes``: the values given (merged
  with the release's user-supplied config, the same here), ``version`` from the chart's metadata,
  ``resourceNames`` of the rendered objects, ``status`` (with ``revision``, a number), and the inputs'
  defaults.
- ``pulumi:providers:kubernetes``: its inputs, the kubeconfig a secret, plus ``version``.
- Components and the stack: the outputs they register (the stack: its exports).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format, struct_pb2
from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY, deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from components import guard, validation
from engine_contracts import resource_facts as rf
from preview.run import SECRET, ProgramRun, RegisteredResource

ACCOUNT = "123456789012"
CREATED = "2026-12-09T08:15:02Z"

# ---------------------------------------------------------------- engine wire format


def wire(props: Mapping[str, Any]) -> Any:
    """Properties as the analyzer receives them: a protobuf Struct (every number a double), read back by
    pulumi_policy's own path (``deserialize_properties(MessageToDict(...))``, secrets unwrapped) and
    wrapped in its unknown-checking proxies (maps are not dicts, lists are not lists)."""
    struct = json_format.ParseDict(json.loads(json.dumps(props)), struct_pb2.Struct())
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct)))


def secret(value: Any) -> dict[str, Any]:
    """A secret as the engine sends it: the secret signature around the value."""
    return {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": value}


@dataclass(frozen=True)
class EngineResource:
    """One resource as the engine describes it to a stack policy."""

    type: str
    name: str
    urn: str
    props: dict[str, Any]  # plain JSON; ``policy_resource`` puts it on the wire

    def policy_resource(self) -> PolicyResource:
        options = PolicyResourceOptions(False, [], False, [], PolicyCustomTimeouts(0, 0, 0), [], None)
        return PolicyResource(self.type, wire(self.props), self.urn, self.name, options, None, None, [], {})


# ---------------------------------------------------------------- EKS managed node group


def node_group_outputs(inputs: Mapping[str, Any], name: str) -> dict[str, Any]:
    """terraform-provider-aws aws_eks_node_group state, as pulumi-aws 7.x shows it (camelCase)."""
    out = copy.deepcopy(dict(inputs))
    cluster, region = out["clusterName"], out.get("region", "us-east-1")
    template = out.get("launchTemplate")
    sent_update = out.get("updateConfig") or {}
    # EKS returns one limit (maxUnavailable 1 when none was sent); the state holds the other as 0.
    unavailable = sent_update.get("maxUnavailable")
    percentage = sent_update.get("maxUnavailablePercentage")
    if unavailable is None and percentage is None:
        unavailable = 1
    out["updateConfig"] = {
        "maxUnavailable": unavailable or 0,
        "maxUnavailablePercentage": percentage or 0,
        "updateStrategy": sent_update.get("updateStrategy") or "DEFAULT",
    }
    if template is not None:
        # flattenLaunchTemplateSpecification returns id, name and version whichever one was sent.
        out["launchTemplate"] = {"id": template.get("id", "lt-0f00000000000000a"), "name": f"{name}-template",
                                 "version": template["version"]}
    # EKS API Nodegroup: amiType is CUSTOM for a launch template with a custom AMI (which has no EKS
    # release: releaseVersion empty); diskSize and instanceTypes are null with a launch template.
    out.setdefault("amiType", "CUSTOM" if template is not None else "AL2023_x86_64_STANDARD")
    out.setdefault("capacityType", "ON_DEMAND")
    out.setdefault("diskSize", 0 if template is not None else 20)
    out.setdefault("instanceTypes", [] if template is not None else ["t3.medium"])
    # computed: the latest AMI release of the Kubernetes version when none is sent
    out.setdefault("releaseVersion", "" if out["amiType"] == "CUSTOM" else "1.33.5-20251120")
    out.setdefault("version", "1.33")
    out.setdefault("labels", {})
    out.setdefault("tags", {})
    out.setdefault("taints", [])
    out.update(
        id=f"{cluster}:{name}",
        arn=f"arn:aws:eks:{region}:{ACCOUNT}:nodegroup/{cluster}/{name}/3acd9e6a-0f5b-41c2-b1f0-6e0c2d4b9a71",
        nodeGroupNamePrefix="",
        nodeRepairConfig={"enabled": False},
        resources=[{
            "autoscalingGroups": [{"name": f"eks-{name}-3acd9e6a-0f5b-41c2-b1f0-6e0c2d4b9a71"}],
            "remoteAccessSecurityGroupId": "",
        }],
        status="ACTIVE",
        region=region,
        tagsAll={**out["tags"]},
        forceUpdateVersion=False,
    )
    return out


# ---------------------------------------------------------------- AKS agent pool


def agent_pool_outputs(inputs: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The AKS AgentPools GET response (API 2025-09-01) as azure-native 3.29.0 returns it."""
    out = copy.deepcopy(dict(inputs))
    group, cluster = out.pop("resourceGroupName"), out.pop("resourceName")
    pool_name = out.pop("agentPoolName")
    version = out.get("orchestratorVersion", "1.33.5")
    settings = out.get("upgradeSettings") or {}
    out["upgradeSettings"] = {
        "maxSurge": settings.get("maxSurge", "10%"),
        "maxUnavailable": settings.get("maxUnavailable", "0"),
        "drainTimeoutInMinutes": settings.get("drainTimeoutInMinutes", 30),
        "nodeSoakDurationInMinutes": settings.get("nodeSoakDurationInMinutes", 0),
        "undrainableNodeBehavior": settings.get("undrainableNodeBehavior", "Schedule"),
    }
    out.setdefault("osSKU", "Ubuntu")
    out.setdefault("gpuProfile", {"driver": "Install"})
    out.setdefault("nodeLabels", {})
    out.setdefault("nodeTaints", [])
    out.setdefault("tags", {})
    out.update(
        azureApiVersion="2025-09-01",
        id=(f"/subscriptions/0b6f1c9e-7d2a-4e55-9c1a-2f4e6a8b0c13/resourceGroups/{group}/providers/"
            f"Microsoft.ContainerService/managedClusters/{cluster}/agentPools/{pool_name}"),
        name=pool_name,
        type="Microsoft.ContainerService/managedClusters/agentPools",
        eTag="c2f9e1a4-8b3d-4f6e-9a0c-1d2e3f4a5b6c",
        provisioningState="Succeeded",
        powerState={"code": "Running"},
        currentOrchestratorVersion=version,
        nodeImageVersion="AKSUbuntu-2204gen2containerd-202511.21.0",
        maxPods=30,
        osDiskSizeGB=128,
        osDiskType="Managed",
        kubeletDiskType="OS",
        enableAutoScaling=False,
        enableEncryptionAtHost=False,
        enableFIPS=False,
        enableNodePublicIP=False,
        enableUltraSSD=False,
        scaleDownMode="Delete",
        availabilityZones=["1", "2", "3"],
        securityProfile={"enableSecureBoot": False, "enableVTPM": False, "sshAccess": "LocalUser"},
    )
    return out


# ---------------------------------------------------------------- Kubernetes objects


def _server_metadata(metadata: Mapping[str, Any], *, generation: bool, manager_fields: Mapping[str, Any]) -> dict:
    out = copy.deepcopy(dict(metadata))
    out.update(
        uid="5c0f6d1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f",
        resourceVersion="918273",
        creationTimestamp=CREATED,
        managedFields=[{
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": dict(manager_fields),
            "manager": "pulumi-kubernetes-8c0e4f2a",
            "operation": "Apply",
            "time": CREATED,
        }],
    )
    if generation:
        out["generation"] = 1
    return out


def config_map_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(inputs))
    out["metadata"] = _server_metadata(out["metadata"], generation=False, manager_fields={"f:data": {}})
    return out


def pdb_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """policy/v1 PodDisruptionBudget as read back, status filled by the disruption controller."""
    out = copy.deepcopy(dict(inputs))
    out["metadata"] = _server_metadata(out["metadata"], generation=True, manager_fields={"f:spec": {}})
    replicas = int(out["metadata"].get("annotations", {}).get("gpu-driver-upgrade.io/replicas", "2"))
    desired = out["spec"].get("minAvailable", replicas - 1)
    desired = desired if isinstance(desired, int) else replicas - 1
    out["status"] = {
        "currentHealthy": replicas,
        "desiredHealthy": desired,
        "disruptionsAllowed": max(replicas - desired, 0),
        "expectedPods": replicas,
        "observedGeneration": 1,
        "conditions": [{
            "type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": "",
            "observedGeneration": 1, "lastTransitionTime": CREATED,
        }],
    }
    return out


# The defaults of the NVIDIADriver CRD (GPU Operator v26.7.0, nvidia.com_nvidiadrivers.yaml): the API
# server fills a missing field whose parent object exists (structural defaulting), so the upgradePolicy
# defaults apply only when an upgradePolicy was sent, and nested ones only inside a sent block.
NVIDIADRIVER_DEFAULTS: dict[str, Any] = {
    "default": False,
    "driverType": "gpu",
    "image": "nvcr.io/nvidia/driver",
    "kernelModuleType": "auto",
    "upgradePolicy": {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "25%",
        "drain": {"deleteEmptyDir": False, "enable": False, "force": False, "timeoutSeconds": 300},
        "podDeletion": {"deleteEmptyDir": False, "force": False, "timeoutSeconds": 300},
        "waitForCompletion": {"timeoutSeconds": 0},
    },
}


def apply_defaults(value: dict[str, Any], defaults: Mapping[str, Any]) -> None:
    """Structural defaulting as the API server does it: scalars fill missing keys; an object default only
    descends into an object that is present."""
    for key, default in defaults.items():
        if isinstance(default, Mapping):
            if isinstance(value.get(key), dict):
                apply_defaults(value[key], default)
        elif key not in value:
            value[key] = default


def _ready_status() -> dict[str, Any]:
    return {
        "state": "ready",
        "namespace": "gpu-operator",
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "", "observedGeneration": 1,
             "lastTransitionTime": CREATED},
            {"type": "Error", "status": "False", "reason": "Ready", "message": "", "observedGeneration": 1,
             "lastTransitionTime": CREATED},
        ],
    }


def nvidia_driver_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(inputs))
    apply_defaults(out["spec"], NVIDIADRIVER_DEFAULTS)
    out["metadata"] = _server_metadata(out["metadata"], generation=True, manager_fields={"f:spec": {}})
    out["status"] = _ready_status()
    return out


# The ClusterPolicy the GPU Operator v26.7.0 chart creates (templates/clusterpolicy.yaml over its default
# values, research notes gpu-operator.md 1.1-1.2): every field the chart renders, its own driver.upgradePolicy
# included. Image versions of the operands other than the driver are illustrative; the shape is checked
# against the CRD in test_engine_outputs.py.
CHART_CLUSTER_POLICY: dict[str, Any] = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {
        "name": "cluster-policy",
        "labels": {
            "app.kubernetes.io/component": "gpu-operator",
            "app.kubernetes.io/managed-by": "Helm",
            "helm.sh/chart": "gpu-operator-v26.7.0",
        },
        "annotations": {"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"},
    },
    "spec": {
        "operator": {"defaultRuntime": "containerd", "runtimeClass": "nvidia"},
        "daemonsets": {
            "labels": {"helm.sh/chart": "gpu-operator-v26.7.0", "app.kubernetes.io/managed-by": "gpu-operator"},
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "updateStrategy": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "1"},
        },
        "validator": {"repository": "nvcr.io/nvidia/cloud-native", "image": "gpu-operator-validator",
                      "version": "v26.7.0", "imagePullPolicy": "IfNotPresent"},
        "mig": {"strategy": "single"},
        "psa": {"enabled": False},
        "cdi": {"enabled": True, "default": False},
        "hostPaths": {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver"},
        "driver": {
            "enabled": True,
            "useNvidiaDriverCRD": False,
            "kernelModuleType": "auto",
            "usePrecompiled": False,
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": "595.91.07",
            "imagePullPolicy": "IfNotPresent",
            "startupProbe": {"initialDelaySeconds": 60, "periodSeconds": 10, "timeoutSeconds": 60,
                             "failureThreshold": 120},
            "rdma": {"enabled": False, "useHostMofed": False},
            "manager": {
                "repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager", "version": "v0.12.0",
                "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"},
                        {"name": "ENABLE_AUTO_DRAIN", "value": "false"}],
            },
            "repoConfig": {"configMapName": ""},
            "certConfig": {"name": ""},
            "licensingConfig": {"secretName": "", "nlsEnabled": True},
            "kernelModuleConfig": {"name": ""},
            "upgradePolicy": {
                "autoUpgrade": True,
                "maxParallelUpgrades": 1,
                "maxUnavailable": "25%",
                "waitForCompletion": {"timeoutSeconds": 0},
                "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
                "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
            },
        },
        "toolkit": {"enabled": True, "repository": "nvcr.io/nvidia/k8s", "image": "container-toolkit",
                    "version": "v1.18.1-ubuntu20.04", "imagePullPolicy": "IfNotPresent",
                    "installDir": "/usr/local/nvidia"},
        "devicePlugin": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "k8s-device-plugin",
                         "version": "v0.18.1", "imagePullPolicy": "IfNotPresent"},
        "dcgm": {"enabled": False},
        "dcgmExporter": {"enabled": True, "repository": "nvcr.io/nvidia/k8s", "image": "dcgm-exporter",
                         "version": "4.5.2-4.8.1-ubuntu22.04", "imagePullPolicy": "IfNotPresent",
                         "serviceMonitor": {"enabled": False, "interval": "15s", "honorLabels": False}},
        "gfd": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "k8s-device-plugin", "version": "v0.18.1",
                "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "GFD_SLEEP_INTERVAL", "value": "60s"}, {"name": "GFD_FAIL_ON_INIT_ERROR", "value": "true"}]},
        "migManager": {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-mig-manager",
                       "version": "v0.13.0-ubuntu20.04", "imagePullPolicy": "IfNotPresent",
                       "config": {"name": "default-mig-parted-config", "default": "all-disabled"}},
        "nodeStatusExporter": {"enabled": False},
        "gds": {"enabled": False},
        "gdrcopy": {"enabled": False},
        "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container"},
        "vgpuManager": {"enabled": False},
        "kataManager": {"enabled": False},
    },
}


def _merge(base: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """A server-side apply of ``patch`` over ``base``: maps merge, anything else is replaced."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def cluster_policy_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A ClusterPolicyPatch's outputs: the whole live cluster-policy with the patch applied."""
    out = copy.deepcopy(CHART_CLUSTER_POLICY)
    patch = {k: v for k, v in inputs.items() if k != "metadata"}
    _merge(out, patch)
    notes = {k: v for k, v in (inputs.get("metadata", {}).get("annotations") or {}).items()}
    out["metadata"]["annotations"].update(notes)
    out["metadata"] = _server_metadata(out["metadata"], generation=True, manager_fields={"f:spec": {}})
    out["metadata"]["generation"] = 2  # created by the chart, then patched
    out["metadata"]["managedFields"].insert(0, {
        "apiVersion": "nvidia.com/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}, "manager": "helm",
        "operation": "Update", "time": CREATED,
    })
    out["status"] = _ready_status()
    return out


def helm_release_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """pulumi-kubernetes helm.v3 Release after install (setReleaseAttributes)."""
    out = copy.deepcopy(dict(inputs))
    chart_version = out.get("version") or "v26.7.0"
    for key in ("allowNullValues", "dependencyUpdate", "devel", "disableCRDHooks", "disableOpenapiValidation",
                "disableWebhooks", "forceUpdate", "lint", "recreatePods", "renderSubchartNotes", "replace",
                "resetValues", "reuseValues", "skipAwait", "skipCrds", "verify", "waitForJobs"):
        out.setdefault(key, False)
    out.setdefault("timeout", 300)
    out.setdefault("maxHistory", 0)
    out.setdefault("description", "")
    out.setdefault("values", {})
    out.update(
        version=chart_version,
        resourceNames={
            "ClusterPolicy.nvidia.com/v1": ["cluster-policy"],
            "ClusterRole.rbac.authorization.k8s.io/v1": ["gpu-operator"],
            "Deployment.apps/v1": ["gpu-operator/gpu-operator", "gpu-operator/gpu-operator-node-feature-discovery-master"],
            "ServiceAccount/v1": ["gpu-operator/gpu-operator"],
        },
        status={
            "name": out.get("name", "gpu-operator"), "namespace": out.get("namespace", "gpu-operator"),
            "chart": out.get("chart"), "version": chart_version, "appVersion": chart_version,
            "revision": 1, "status": "deployed",
        },
    )
    return out


def kubernetes_object_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The validation job's objects (components/validation.py) as read back: inputs plus server metadata."""
    out = copy.deepcopy(dict(inputs))
    out["metadata"] = _server_metadata(out["metadata"], generation="spec" in out, manager_fields={})
    return out


def provider_outputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(inputs))
    if out.get("kubeconfig") == SECRET:  # the preview shows the secret masked; the engine sends it wrapped
        out["kubeconfig"] = secret(json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": []}))
    out["version"] = "4.34.2"
    return out


# ---------------------------------------------------------------- the whole stack

OUTPUTS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    rf.EKS_NODE_GROUP: node_group_outputs,
    rf.AKS_POOL: agent_pool_outputs,
    rf.CONFIG_MAP: lambda inputs, _name: config_map_outputs(inputs),
    rf.PDB: lambda inputs, _name: pdb_outputs(inputs),
    rf.NVIDIA_DRIVER: lambda inputs, _name: nvidia_driver_outputs(inputs),
    rf.CLUSTER_POLICY_PATCH: lambda inputs, _name: cluster_policy_outputs(inputs),
    rf.HELM_RELEASE: lambda inputs, _name: helm_release_outputs(inputs),
    "pulumi:providers:kubernetes": lambda inputs, _name: provider_outputs(inputs),
    **{token: lambda inputs, _name: kubernetes_object_outputs(inputs)
       for token in (*validation.RESOURCE_TYPES, *guard.RESOURCE_TYPES)},
}


def _parent_type(res: RegisteredResource) -> str | None:
    chain = res.urn.split("::")[2].split("$") if res.urn else []
    return chain[-2] if len(chain) > 1 else None


def _children(run: ProgramRun, component: RegisteredResource) -> list[RegisteredResource]:
    """A component's children: the URN carries the parent's type only, so among several components of one
    type a child is the one named after its component (the program names children ``<component>...``)."""
    peers = [r for r in run.resources if r.type == component.type]
    return [
        r for r in run.resources
        if _parent_type(r) == component.type and (len(peers) == 1 or r.name.startswith(component.name))
    ]


def component_outputs(run: ProgramRun, component: RegisteredResource) -> dict[str, Any]:
    """What each component of components/ passes to register_outputs."""
    kind = component.type.rsplit(":", 1)[-1]
    children = _children(run, component)
    if kind == "GpuFleet":
        return copy.deepcopy(run.outputs)
    if kind == "PreviousDeployment":
        return copy.deepcopy(component.outputs)  # the referenced outputs, as the program registers them
    if kind == "AksGpuPool":
        return {"agentPoolNames": [c.inputs["agentPoolName"] for c in children if c.type == rf.AKS_POOL]}
    if kind == "EksGpuPool":
        return {"nodeGroupNames": [c.inputs["nodeGroupName"] for c in children if c.type == rf.EKS_NODE_GROUP]}
    if kind == "ModelBudget":
        (pdb,) = [c for c in children if c.type == rf.PDB]
        return {"minAvailable": pdb.inputs["spec"].get("minAvailable")}
    if kind == "ClusterIdentity":
        (record,) = [c for c in children if c.type == rf.CONFIG_MAP] or [None]
        return {"cluster": record.inputs["data"]["cluster"]} if record else {}
    if kind == "DriverPolicy":
        mode = ("patch" if any(c.type == rf.CLUSTER_POLICY_PATCH for c in children)
                else "helm" if any(c.type == rf.HELM_RELEASE for c in children) else "external")
        return {"mode": mode}
    if kind == "PoolDriver":
        drivers = [c for c in children if c.type == rf.NVIDIA_DRIVER]
        return {"version": drivers[0].inputs["spec"]["version"]} if drivers else {}
    if kind == "Guard":
        deployments = [c for c in children if c.type == rf.DEPLOYMENT]
        (namespace,) = [c for c in children if c.type == rf.NAMESPACE]
        return {"namespace": namespace.inputs["metadata"]["name"],
                "deployment": deployments[0].inputs["metadata"]["name"] if deployments else None}
    if kind == "CanaryGate":
        (record,) = [c for c in children if c.type == rf.CONFIG_MAP]
        return {"canaryStack": record.inputs["data"]["canaryStack"]}
    records = [c for c in children if c.type == rf.CONFIG_MAP]
    return {"record": records[0].inputs["metadata"]["name"]} if records else {}


def stack_outputs(run: ProgramRun) -> list[EngineResource]:
    """Every resource of the run as the engine hands it to a stack policy, the stack itself first."""
    root_urn = f"urn:pulumi:{run.stack}::gpu-driver-upgrade::pulumi:pulumi:Stack::gpu-driver-upgrade-{run.stack}"
    found = [EngineResource("pulumi:pulumi:Stack", f"gpu-driver-upgrade-{run.stack}", root_urn, copy.deepcopy(run.outputs))]
    for res in run.resources:
        if res.type == rf.STACK_REFERENCE:
            continue  # the engine hands stack policies no StackReference (a read)
        if res.custom:
            build = OUTPUTS.get(res.type)
            if build is None:
                raise AssertionError(f"no output shape for {res.type}: add one to tests/policy/engine_outputs.py")
            props = build(res.inputs, res.name)
        else:
            props = component_outputs(run, res)
        found.append(EngineResource(res.type, res.name, res.urn or f"urn:{res.name}", props))
    return found


def stack_inputs(run: ProgramRun) -> list[EngineResource]:
    """The custom resources with their inputs (what resource policies and `gpu-rollout plan` read)."""
    return [EngineResource(r.type, r.name, r.urn or f"urn:{r.name}", copy.deepcopy(r.inputs))
            for r in run.resources if r.custom]


def edit(resources: Iterable[EngineResource], type_token: str, name: str | None,
         change: Callable[[dict[str, Any]], object]) -> list[EngineResource]:
    """``resources`` with the props of every resource of ``type_token`` (named ``name``, if given) edited."""
    out = []
    hit = False
    for res in resources:
        if res.type == type_token and (name is None or res.name == name):
            props = copy.deepcopy(res.props)
            change(props)
            res = EngineResource(res.type, res.name, res.urn, props)
            hit = True
        out.append(res)
    assert hit, f"no {type_token} {name or ''} to edit"
    return out
