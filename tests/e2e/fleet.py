"""The GPU fleet of the e2e cluster, written out as literal Kubernetes objects.

It is shaped like an on-prem (kubeadm) inference cluster "lab-gpu-1" that already runs the GPU
Operator v26.7.0 with the driver 570.195.03 on every GPU node, before either example stack
(``Pulumi.existing-canary.yaml``, ``Pulumi.existing-prod.yaml``) ever ran: nodes labelled by the
platform team's own pool label (``gpu.example.com/pool``, the stacks' ``existing.nodeSelector``), by
NFD and GPU Feature Discovery, and by the operator (deploy and upgrade-state labels); the operator's
ClusterPolicy ``cluster-policy`` as its chart creates it, with ``useNvidiaDriverCRD``; the driver
DaemonSet; the model servers as Deployments whose pods the scheduler places and kwok runs.

Nothing here is built by the product's code: the point is to meet the product with a cluster it did
not describe itself. tests/e2e/test_cluster.py checks that this fleet covers every pool and model of
the two example stacks, so the stacks and this file cannot drift apart unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

OLD_DRIVER = "570.195.03"  # what every GPU node runs before the rollout (the stacks' previousVersion)
OPERATOR_NAMESPACE = "gpu-operator"
MODEL_NAMESPACE = "inference"
# Where the existing-prod stack's Prometheus Service lives (validation.prometheus: monitoring/prometheus-k8s): the
# namespace a real cluster has, where the guard's Role to reach Prometheus through the API server goes.
MONITORING_NAMESPACE = "monitoring"
POOL_LABEL = "gpu.example.com/pool"  # the platform team's pool label: the stacks' existing.nodeSelector
KERNEL = "6.8.0-1020-nvidia"
DRIVER_DAEMONSET = "nvidia-gpu-driver-ubuntu22.04-7b6f8d9c5d"


@dataclass(frozen=True)
class Pool:
    name: str
    prefix: str
    nodes: int
    product: str
    gpus: int
    memory_mib: int
    family: str
    compute: tuple[int, int]
    machine: str
    mig_capable: bool


POOLS = (
    Pool("l40s-canary", "gpu-l40s-c", 3, "NVIDIA-L40S", 1, 46068, "ada", (8, 9), "PowerEdge-R760xa", False),
    # The canary's Hopper node (one HGX box taken from the H100 fleet): what lets the canary attest Hopper.
    Pool("h100-canary", "gpu-h100-c", 1, "NVIDIA-H100-80GB-HBM3", 8, 81559, "hopper", (9, 0),
         "PowerEdge-XE9680", True),
    Pool("l40s-serving", "gpu-l40s-s", 4, "NVIDIA-L40S", 4, 46068, "ada", (8, 9), "PowerEdge-R760xa", False),
    Pool("h100-serving", "gpu-h100-s", 4, "NVIDIA-H100-80GB-HBM3", 8, 81559, "hopper", (9, 0),
         "PowerEdge-XE9680", True),
)


def node_names(pool: Pool) -> list[str]:
    return [f"{pool.prefix}{i:02d}" for i in range(1, pool.nodes + 1)]


def driver_labels(version: str) -> dict[str, str]:
    """GFD's driver labels: the current cuda.driver-version.* ones and the deprecated cuda.driver.*."""
    major, minor, rev = version.split(".")
    return {
        "nvidia.com/cuda.driver-version.full": version,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": "12.8",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "8",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "8",
    }


def gpu_node(pool: Pool, name: str) -> Obj:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.machine,
        "topology.kubernetes.io/zone": "lab-row-b",
        POOL_LABEL: pool.name,
        # NFD
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/kernel-version.full": KERNEL,
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        # GPU Feature Discovery
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": pool.product,
        "nvidia.com/gpu.count": str(pool.gpus),
        "nvidia.com/gpu.memory": str(pool.memory_mib),
        "nvidia.com/gpu.family": pool.family,
        "nvidia.com/gpu.compute.major": str(pool.compute[0]),
        "nvidia.com/gpu.compute.minor": str(pool.compute[1]),
        "nvidia.com/gpu.machine": pool.machine,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if pool.mig_capable else "false",
        "nvidia.com/gfd.timestamp": "1764680000",
        **driver_labels(OLD_DRIVER),
        # GPU Operator
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
    }
    if pool.mig_capable:
        labels["nvidia.com/mig.config"] = "all-disabled"
    resources = {"cpu": "96", "memory": "1056Gi" if pool.gpus == 8 else "512Gi", "pods": "110",
                 "ephemeral-storage": "1843Gi", "nvidia.com/gpu": str(pool.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                "nfd.node.kubernetes.io/feature-labels": "pci-10de.present,kernel-version.full",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": KERNEL,
                "kubeletVersion": "v1.36.3",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
            },
        },
    }


def cpu_node(name: str) -> Obj:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "400Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "node.kubernetes.io/instance-type": "PowerEdge-R660", "topology.kubernetes.io/zone": "lab-row-a"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources,
                   "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.27",
                                "kernelVersion": KERNEL, "kubeletVersion": "v1.36.3", "operatingSystem": "linux",
                                "osImage": "Ubuntu 22.04.5 LTS"}},
    }


def nodes() -> list[Obj]:
    found = [cpu_node("cpu-01"), cpu_node("cpu-02")]
    for pool in POOLS:
        found += [gpu_node(pool, name) for name in node_names(pool)]
    return found


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Model:
    name: str
    labels: dict[str, str]
    replicas: int
    gpus: int
    pool: str
    image: str
    port: int
    args: tuple[str, ...]


MODELS = (
    Model("llm-chat-canary", {"app": "llm-chat", "track": "canary"}, 2, 1, "l40s-canary",
          "vllm/vllm-openai:v0.10.2", 8000, ("--model", "/models/llama-3.1-8b-instruct", "--tensor-parallel-size", "1")),
    Model("llm-chat", {"app": "llm-chat", "track": "stable"}, 3, 8, "h100-serving",
          "vllm/vllm-openai:v0.10.2", 8000, ("--model", "/models/llama-3.1-70b-instruct", "--tensor-parallel-size", "8")),
    Model("embed-triton", {"app": "embed-triton"}, 4, 2, "l40s-serving",
          "nvcr.io/nvidia/tritonserver:25.01-py3", 8000, ("tritonserver", "--model-repository=/models")),
)


def model_deployment(model: Model) -> Obj:
    probe_path = "/health" if "vllm" in model.image else "/v2/health/ready"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": model.name, "namespace": MODEL_NAMESPACE, "labels": dict(model.labels)},
        "spec": {
            "replicas": model.replicas,
            "selector": {"matchLabels": dict(model.labels)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": dict(model.labels)},
                "spec": {
                    "nodeSelector": {POOL_LABEL: model.pool},
                    "tolerations": [GPU_TOLERATION],
                    "terminationGracePeriodSeconds": 60,
                    "containers": [{
                        "name": "server",
                        "image": model.image,
                        "args": list(model.args),
                        "ports": [{"name": "http", "containerPort": model.port}],
                        "resources": {
                            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(model.gpus)},
                            "limits": {"memory": "64Gi", "nvidia.com/gpu": str(model.gpus)},
                        },
                        "readinessProbe": {"httpGet": {"path": probe_path, "port": model.port},
                                           "periodSeconds": 10, "failureThreshold": 3},
                        "volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}],
                    }],
                    "volumes": [{"name": "models", "hostPath": {"path": "/mnt/models", "type": "Directory"}}],
                },
            },
        },
    }


def system_objects() -> list[Obj]:
    """A non-GPU workload with its own PDB (as on every cluster): never the stacks' business."""
    labels = {"k8s-app": "kube-dns"}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"priorityClassName": "system-cluster-critical",
                                        "containers": [{"name": "coredns",
                                                        "image": "registry.k8s.io/coredns/coredns:v1.12.1",
                                                        "resources": {"requests": {"cpu": "100m",
                                                                                   "memory": "70Mi"}}}]}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": "coredns", "namespace": "kube-system"},
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}},
    ]


def driver_daemonset() -> Obj:
    """The operator's driver DaemonSet (NVIDIADriver mode names it after the OS and a hash)."""
    labels = {"app": DRIVER_DAEMONSET, "app.kubernetes.io/component": "nvidia-driver",
              "app.kubernetes.io/managed-by": "gpu-operator", "nvidia.com/precompiled": "false"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DRIVER_DAEMONSET, "namespace": OPERATOR_NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": DRIVER_DAEMONSET}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
                    "tolerations": [GPU_TOLERATION],
                    "priorityClassName": "system-node-critical",
                    "hostPID": True,
                    "containers": [{
                        "name": "nvidia-driver-ctr",
                        "image": f"nvcr.io/nvidia/driver:{OLD_DRIVER}-ubuntu22.04",
                        "command": ["nvidia-driver"],
                        "args": ["init"],
                        "securityContext": {"privileged": True},
                        "startupProbe": {"exec": {"command": ["sh", "-c", "nvidia-smi && touch /run/nvidia/validations/.driver-ctr-ready"]},
                                         "initialDelaySeconds": 60, "periodSeconds": 10, "failureThreshold": 120},
                    }],
                },
            },
        },
    }


def cluster_policy() -> Obj:
    """``cluster-policy`` as the gpu-operator v26.7.0 chart renders it with the NVIDIADriver CRD enabled."""
    upgrade_policy = {
        "autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
        "waitForCompletion": {"timeoutSeconds": 0},
        "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
    }
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": "cluster-policy",
            "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": "gpu-operator",
                            "meta.helm.sh/release-namespace": OPERATOR_NAMESPACE},
        },
        "spec": {
            "hostPaths": {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver"},
            "operator": {"defaultRuntime": "containerd", "runtimeClass": "nvidia",
                         "initContainer": {"repository": "nvcr.io/nvidia", "image": "cuda",
                                           "version": "13.0.1-base-ubi9", "imagePullPolicy": "IfNotPresent"}},
            "daemonsets": {"labels": {"helm.sh/chart": "gpu-operator-v26.7.0",
                                      "app.kubernetes.io/managed-by": "gpu-operator"},
                           "tolerations": [GPU_TOLERATION], "priorityClassName": "system-node-critical",
                           "updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
            "validator": {"repository": "nvcr.io/nvidia/cloud-native", "image": "gpu-operator-validator",
                          "version": "v26.7.0", "plugin": {"env": []}},
            "mig": {"strategy": "single"},
            "psa": {"enabled": False},
            "cdi": {"enabled": True},
            "driver": {
                "enabled": True, "useNvidiaDriverCRD": True, "kernelModuleType": "auto", "usePrecompiled": False,
                "repository": "nvcr.io/nvidia", "image": "driver", "version": OLD_DRIVER,
                "imagePullPolicy": "IfNotPresent", "rdma": {"enabled": False, "useHostMofed": False},
                "manager": {"repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager",
                            "version": "v0.9.1", "imagePullPolicy": "IfNotPresent"},
                "startupProbe": {"initialDelaySeconds": 60, "periodSeconds": 10, "timeoutSeconds": 60,
                                 "failureThreshold": 120},
                "upgradePolicy": upgrade_policy,
            },
            "toolkit": {"enabled": True, "repository": "nvcr.io/nvidia/k8s", "image": "container-toolkit",
                        "version": "v1.18.0", "imagePullPolicy": "IfNotPresent"},
            "devicePlugin": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "k8s-device-plugin",
                             "version": "v0.18.0", "imagePullPolicy": "IfNotPresent"},
            "dcgm": {"enabled": False},
            "dcgmExporter": {"enabled": True, "repository": "nvcr.io/nvidia/k8s", "image": "dcgm-exporter",
                             "version": "4.4.1-4.5.2-ubuntu22.04", "imagePullPolicy": "IfNotPresent"},
            "gfd": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "k8s-device-plugin",
                    "version": "v0.18.0", "imagePullPolicy": "IfNotPresent"},
            "migManager": {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-mig-manager",
                           "version": "v0.13.0", "imagePullPolicy": "IfNotPresent"},
            "nodeStatusExporter": {"enabled": False},
            "gds": {"enabled": False},
            "gdrcopy": {"enabled": False},
            "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container"},
        },
    }


CLUSTER_POLICY_STATUS = {"state": "ready", "namespace": OPERATOR_NAMESPACE}
