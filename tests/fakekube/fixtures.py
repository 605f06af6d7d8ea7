"""Cluster contents shaped like a real GPU fleet, built from a stack's pools and models.

Every object is spelled out here, from the stack's values, the way the operator, GFD and this project's
`pulumi up` leave it (docs/config.md, docs/architecture.md), never by ``renderers.manifests`` or
``engine_contracts.resource_facts``: a wrong label, name or selector in the code under test cannot be mirrored here.

Nodes carry what GFD, NFD and the GPU Operator put on real nodes (``nvidia.com/gpu.product``,
``nvidia.com/cuda.driver-version.*`` and the deprecated ``cuda.driver.*``, ``gpu.deploy.*``, the
upgrade-state label), allocatable ``nvidia.com/gpu`` and the pool labels this project adds. Helpers
move nodes through the upgrade states the way the operator does (label plus a ``GPUDriverUpgrade``
event).

Image-owned pools with generations (``driver.owner: image``, EKS/AKS) are seeded as `pulumi up` of the
spec leaves them: ``nodeCount`` nodes per *live* generation, each labelled with its generation and
running the driver that generation's image ships (no upgrade-state label: the operator's driver is
off). Helpers add or remove a generation's nodes and flip a node's Ready condition, as the cloud and
the kubelet do during a blue/green move.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timezone
from typing import Any

from fleetspec.model import Cloud, DriverOwner, FleetSpec, Generation, Model, NodePool, kubernetes_name
from renderers.manifests import pool_operating_systems
from tests.fakekube.server import FakeKube

Obj = dict[str, Any]

KERNEL = {Cloud.AKS: "5.15.0-1079-azure", Cloud.EKS: "6.1.148-173.267.amzn2023.x86_64"}
AKS_LOCATION = "westeurope"  # the example AKS stacks' azure-native:location
AKS_IMAGE = "AKSUbuntu-2204gen2containerd-"  # node-image-version prefix of the Ubuntu 22.04 gen2 image
AKS_DEFAULT_IMAGE_VERSION = "202510.14.0"
FAMILY = {"H100": "hopper", "H200": "hopper", "A100": "ampere", "A10": "ampere", "T4": "turing", "L40S": "ada",
          "L4": "ada", "B200": "blackwell"}


def _family(product: str) -> str:
    return next((fam for key, fam in FAMILY.items() if key in product), "unknown")


def driver_labels(version: str) -> dict[str, str]:
    """GFD's driver labels, the current ones and the deprecated ones it still emits."""
    major, minor, rev = ([*version.split("."), "", ""])[:3]
    runtime = "13.0" if int(major) >= 580 else "12.8"
    return {
        "nvidia.com/cuda.driver-version.full": version,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": runtime,
        "nvidia.com/cuda.runtime.major": runtime.split(".")[0],
        "nvidia.com/cuda.runtime.minor": runtime.split(".")[1],
    }


# The labels this project's cloud pools put on their nodes, and its NVIDIADrivers' names (docs/config.md).
PROJECT_DOMAIN = "gpu-driver-upgrade.io"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"  # the GPU Operator's own skip label


def held(pool: NodePool) -> bool:
    """A prod pool not released yet (the canary is never held)."""
    return pool.role != "canary" and not pool.rollout.released


def project_pool_labels(pool: NodePool, generation: Generation | None = None) -> dict[str, str]:
    """What `pulumi up` of an AKS or EKS stack puts on every node of ``pool`` through the cloud pool."""
    out = {
        f"{PROJECT_DOMAIN}/pool": pool.name, f"{PROJECT_DOMAIN}/role": pool.role,
        f"{PROJECT_DOMAIN}/wave": str(pool.rollout.wave), f"{PROJECT_DOMAIN}/gpu-product": pool.gpuProduct,
        f"{PROJECT_DOMAIN}/gpus-per-node": str(pool.gpusPerNode),
        f"{PROJECT_DOMAIN}/nvswitch": "true" if pool.nvswitch else "false",
    }
    if generation is not None:
        out[f"{PROJECT_DOMAIN}/generation"] = str(generation.id)
        out[f"{PROJECT_DOMAIN}/image-driver"] = generation.driverVersion
    if held(pool):
        out[SKIP_LABEL] = "true"
    return out


def nvidia_driver_object(spec: FleetSpec, pool: NodePool) -> Obj:
    """The pool's NVIDIADriver as `pulumi up` leaves it: pinned to the previous driver while the pool is held,
    selecting the pool's nodes by the project's pool label (or, on an existing cluster, the declared selector)."""
    op = spec.gpuOperator
    version = spec.driver.previousVersion if held(pool) and spec.driver.previousVersion else spec.driver.version
    selector = dict(pool.existing.nodeSelector) if pool.existing else {f"{PROJECT_DOMAIN}/pool": pool.name}
    return {
        "kind": "NVIDIADriver",
        "metadata": {"name": f"gpu-{kubernetes_name(pool.name)}",
                     "labels": {f"{PROJECT_DOMAIN}/pool": pool.name, f"{PROJECT_DOMAIN}/role": pool.role,
                                f"{PROJECT_DOMAIN}/wave": str(pool.rollout.wave)}},
        "spec": {"driverType": "gpu", "image": f"{op.driverRepository}/driver", "version": version,
                 "usePrecompiled": op.usePrecompiled, "kernelModuleType": op.kernelModuleType, "default": False,
                 "nodeSelector": selector,
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "status": {"state": "ready"},
    }


def current_driver(spec: FleetSpec) -> str:
    """What the fleet runs before the rollout starts."""
    return spec.driver.previousVersion or spec.driver.version


def node_name(spec: FleetSpec, pool: NodePool, index: int, generation: Generation | None = None) -> str:
    cloud_pool = pool.cloud_name(generation)
    if spec.cluster.cloud == Cloud.EKS:
        return f"ip-10-0-{index // 250}-{index % 250 + 1}.ec2.internal-{kubernetes_name(cloud_pool)}"
    return f"aks-{cloud_pool}-12345678-vmss{index:06x}"



# What a node's status.nodeInfo.osImage says for the OS the pool declares (renderers.manifests.pool_operating_systems).
OS_IMAGES = {"ubuntu22.04": "Ubuntu 22.04.5 LTS", "ubuntu24.04": "Ubuntu 24.04.3 LTS",
             "amazonlinux2023": "Amazon Linux 2023.9.20251110", "azurelinux": "Microsoft Azure Linux 3.0",
             "bottlerocket": "Bottlerocket OS 1.49.0 (aws-k8s-1.33-nvidia)"}


def os_image(pool: NodePool) -> str:
    """The node's osImage: the first OS the pool's declaration allows, Ubuntu 22.04 where it says none."""
    declared = pool_operating_systems(pool)
    return OS_IMAGES.get(declared[0], "Ubuntu 22.04.5 LTS") if declared else "Ubuntu 22.04.5 LTS"

def gpu_node(spec: FleetSpec, pool: NodePool, index: int, generation: Generation | None = None) -> Obj:
    """A GPU node of ``pool``; with ``generation`` (image-owned pools) one of that generation's node
    group, running the driver its image ships."""
    operator_owned = spec.driver.owner == DriverOwner.OPERATOR
    name = node_name(spec, pool, index, generation)
    driver = generation.driverVersion if generation is not None else current_driver(spec)
    kernel = KERNEL.get(spec.cluster.cloud, "6.8.0-1020-generic")
    if spec.cluster.cloud == Cloud.EKS and os_image(pool).startswith("Ubuntu"):
        kernel = "6.8.0-1021-aws"  # a custom Ubuntu AMI boots Ubuntu's AWS kernel
    # On an existing cluster this project never labels nodes: they carry the selector the stack declares.
    own_labels = (dict(pool.existing.nodeSelector) if spec.cluster.cloud == Cloud.EXISTING and pool.existing
                  else project_pool_labels(pool, generation))
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **own_labels,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/kernel-version.full": kernel,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": pool.gpuProduct,
        "nvidia.com/gpu.count": str(pool.gpusPerNode),
        "nvidia.com/gpu.family": _family(pool.gpuProduct),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if _family(pool.gpuProduct) in ("ampere", "hopper") else "false",
        # GFD labels the strategy on every node under the operator's default (single), MIG or not; the
        # operator's default layout on MIG-capable GPUs is all-disabled.
        "nvidia.com/mig.strategy": "single",
        **({"nvidia.com/mig.config": "all-disabled"} if _family(pool.gpuProduct) in ("ampere", "hopper") else {}),
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gpu.deploy.driver": "true" if operator_owned else "pre-installed",
        **driver_labels(driver),
    }
    annotations: dict[str, str] = {}
    node_spec: Obj = {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                                  "effect": "NoSchedule"}]}
    if spec.cluster.cloud == Cloud.AKS:
        assert spec.cluster.aks is not None
        node_labels["kubernetes.azure.com/agentpool"] = pool.cloud_name(generation)
        node_labels["kubernetes.azure.com/cluster"] = (f"MC_{spec.cluster.aks.resourceGroup}_"
                                                       f"{spec.cluster.aks.clusterName}_{AKS_LOCATION}")
        image = generation.nodeImageVersion if generation is not None and generation.nodeImageVersion else None
        node_labels["kubernetes.azure.com/node-image-version"] = AKS_IMAGE + (image or AKS_DEFAULT_IMAGE_VERSION)
        node_labels["topology.kubernetes.io/region"] = AKS_LOCATION
        node_labels["node.kubernetes.io/instance-type"] = pool.aks.vmSize if pool.aks else "unknown"
        node_spec["providerID"] = (f"azure:///subscriptions/0000/resourceGroups/mc/providers/Microsoft.Compute/"
                                   f"virtualMachineScaleSets/aks-{pool.cloud_name(generation)}-12345678-vmss/"
                                   f"virtualMachines/{index}")
    elif spec.cluster.cloud == Cloud.EKS:
        assert spec.cluster.eks is not None
        region = spec.cluster.eks.region
        zone = f"{region}{'abc'[index % 3]}"
        node_labels["eks.amazonaws.com/nodegroup"] = pool.cloud_name(generation)
        node_labels["topology.kubernetes.io/region"] = region
        node_labels["topology.kubernetes.io/zone"] = zone
        node_spec["providerID"] = f"aws:///{zone}/i-0{_short_hash(name)}{index:011x}"
        node_labels["node.kubernetes.io/instance-type"] = (pool.eks.instanceTypes or ["p5.48xlarge"])[0] if pool.eks else "unknown"
    if operator_owned:
        node_labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
        annotations["nvidia.com/gpu-driver-upgrade-enabled"] = "true"
        if spec.gpuOperator.useNvidiaDriverCrd:
            node_labels["nvidia.com/gpu-operator.driver.owner"] = f"gpu-{kubernetes_name(pool.name)}"
    gpus = str(pool.gpusPerNode)
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels, "annotations": annotations},
        "spec": node_spec,
        "status": {
            "capacity": {"cpu": "40", "memory": "330000000Ki", "nvidia.com/gpu": gpus, "pods": "110"},
            "allocatable": {"cpu": "39", "memory": "320000000Ki", "nvidia.com/gpu": gpus, "pods": "110"},
            "conditions": [ready_condition(True)],
            "nodeInfo": {"kernelVersion": kernel, "osImage": os_image(pool), "architecture": "amd64",
                         "containerRuntimeVersion": "containerd://1.7.27", "kubeletVersion": "v1.33.5"},
        },
    }


def ready_condition(ready: bool, at: float | None = None) -> Obj:
    """The node's Ready condition as the kubelet (or, once it stops posting, the node controller) writes it."""
    when = datetime.fromtimestamp(time.time() if at is None else at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "Ready", "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown", "lastTransitionTime": when}


def pod(name: str, namespace: str, node: str, pod_labels: dict[str, str], containers: list[Obj],
        volumes: list[Obj] | None = None, owner: tuple[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": pod_labels}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": "u",
                                    "controller": True}]
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": containers, "volumes": volumes or []},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def model_container(model: Model) -> Obj:
    gpus = {"nvidia.com/gpu": str(model.gpusPerReplica)}
    return {
        "name": "server",
        "image": model.image,
        "resources": {"requests": dict(gpus), "limits": dict(gpus)},
        # The engine's own health route, which answers only once the model is loaded (fleetspec/serving.py).
        "readinessProbe": {"httpGet": {"path": "/v2/health/ready" if "triton" in model.image else "/health",
                                       "port": 8000}, "periodSeconds": 10},
        "volumeMounts": [{"name": "weights", "mountPath": "/models"}],
        # SGLang exports its metrics (which `watch` reads) only with --enable-metrics (checks/disruption.py).
        **({"args": ["--enable-metrics"]} if "sglang" in model.image else {}),
    }


def model_volumes(model: Model) -> list[Obj]:
    return [{"name": "weights", "persistentVolumeClaim": {"claimName": f"{model.name}-weights"}}]


def model_deployment(model: Model) -> Obj:
    return {
        "kind": "Deployment",
        "metadata": {"name": model.name, "namespace": model.namespace, "labels": dict(model.matchLabels)},
        "spec": {
            "replicas": model.replicas,
            "selector": {"matchLabels": dict(model.matchLabels)},
            "template": {"metadata": {"labels": dict(model.matchLabels)},
                         "spec": {"containers": [model_container(model)], "volumes": model_volumes(model)}},
        },
    }


def _short_hash(text: str, length: int = 5) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _node_suffix(node: str) -> str:
    """A per-node pod's suffix: long enough that 10,000 nodes never collide (5 hex digits did at 2,000)."""
    return _short_hash(node, 10)


def seed(fake: FakeKube, spec: FleetSpec, *, filler_pods_per_node: int = 0) -> dict[str, list[str]]:
    """Fill ``fake`` with the stack's cluster in its steady state before a rollout; returns nodes per pool."""
    op = spec.gpuOperator
    operator_owned = spec.driver.owner == DriverOwner.OPERATOR
    nodes: dict[str, list[str]] = {}
    for pool in spec.nodePools:
        nodes[pool.name] = []
        generations: list[Generation | None] = list(pool.live_generations) if pool.generations else [None]
        for generation in generations:
            nodes[pool.name] += add_generation_nodes(fake, spec, pool, generation)

    fake.add(identity_record(spec))
    fake.add({"kind": "Deployment", "metadata": {"name": "gpu-operator", "namespace": op.namespace,
                                                 "labels": {"app": "gpu-operator"}},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gpu-operator"}},
                       "template": {"metadata": {"labels": {"app": "gpu-operator"}}, "spec": {"containers": [
                           {"name": "gpu-operator", "image": f"nvcr.io/nvidia/gpu-operator:{op.chartVersion}"}]}}}})
    # The chart's ClusterPolicy with the stack's driver settings patched in.
    driver: Obj = {"enabled": False} if not operator_owned else {
        "enabled": True, "repository": op.driverRepository, "image": "driver", "version": spec.driver.version,
        "usePrecompiled": op.usePrecompiled, "kernelModuleType": op.kernelModuleType,
        "useNvidiaDriverCRD": op.useNvidiaDriverCrd,
        "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
                          "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
                          "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
                          "waitForCompletion": {"timeoutSeconds": 0}},
    }
    fake.add({"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
              "spec": {"driver": driver, "toolkit": {"enabled": True}, "devicePlugin": {"enabled": True},
                       "operator": {}, "daemonsets": {}, "dcgm": {"enabled": True},
                       "dcgmExporter": {"enabled": True}, "gfd": {"enabled": True},
                       "nodeStatusExporter": {"enabled": False}},
              "status": {"state": "ready", "namespace": op.namespace}})
    if op.dcgmExporterVersion is not None:  # the operator runs the DCGM Exporter the stack declares
        exporter_labels = {"app": "nvidia-dcgm-exporter"}
        fake.add({"kind": "DaemonSet", "metadata": {"name": "nvidia-dcgm-exporter", "namespace": op.namespace,
                                                   "labels": exporter_labels},
                  "spec": {"selector": {"matchLabels": exporter_labels}, "template": {
                      "metadata": {"labels": exporter_labels}, "spec": {"containers": [
                          {"name": "nvidia-dcgm-exporter",
                           "image": f"nvcr.io/nvidia/k8s/dcgm-exporter:{op.dcgmExporterVersion}"}]}}}})

    for pool in spec.nodePools:
        ds_name = "nvidia-driver-daemonset"
        if operator_owned and op.useNvidiaDriverCrd:
            nvidia_driver = fake.add(nvidia_driver_object(spec, pool))
            driver_name = nvidia_driver["metadata"]["name"]
            ds_name = f"nvidia-gpu-driver-ubuntu22.04-{_short_hash(driver_name)}"
        if operator_owned:
            ds_labels = {"app": ds_name, "app.kubernetes.io/component": "nvidia-driver",
                         "nvidia.com/precompiled": str(op.usePrecompiled).lower()}
            if (op.namespace, ds_name) not in fake.store["daemonsets"]:
                image = f"{op.driverRepository}/driver:{current_driver(spec)}-ubuntu22.04"
                fake.add({"kind": "DaemonSet", "metadata": {"name": ds_name, "namespace": op.namespace,
                                                           "labels": ds_labels},
                          "spec": {"selector": {"matchLabels": {"app": ds_name}},
                                   "updateStrategy": {"type": "OnDelete"},
                                   "template": {"metadata": {"labels": ds_labels}, "spec": {"containers": [
                                       {"name": "nvidia-driver-ctr", "image": image}]}}}})
            for node in nodes[pool.name]:
                fake.add(pod(f"{ds_name}-{_node_suffix(node)}", op.namespace, node, ds_labels,
                             [{"name": "nvidia-driver-ctr",
                               "image": f"{op.driverRepository}/driver:{current_driver(spec)}-ubuntu22.04"}],
                             owner=("DaemonSet", ds_name)))
        for node in nodes[pool.name]:
            fake.add(pod(f"nvidia-operator-validator-{_node_suffix(node)}", op.namespace, node,
                         {"app": "nvidia-operator-validator", "app.kubernetes.io/part-of": "gpu-operator"},
                         [{"name": "nvidia-operator-validator", "image": "nvcr.io/nvidia/gpu-operator:validator"}],
                         owner=("DaemonSet", "nvidia-operator-validator")))
            for filler in range(filler_pods_per_node):
                fake.add(pod(f"agent-{filler}-{_node_suffix(node)}", "kube-system", node, {"app": f"agent-{filler}"},
                             [{"name": "agent", "image": "registry.k8s.io/pause:3.10"}],
                             owner=("DaemonSet", f"agent-{filler}")))

    for model in spec.models:
        fake.add(model_deployment(model))
        fake.add({"kind": "PodDisruptionBudget",
                  "metadata": {"name": f"{model.name}-pdb", "namespace": model.namespace},
                  "spec": {"minAvailable": model.minAvailable, "selector": {"matchLabels": dict(model.matchLabels)}}})
        placements = _place(spec, model, nodes)
        for replica, node in enumerate(placements):
            fake.add(pod(f"{model.name}-7d9f8c-{replica:03d}", model.namespace, node, dict(model.matchLabels),
                         [model_container(model)], model_volumes(model), owner=("ReplicaSet", f"{model.name}-7d9f8c")))
    return nodes


def identity_record(spec: FleetSpec, cluster: str | None = None) -> Obj:
    """The cluster-identity ConfigMap the stack's `pulumi up` writes, spelled out here (not by the
    builder under test); ``cluster`` names another cluster in it."""
    data = {"cluster": cluster or spec.cluster.name, "cloud": spec.cluster.cloud.value, "stage": spec.stage.value}
    if spec.cluster.aks is not None:
        data.update(aksResourceGroup=spec.cluster.aks.resourceGroup, aksClusterName=spec.cluster.aks.clusterName)
    if spec.cluster.eks is not None:
        data.update(eksClusterName=spec.cluster.eks.clusterName, eksRegion=spec.cluster.eks.region)
    return {"kind": "ConfigMap",
            "metadata": {"name": f"gpu-driver-upgrade-{spec.stage.value}", "namespace": "kube-system",
                         "labels": {"gpu-driver-upgrade.io/record": "cluster-identity"}},
            "data": data}


def _place(spec: FleetSpec, model: Model, nodes: dict[str, list[str]]) -> list[str]:
    """Spread the replicas over the model's pools, one node after the other (by GPUs, not exactly)."""
    candidates = [n for pool in model.nodePools for n in nodes.get(pool, [])]
    return [candidates[i % len(candidates)] for i in range(model.replicas)] if candidates else []


# ---------------------------------------------------------------- generations (image-owned pools)


def add_generation_nodes(fake: FakeKube, spec: FleetSpec, pool: NodePool, generation: Generation | None,
                         count: int | None = None, *, driver: str | None = None) -> list[str]:
    """``count`` (default ``nodeCount``) nodes of ``generation``'s node group joined the cluster; ``driver``
    overrides what GFD reports (a wrong AMI). Returns their names."""
    names = []
    for index in range(pool.nodeCount if count is None else count):
        node = gpu_node(spec, pool, index, generation)
        if driver is not None:
            node["metadata"]["labels"].update(driver_labels(driver))
        names.append(fake.add(node)["metadata"]["name"])
    return names


def generation_nodes(fake: FakeKube, pool: str, generation: int) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects("nodes")
                  if n["metadata"]["labels"].get("gpu-driver-upgrade.io/pool") == pool
                  and n["metadata"]["labels"].get("gpu-driver-upgrade.io/generation") == str(generation))


def remove_generation_nodes(fake: FakeKube, pool: str, generation: int) -> list[str]:
    """The cloud deleted the generation's node group: its nodes are gone. Returns their names."""
    names = generation_nodes(fake, pool, generation)
    for name in names:
        fake.remove("nodes", name)
    return names


def set_node_ready(fake: FakeKube, node: str, ready: bool, at: float | None = None) -> None:
    """The node's Ready condition flips at ``at`` (default now)."""
    fake.update("nodes", node, {"status": {"conditions": [ready_condition(ready, at)]}})


# ---------------------------------------------------------------- moving through the upgrade


OPERATOR_MANAGER = "gpu-operator"


def move_node(fake: FakeKube, node: str, state: str, at: float | None = None, *, event: bool = True,
              bracketed: bool = False) -> None:
    """What the upgrade controller does on a transition: the state label (recorded in managedFields as
    the operator's, at ``at``), and a ``GPUDriverUpgrade`` event on the node unless ``event`` is False
    (events expire after about an hour). Current k8s-operator-libs write the state bare; ``bracketed``
    gives the "[state]" form of older releases and the docs."""
    at = time.time() if at is None else at
    when = datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    fake.update("nodes", node, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": state}}}, manager=OPERATOR_MANAGER,
                at=at)
    if not event:
        return
    count = len(fake.store["events"])
    shown = f"[{state}]" if bracketed else state
    fake.add({"kind": "Event", "metadata": {"name": f"{node}.{count:08x}", "namespace": "default"},
              "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"},
              "reason": "GPUDriverUpgrade", "type": "Normal", "lastTimestamp": when, "firstTimestamp": when,
              "message": f"Successfully updated node state label to {shown}",
              "source": {"component": "nvidia-gpu-operator"}})


def finish_upgrade(fake: FakeKube, node: str, version: str, at: float | None = None) -> None:
    """The node came back on ``version``: GFD relabels the driver, the controller marks it upgrade-done."""
    fake.update("nodes", node, {"metadata": {"labels": driver_labels(version)}})
    move_node(fake, node, "upgrade-done", at)


def set_pod_ready(fake: FakeKube, namespace: str, name: str, ready: bool) -> None:
    fake.update("pods", name, {"status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}},
                namespace)


def pods_of(fake: FakeKube, namespace: str, app_labels: dict[str, str]) -> list[str]:
    return [p["metadata"]["name"] for p in fake.objects("pods") if p["metadata"]["namespace"] == namespace
            and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in app_labels.items())]
