"""Reading Kubernetes objects as the API returns them (JSON dicts, camelCase keys): metadata, labels,
label selectors, containers and what they request. Nothing here knows a check, a pool or a stack.

A missing or null field reads as empty, never as an error: the API omits empty fields, and a check must
not crash on an object someone else created by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_knowledge import labels

Obj = dict[str, Any]  # a Kubernetes object (or a part of one) as the API's JSON


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def namespace_of(obj: Obj) -> str | None:
    return meta(obj).get("namespace")


def namespaced_name(obj: Obj) -> str:
    """``namespace/name``, how messages and results name a namespaced object."""
    return f"{namespace_of(obj)}/{name_of(obj)}"


def labels_of(obj: Obj) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def spec_of(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def status_of(obj: Obj) -> Obj:
    return obj.get("status") or {}


def selector_matches(selector: Mapping[str, Any] | None, obj_labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against a label map (empty selector matches everything)."""
    selector = selector or {}
    if any(obj_labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and obj_labels.get(key) not in values:
            return False
        if op == "NotIn" and key in obj_labels and obj_labels[key] in values:
            return False
        if op == "Exists" and key not in obj_labels:
            return False
        if op == "DoesNotExist" and key in obj_labels:
            return False
    return True


def equality_selector(text: str) -> dict[str, str] | None:
    """A label selector string of equality terms (``key=value,key2==value2``, as the operator's docs write
    ``waitForCompletion.podSelector``) as matchLabels; None where it uses set syntax (``in``, ``notin``, ``!=``, a
    bare key), which these checks do not judge; {} for an empty one."""
    terms: dict[str, str] = {}
    for term in (t.strip() for t in text.split(",") if t.strip()):
        key, sep, value = term.replace("==", "=").partition("=")
        if not sep or "!" in key or " " in key.strip() or "(" in value:
            return None
        terms[key.strip()] = value.strip()
    return terms


def owned_by(obj: Obj, kind: str) -> str | None:
    """The name of the object's controller (or first owner) of ``kind``; None where none is."""
    for owner in meta(obj).get("ownerReferences") or []:
        if owner.get("kind") == kind:
            return str(owner.get("name") or "")
    return None


def node_selector_matches(node_selector: Mapping[str, str], obj_labels: Mapping[str, str]) -> bool:
    """A plain ``nodeSelector`` map (every key equal) against a node's labels."""
    return selector_matches({"matchLabels": node_selector}, obj_labels)


def pod_containers(pod: Obj) -> list[Obj]:
    return list(spec_of(pod).get("containers") or [])


def template_containers(workload: Obj) -> list[Obj]:
    """The containers of a workload's pod template (Deployment, DaemonSet, StatefulSet)."""
    return list(spec_of(spec_of(workload).get("template") or {}).get("containers") or [])


def template_labels(workload: Obj) -> dict[str, str]:
    return dict(meta(spec_of(workload).get("template") or {}).get("labels") or {})


def gpu_request(containers: list[Obj]) -> int:
    """``nvidia.com/gpu`` a pod (or a pod template) asks for: requests, else limits."""
    total = 0
    for container in containers:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(labels.GPU_RESOURCE) or (resources.get("limits") or {}).get(
            labels.GPU_RESOURCE
        )
        total += int(value or 0)
    return total
