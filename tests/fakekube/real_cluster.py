"""Clusters as they are before this project touched them, written out literally.

Nodes carry only what the cloud, NFD, the GPU Operator and GFD put on a real node (``kubernetes.azure.com/*``
or ``eks.amazonaws.com/nodegroup``, ``nvidia.com/gpu.*``, ``nvidia.com/cuda.driver*``, ``nvidia.com/mig.*``,
the upgrade-state label), never a label of this project and never one built by ``renderers.manifests``: a
wrong pool label or selector in the code under test cannot be mirrored here. Workloads (model servers
and their PDBs, the operator and its driver pods) are spelled out the same way.
"""

from __future__ import annotations

from typing import Any

from tests.fakekube.fixtures import pod, ready_condition
from tests.fakekube.server import FakeKube

Obj = dict[str, Any]

AKS_NODE_RG = "MC_rg-inference-weu-1_aks-inference-weu-1_westeurope"  # the example AKS stacks' cluster
AKS_IMAGE = "AKSUbuntu-2204gen2containerd-202510.14.0"
OPERATOR_NS = "gpu-operator"


def gfd_driver(version: str) -> dict[str, str]:
    """GFD's driver labels for ``version`` (current and deprecated spellings, as GFD v0.15+ emits both)."""
    major, minor, rev = (version.split(".") + ["", ""])[:3]
    return {"nvidia.com/cuda.driver-version.full": version, "nvidia.com/cuda.driver-version.major": major,
            "nvidia.com/cuda.driver-version.minor": minor, "nvidia.com/cuda.driver-version.revision": rev,
            "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev}


def _gpu_node(name: str, node_labels: dict[str, str], product: str, gpus: int, driver: str, *,
              state: str | None, provider_id: str, kernel: str, extra: dict[str, str] | None) -> Obj:
    all_labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        **node_labels,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/kernel-version.full": kernel,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if ("A100" in product or "H100" in product) else "false",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        **gfd_driver(driver),
        **({"nvidia.com/gpu-driver-upgrade-state": state} if state else {}),
        **(extra or {}),
    }
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels,
                     "annotations": {"nvidia.com/gpu-driver-upgrade-enabled": "true"} if state else {}},
        "spec": {"providerID": provider_id,
                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "40", "memory": "330000000Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {"cpu": "39", "memory": "320000000Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [ready_condition(True)],
            "nodeInfo": {"kernelVersion": kernel, "osImage": "Ubuntu 22.04.5 LTS", "architecture": "amd64",
                         "containerRuntimeVersion": "containerd://1.7.27", "kubeletVersion": "v1.33.5"},
        },
    }


def aks_gpu_node(agentpool: str, index: int, *, vm_size: str, product: str, gpus: int, driver: str,
                 node_rg: str = AKS_NODE_RG, image: str = AKS_IMAGE, state: str | None = "upgrade-done",
                 extra: dict[str, str] | None = None) -> Obj:
    """An AKS GPU node as AKS, NFD, the operator and GFD label it (agent pool ``agentpool``)."""
    name = f"aks-{agentpool}-31415926-vmss{index:06x}"
    return _gpu_node(name, {
        "kubernetes.azure.com/agentpool": agentpool, "agentpool": agentpool,
        "kubernetes.azure.com/cluster": node_rg, "kubernetes.azure.com/mode": "user",
        "kubernetes.azure.com/role": "agent", "kubernetes.azure.com/node-image-version": image,
        "kubernetes.azure.com/os-sku": "Ubuntu", "node.kubernetes.io/instance-type": vm_size,
        "topology.kubernetes.io/region": node_rg.rsplit("_", 1)[-1] if node_rg.startswith("MC_") else "westeurope",
        "topology.kubernetes.io/zone": "0",
    }, product, gpus, driver, state=state, kernel="5.15.0-1079-azure", extra=extra,
        provider_id=f"azure:///subscriptions/0000/resourceGroups/{node_rg.lower()}/providers/Microsoft.Compute/"
                    f"virtualMachineScaleSets/aks-{agentpool}-31415926-vmss/virtualMachines/{index}")


def eks_gpu_node(nodegroup: str, index: int, *, instance_type: str, product: str, gpus: int, driver: str,
                 zone: str = "us-east-1a", region: str | None = "us-east-1", state: str | None = None,
                 extra: dict[str, str] | None = None) -> Obj:
    """An EKS managed-node-group GPU node; ``region`` None leaves the region label off (old nodes)."""
    name = f"ip-10-0-{index // 250}-{index % 250 + 1}.ec2.internal"
    node_labels = {"eks.amazonaws.com/nodegroup": nodegroup, "eks.amazonaws.com/capacityType": "ON_DEMAND",
                   "node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/zone": zone}
    if region is not None:
        node_labels["topology.kubernetes.io/region"] = region
    return _gpu_node(f"{name}-{nodegroup}", node_labels, product, gpus, driver, state=state, extra=extra,
                     kernel="6.1.148-173.267.amzn2023.x86_64", provider_id=f"aws:///{zone}/i-0a{index:015x}")


def plain_node(name: str, node_labels: dict[str, str]) -> Obj:
    """A CPU node (system pool, ingress...): no GPU, no GFD labels."""
    return {"kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  **node_labels}},
            "spec": {}, "status": {"conditions": [ready_condition(True)],
                                   "allocatable": {"cpu": "8", "memory": "32000000Ki", "pods": "110"}}}


def _metrics_flag(image: str) -> Obj:
    """SGLang exports the metrics `watch` reads only with --enable-metrics, which a team running it sets."""
    return {"args": ["--enable-metrics"]} if "sglang" in image else {}


def server_pods(fake: FakeKube, namespace: str, app_labels: dict[str, str], nodes: list[str], *, image: str,
                gpus: int, owner: tuple[str, str]) -> list[str]:
    """One model-server pod per entry of ``nodes`` (a node may repeat), owned by ``owner``."""
    names = []
    for index, node in enumerate(nodes):
        name = f"{owner[1]}-{index}" if owner[0] == "StatefulSet" else f"{owner[1]}-{index:03d}"
        fake.add(pod(name, namespace, node, dict(app_labels), [{
            "name": "server", "image": image,
            "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}},
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
            "volumeMounts": [{"name": "weights", "mountPath": "/models"}], **_metrics_flag(image)}],
            [{"name": "weights", "persistentVolumeClaim": {"claimName": "weights"}}], owner=owner))
        names.append(name)
    return names


def model_server(fake: FakeKube, name: str, namespace: str, app_labels: dict[str, str], nodes: list[str], *,
                 image: str, gpus: int, min_available: int | str, kind: str = "Deployment") -> None:
    """A model server as its team runs it: a Deployment (pods owned by its ReplicaSet) or a StatefulSet, and
    the team's own PodDisruptionBudget."""
    template = {"metadata": {"labels": dict(app_labels)}, "spec": {"containers": [{
        "name": "server", "image": image,
        "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
        "volumeMounts": [{"name": "weights", "mountPath": "/models"}], **_metrics_flag(image)}],
        "volumes": [{"name": "weights", "persistentVolumeClaim": {"claimName": "weights"}}]}}
    spec: Obj = {"replicas": len(nodes), "selector": {"matchLabels": dict(app_labels)}, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    fake.add({"kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": dict(app_labels)},
              "spec": spec})
    owner = ("ReplicaSet", f"{name}-5f7c9d") if kind == "Deployment" else ("StatefulSet", name)
    server_pods(fake, namespace, app_labels, nodes, image=image, gpus=gpus, owner=owner)
    fake.add({"kind": "PodDisruptionBudget", "metadata": {"name": f"{name}-budget", "namespace": namespace},
              "spec": {"minAvailable": min_available, "selector": {"matchLabels": dict(app_labels)}}})


def gpu_operator(fake: FakeKube, version: str, *, driver: Obj, nvidia_drivers: list[Obj] = (),
                 driver_pods_on: list[str] = (), driver_version: str = "570.195.03") -> None:
    """The GPU Operator as the platform team installed it: its Deployment, ``cluster-policy`` with the
    ``spec.driver`` given, NVIDIADrivers, and a driver pod (ClusterPolicy-managed DaemonSet) per node."""
    fake.add({"kind": "Deployment", "metadata": {"name": "gpu-operator", "namespace": OPERATOR_NS,
                                                 "labels": {"app": "gpu-operator"}},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gpu-operator"}},
                       "template": {"metadata": {"labels": {"app": "gpu-operator"}}, "spec": {"containers": [
                           {"name": "gpu-operator", "image": f"nvcr.io/nvidia/gpu-operator:{version}"}]}}}})
    fake.add({"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
              "spec": {"operator": {}, "daemonsets": {}, "driver": driver, "toolkit": {"enabled": True},
                       "devicePlugin": {"enabled": True}, "dcgm": {"enabled": True},
                       "dcgmExporter": {"enabled": True}, "gfd": {"enabled": True},
                       "nodeStatusExporter": {"enabled": False}},
              "status": {"state": "ready", "namespace": OPERATOR_NS}})
    for nvd in nvidia_drivers:
        fake.add(nvd)
    ds_labels = {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver",
                 "nvidia.com/precompiled": "false"}
    image = f"nvcr.io/nvidia/driver:{driver_version}-ubuntu22.04"
    fake.add({"kind": "DaemonSet", "metadata": {"name": "nvidia-driver-daemonset", "namespace": OPERATOR_NS,
                                                "labels": ds_labels},
              "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
                       "updateStrategy": {"type": "OnDelete"},
                       "template": {"metadata": {"labels": ds_labels},
                                    "spec": {"containers": [{"name": "nvidia-driver-ctr", "image": image}]}}}})
    for index, node in enumerate(driver_pods_on):
        fake.add(pod(f"nvidia-driver-daemonset-{index:05d}", OPERATOR_NS, node, ds_labels,
                     [{"name": "nvidia-driver-ctr", "image": image}], owner=("DaemonSet", "nvidia-driver-daemonset")))


def nvidia_driver(name: str, version: str, *, node_selector: dict[str, str] | None = None,
                  default: bool = False) -> Obj:
    """An NVIDIADriver as kubectl shows it (v26.7.0 CRD: ``default``, no selector on the default one)."""
    spec: Obj = {"driverType": "gpu", "image": "driver", "repository": "nvcr.io/nvidia", "version": version,
                 "default": default, "usePrecompiled": False, "kernelModuleType": "auto"}
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    return {"kind": "NVIDIADriver", "metadata": {"name": name}, "spec": spec, "status": {"state": "ready"}}


def identity_configmap(stage: str, data: dict[str, str]) -> Obj:
    return {"kind": "ConfigMap",
            "metadata": {"name": f"gpu-driver-upgrade-{stage}", "namespace": "kube-system",
                         "labels": {"gpu-driver-upgrade.io/record": "cluster-identity"}},
            "data": dict(data)}


# ---------------------------------------------------------------- the prod AKS fleet before the first `pulumi up`

T4 = {"vm_size": "Standard_NC64as_T4_v3", "product": "Tesla-T4", "gpus": 4}
A100 = {"vm_size": "Standard_NC24ads_A100_v4", "product": "NVIDIA-A100-80GB-PCIe", "gpus": 1}
H100 = {"vm_size": "Standard_ND96isr_H100_v5", "product": "NVIDIA-H100-80GB-HBM3", "gpus": 8}


def unlabelled_aks_prod(fake: FakeKube, *, node_rg: str = AKS_NODE_RG, driver: str = "570.195.03",
                        per_pool_mode: bool = False) -> dict[str, list[str]]:
    """The cluster of Pulumi.prod.yaml as it stands before the stack's first `pulumi up`: the agent pools
    gput4 (4 T4 nodes), gpua100 (8 A100 PCIe) and gpuh100 (4 HGX H100) exist with the cloud's and GFD's
    labels only, a system pool, and a GPU pool of another team (``gpuml``) that is no pool of the stack.
    The operator (v26.7.0) owns the driver through ``cluster-policy`` (or, with ``per_pool_mode``, through
    the default NVIDIADriver after the migration); the model teams run their servers with their own PDBs.
    Returns the node names per agent pool."""
    nodes: dict[str, list[str]] = {}
    for pool, shape, count in (("gput4", T4, 4), ("gpua100", A100, 8), ("gpuh100", H100, 4), ("gpuml", A100, 2)):
        nodes[pool] = [fake.add(aks_gpu_node(pool, i, driver=driver, node_rg=node_rg, **shape))["metadata"]["name"]
                       for i in range(count)]
    fake.add(plain_node("aks-system-31415926-vmss000000", {"kubernetes.azure.com/agentpool": "system",
                                                           "kubernetes.azure.com/cluster": node_rg,
                                                           "kubernetes.azure.com/mode": "system"}))
    everything = [n for names in nodes.values() for n in names]
    driver_spec: Obj = {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": driver,
                        "useNvidiaDriverCRD": per_pool_mode, "usePrecompiled": False, "kernelModuleType": "auto",
                        "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}}
    gpu_operator(fake, "v26.7.0", driver=driver_spec, driver_pods_on=everything, driver_version=driver,
                 nvidia_drivers=[nvidia_driver("default", driver, default=True)] if per_pool_mode else [])
    model_server(fake, "llm-chat", "inference", {"app": "llm-chat", "track": "stable"}, nodes["gpuh100"][:3],
                 image="vllm/vllm-openai:v0.10.2", gpus=8, min_available=2)
    model_server(fake, "embed-triton", "inference", {"app": "embed-triton"}, nodes["gpua100"][:4],
                 image="nvcr.io/nvidia/tritonserver:25.01-py3", gpus=1, min_available=3)
    model_server(fake, "code-tgi", "inference", {"app": "code-tgi"}, nodes["gpua100"][4:7],
                 image="ghcr.io/huggingface/text-generation-inference:3.3.4", gpus=1, min_available="50%")
    model_server(fake, "rerank-sglang", "inference", {"app": "rerank-sglang"}, nodes["gput4"][:2],
                 image="lmsysorg/sglang:v0.4.6.post5-cu126", gpus=1, min_available=1)
    return nodes
