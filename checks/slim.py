"""The fields the live verbs read of each large kind, and nothing else: a LIST of 80,000 pods decoded whole is most of
a gigabyte of dicts (managedFields, env, volume mounts, tolerations, container statuses...), of which the checks
read a few keys.

Each shape is a ``TypedDict`` that msgspec decodes straight from the response bytes: keys the shape does not name
are skipped while parsing, and what comes out is the same plain dicts (camelCase keys) the checks read through
:mod:`checks.objects`, only smaller. A key a shape leaves out reads as absent, so a check that starts reading a new
field must add it here (tests/checks read every check through the adapter, against the fake API, to catch that).
Leaves are ``Any``: the API server validates types, and a check must not fail on what someone wrote by hand.

Small kinds (ClusterPolicy, NVIDIADriver, ConfigMap, Event) are read whole.
"""

from __future__ import annotations

from typing import Any, TypedDict

FieldsV1 = TypedDict("FieldsV1", {"f:metadata": "dict[str, Any] | None"}, total=False)


class ManagedField(TypedDict, total=False):
    manager: Any
    operation: Any
    time: Any
    apiVersion: Any
    fieldsType: Any
    fieldsV1: FieldsV1 | None


class Metadata(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    labels: dict[str, Any] | None
    annotations: dict[str, Any] | None
    ownerReferences: list[Any] | None


class NodeMetadata(Metadata, total=False):
    managedFields: list[ManagedField] | None  # when the operator wrote the state label (checks.progress)


class Container(TypedDict, total=False):
    name: Any
    image: Any
    resources: Any
    readinessProbe: Any
    startupProbe: Any  # gates readiness until it passes (readiness-probe)
    command: Any  # SGLang's --enable-metrics (model-metrics)
    args: Any


class Volume(TypedDict, total=False):
    name: Any
    persistentVolumeClaim: Any
    hostPath: Any
    ephemeral: Any
    emptyDir: Any


class PodSpec(TypedDict, total=False):
    nodeName: Any
    nodeSelector: Any  # a precompiled driver DaemonSet's kernel (kernel-precompiled)
    containers: list[Container] | None
    volumes: list[Volume] | None


class ContainerStatus(TypedDict, total=False):
    name: Any
    restartCount: Any
    lastState: Any  # terminated.reason: OOMKilled


class PodStatus(TypedDict, total=False):
    phase: Any
    conditions: list[Any] | None
    startTime: Any
    podIP: Any  # a DCGM Exporter pod's, which its series' instance label names (verify)
    containerStatuses: list[ContainerStatus] | None  # restarts and why a container last ended (model-restarts)


class Pod(TypedDict, total=False):
    metadata: Metadata | None
    spec: PodSpec | None
    status: PodStatus | None


class NodeStatus(TypedDict, total=False):
    allocatable: Any
    capacity: Any
    conditions: list[Any] | None
    nodeInfo: Any  # not images, addresses, volumesAttached


class Node(TypedDict, total=False):
    metadata: NodeMetadata | None
    spec: Any  # unschedulable, taints, providerID
    status: NodeStatus | None


class TemplateMetadata(TypedDict, total=False):
    labels: dict[str, Any] | None
    annotations: dict[str, Any] | None


class Template(TypedDict, total=False):
    metadata: TemplateMetadata | None
    spec: PodSpec | None


class WorkloadSpec(TypedDict, total=False):
    replicas: Any
    selector: Any
    updateStrategy: Any
    template: Template | None


class Workload(TypedDict, total=False):
    """Deployment and DaemonSet."""

    metadata: Metadata | None
    spec: WorkloadSpec | None
    status: Any


class Budget(TypedDict, total=False):
    """PodDisruptionBudget: small, read whole but for its metadata."""

    metadata: Metadata | None
    spec: Any
    status: Any


ListMeta = TypedDict("ListMeta", {"continue": "Any", "resourceVersion": "Any"}, total=False)


__all__ = ["Budget", "Container", "ContainerStatus", "ListMeta", "Metadata", "Node", "Pod", "Volume", "Workload"]
