"""Pure builders: the Kubernetes objects, labels and values the components send, from a FleetSpec.

No Pulumi here. Components wrap these in resources; policy rules and tests read the same shapes, so
what is reviewed in a plan is exactly what `pulumi up` sends.
"""

from __future__ import annotations

import json
from typing import Any

from spec import labels
from spec.model import PROJECT, Cloud, DriverOwner, FleetSpec, Generation, Model, NodePool, kubernetes_name

CLUSTER_POLICY_NAME = "cluster-policy"
OPERATOR_CHART = "gpu-operator"
OPERATOR_CHART_REPO = "https://helm.ngc.nvidia.com/nvidia"
NVIDIA_DRIVER_API = "nvidia.com/v1alpha1"
CLUSTER_POLICY_API = "nvidia.com/v1"


# ---------------------------------------------------------------- node pools


def pool_labels(spec: FleetSpec, pool: NodePool, generation: Generation | None = None) -> dict[str, str]:
    """Node labels every node of the pool carries; a held pool also carries the operator's skip label."""
    node_labels = {
        labels.POOL: pool.name,
        labels.ROLE: pool.role,
        labels.WAVE: str(pool.rollout.wave),
    }
    if generation is not None:
        node_labels[labels.GENERATION] = str(generation.id)
        node_labels[labels.POOL_IMAGE_DRIVER] = generation.driverVersion
    if spec.pool_held(pool):
        node_labels[labels.SKIP_UPGRADE] = "true"
    node_labels.update(pool_fact_labels(spec, pool))
    return node_labels


def fabric_manager_source(spec: FleetSpec, pool: NodePool) -> str:
    """Where the pool's Fabric Manager comes from: as configured, else with whoever owns the driver."""
    if pool.fabricManager is not None:
        return pool.fabricManager
    return "driver-container" if spec.driver.owner == DriverOwner.OPERATOR else "image"


def pool_fact_labels(spec: FleetSpec, pool: NodePool) -> dict[str, str]:
    """The pool's declared hardware as node labels: what the policy pack checks compatibility against."""
    facts = {
        labels.POOL_GPU_PRODUCT: pool.gpuProduct,
        labels.POOL_GPUS_PER_NODE: str(pool.gpusPerNode),
        labels.POOL_NVSWITCH: "true" if pool.nvswitch else "false",
    }
    declared_os = declared_pool_os(pool)
    if declared_os is not None:
        facts[labels.POOL_OS] = declared_os
    if pool.nvswitch:
        facts[labels.POOL_FABRIC_MANAGER] = fabric_manager_source(spec, pool)
        if pool.fabricManagerVersion is not None:
            facts[labels.POOL_FABRIC_MANAGER_VERSION] = pool.fabricManagerVersion
    return facts


def declared_pool_os(pool: NodePool) -> str | None:
    """The OS a pool declares where no cloud field says it: a custom AMI's launch template, an existing pool."""
    if pool.eks is not None and pool.eks.launchTemplate is not None:
        return pool.eks.launchTemplate.os
    if pool.existing is not None:
        return pool.existing.os
    return None


def driver_annotations(spec: FleetSpec, pool: NodePool | None = None) -> dict[str, str]:
    """Facts the policy pack needs on the operator's driver objects (ClusterPolicy, NVIDIADriver)."""
    notes = {
        labels.ANNOTATION_STAGE: spec.stage.value,
        labels.ANNOTATION_OPERATOR_VERSION: spec.gpuOperator.chartVersion,
        labels.ANNOTATION_TARGET_DRIVER: spec.driver.version,
    }
    if pool is not None:
        notes[labels.ANNOTATION_HELD] = "true" if spec.pool_held(pool) else "false"
    if spec.gpuOperator.batchJobSelectors:
        notes[labels.ANNOTATION_BATCH_SELECTORS] = "\n".join(spec.gpuOperator.batchJobSelectors)
    return notes


def gpu_taint() -> tuple[str, str, str]:
    return (labels.GPU_TAINT_KEY, labels.GPU_TAINT_VALUE, labels.GPU_TAINT_EFFECT)


def eks_ami_type(spec: FleetSpec, pool: NodePool) -> str | None:
    """AMI by driver owner: the NVIDIA AMI carries the driver; an operator-owned pool runs a custom Ubuntu AMI
    from its launch template, and EKS refuses an amiType beside a custom AMI (None: not sent)."""
    assert pool.eks is not None
    if pool.eks.amiType is not None:
        return pool.eks.amiType
    return "AL2023_x86_64_NVIDIA" if spec.driver.owner == DriverOwner.IMAGE else None


def aks_gpu_driver(spec: FleetSpec) -> str:
    """AKS gpuProfile.driver: "None" whenever the operator owns the driver (two drivers never mix)."""
    return "None" if spec.driver.owner == DriverOwner.OPERATOR else "Install"


def pool_generations(pool: NodePool) -> list[Generation | None]:
    """The cloud pools a pool renders to: one per live generation, or the pool itself."""
    return list(pool.live_generations) if pool.generations else [None]


# ---------------------------------------------------------------- GPU Operator


def _operator_ships_toolkit(spec: FleetSpec) -> bool:
    """The EKS NVIDIA AMIs ship the container toolkit; the operator must not install a second one."""
    if spec.driver.owner != DriverOwner.IMAGE or spec.cluster.cloud != Cloud.EKS:
        return True
    return not all((eks_ami_type(spec, p) or "").endswith("_NVIDIA") for p in spec.nodePools)


def _operator_ships_device_plugin(spec: FleetSpec) -> bool:
    """Bottlerocket's NVIDIA variant also ships the device plugin."""
    if spec.driver.owner != DriverOwner.IMAGE or spec.cluster.cloud != Cloud.EKS:
        return True
    return not all(eks_ami_type(spec, p) == "BOTTLEROCKET_x86_64_NVIDIA" for p in spec.nodePools)


def cluster_policy_spec(spec: FleetSpec) -> dict[str, Any]:
    """The part of ClusterPolicy.spec this project owns, spelled as the CRD spells it."""
    op = spec.gpuOperator
    if spec.driver.owner == DriverOwner.IMAGE:
        driver: dict[str, Any] = {"enabled": False}
    else:
        driver = {
            "enabled": True,
            "repository": op.driverRepository,
            "image": "driver",
            "version": spec.driver.version,
            "usePrecompiled": op.usePrecompiled,
            "kernelModuleType": op.kernelModuleType,
            "useNvidiaDriverCRD": op.useNvidiaDriverCrd,
            "upgradePolicy": op.upgradePolicy.as_crd(),
        }
    return {
        "driver": driver,
        "toolkit": {"enabled": _operator_ships_toolkit(spec)},
        "devicePlugin": {"enabled": _operator_ships_device_plugin(spec)},
    }


def helm_values(spec: FleetSpec) -> dict[str, Any]:
    """The same settings as chart values: the chart renames a few keys (gpuPodDeletion, nvidiaDriverCRD)."""
    crd = cluster_policy_spec(spec)
    driver = dict(crd["driver"])
    if driver.get("enabled"):
        driver["nvidiaDriverCRD"] = {
            "enabled": driver.pop("useNvidiaDriverCRD"),
            # From v26.7.0 the chart's default NVIDIADriver (spec.default: true) owns every GPU node no
            # per-pool NVIDIADriver selects, so no GPU node is left without a driver owner (NVIDIA's
            # migration guide). Before, it was an ordinary CR that overlapped the per-pool drivers.
            "deployDefaultCR": spec.gpuOperator.default_driver_is_fallback,
        }
        driver["upgradePolicy"] = spec.gpuOperator.upgradePolicy.as_helm_values()
    return {"driver": driver, "toolkit": crd["toolkit"], "devicePlugin": crd["devicePlugin"]}


def nvidia_driver_name(pool: NodePool) -> str:
    return f"gpu-{kubernetes_name(pool.name)}"


def driver_node_selector(pool: NodePool) -> dict[str, str]:
    """The nodes a pool's NVIDIADriver installs on: the project's pool label, which the cloud pool puts on
    every node, or on a ``cloud: existing`` cluster (no cloud pool of ours) the pool's declared selector."""
    if pool.existing is not None:
        return dict(pool.existing.nodeSelector)
    return {labels.POOL: pool.name}


def nvidia_driver_spec(spec: FleetSpec, pool: NodePool) -> dict[str, Any]:
    """One NVIDIADriver per operator-owned pool, selecting that pool's nodes only."""
    op = spec.gpuOperator
    body: dict[str, Any] = {
        "driverType": "gpu",
        "image": f"{op.driverRepository}/driver",
        "version": spec.pool_driver_version(pool),
        "usePrecompiled": op.usePrecompiled,
        "kernelModuleType": op.kernelModuleType,
        "nodeSelector": driver_node_selector(pool),
        "tolerations": [
            {"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": labels.GPU_TAINT_EFFECT},
        ],
    }
    if op.per_driver_upgrade_policy:
        # From v26.7.0 each NVIDIADriver rolls its own nodes by its own policy (its CRD default is
        # autoUpgrade: true, so the policy is always sent in full, false values included).
        body["default"] = False
        body["upgradePolicy"] = op.upgradePolicy.as_crd()
    return body


def nvidia_driver_labels(spec: FleetSpec, pool: NodePool) -> dict[str, str]:
    return {labels.POOL: pool.name, labels.ROLE: pool.role, labels.WAVE: str(pool.rollout.wave)}


# ---------------------------------------------------------------- disruption budgets


def pdb_name(model: Model) -> str:
    return f"{model.name}-pdb"


def pdb_metadata(spec: FleetSpec, model: Model) -> dict[str, Any]:
    """PDB metadata: the model's declared facts ride along as annotations so the policy pack sees them."""
    return {
        "name": pdb_name(model),
        "namespace": model.namespace,
        "labels": {labels.MODEL: model.name},
        "annotations": {
            labels.ANNOTATION_STAGE: spec.stage.value,
            labels.ANNOTATION_REPLICAS: str(model.replicas),
            labels.ANNOTATION_GPUS_PER_REPLICA: str(model.gpusPerReplica),
            labels.ANNOTATION_CUDA: model.cudaVersion,
            labels.ANNOTATION_IMAGE: model.image,
            labels.ANNOTATION_POOLS: ",".join(model.nodePools),
            labels.ANNOTATION_FORWARD_COMPAT: "true" if model.cudaForwardCompat else "false",
            **({labels.ANNOTATION_CHANGE_TICKET: spec.changeTicket} if spec.changeTicket else {}),
            # Stack-wide, so the policy pack sees the selectors in Helm mode too (a Release has no metadata).
            **(
                {labels.ANNOTATION_BATCH_SELECTORS: "\n".join(spec.gpuOperator.batchJobSelectors)}
                if spec.gpuOperator.batchJobSelectors
                else {}
            ),
        },
    }


def pdb_spec(model: Model) -> dict[str, Any]:
    return {"minAvailable": model.minAvailable, "selector": {"matchLabels": dict(model.matchLabels)}}


# ---------------------------------------------------------------- records the stack keeps in the cluster

RECORD_NAMESPACE = "kube-system"  # exists in every cluster, before any stack runs


def per_pool_drivers(spec: FleetSpec) -> str:
    """"true" when the operator's driver is owned per pool by NVIDIADrivers (useNvidiaDriverCRD)."""
    return "true" if spec.driver.owner == DriverOwner.OPERATOR and spec.gpuOperator.useNvidiaDriverCrd else "false"


def identity_name(spec: FleetSpec) -> str:
    """One identity record per stage, so a canary and a prod stack on one cluster never share it."""
    return f"{PROJECT}-{spec.stage.value}"


def identity_metadata(spec: FleetSpec) -> dict[str, Any]:
    return {
        "name": identity_name(spec),
        "namespace": RECORD_NAMESPACE,
        "labels": {labels.RECORD: labels.RECORD_CLUSTER_IDENTITY},
        "annotations": {labels.ANNOTATION_STAGE: spec.stage.value},
    }


def identity_data(spec: FleetSpec) -> dict[str, str]:
    """Which cluster this is, as the stack knows it; the live verbs refuse a cluster whose record differs."""
    data = {
        "cluster": spec.cluster.name,
        "cloud": spec.cluster.cloud.value,
        "stage": spec.stage.value,
        # What this deployment runs, read back next time as the previous deployment (transition rules).
        "operatorVersion": spec.gpuOperator.chartVersion,
        "perPoolDrivers": per_pool_drivers(spec),
    }
    if spec.cluster.aks is not None:
        data["aksResourceGroup"] = spec.cluster.aks.resourceGroup
        data["aksClusterName"] = spec.cluster.aks.clusterName
    if spec.cluster.eks is not None:
        data["eksClusterName"] = spec.cluster.eks.clusterName
        data["eksRegion"] = spec.cluster.eks.region
    return data


def pool_record_name(pool: NodePool) -> str:
    return f"{PROJECT}-pool-{kubernetes_name(pool.name)}"


def pool_record_metadata(spec: FleetSpec, pool: NodePool) -> dict[str, Any]:
    """A pool of a ``cloud: existing`` cluster: its declared facts and selector, where the policy pack sees them."""
    assert pool.existing is not None
    return {
        "name": pool_record_name(pool),
        "namespace": RECORD_NAMESPACE,
        "labels": {labels.RECORD: labels.RECORD_POOL, **pool_labels(spec, pool)},
        "annotations": {
            labels.ANNOTATION_STAGE: spec.stage.value,
            labels.ANNOTATION_NODE_SELECTOR: json.dumps(pool.existing.nodeSelector, sort_keys=True),
        },
    }


def pool_record_data(pool: NodePool) -> dict[str, str]:
    return {"nodeCount": str(pool.nodeCount)}


def eks_kubeconfig(cluster_name: str, region: str, endpoint: str, certificate_authority: str) -> dict[str, Any]:
    """A kubeconfig for one EKS cluster that authenticates with `aws eks get-token` (no token is stored)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority}}
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }
