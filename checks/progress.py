"""What both watches share: triggers, when a node was first seen in a state, timestamps, and the
declared models against their minAvailable (:mod:`checks.watch` for operator-owned drivers,
:mod:`checks.generations` for image-owned ones).

A model's available replicas are its pods, counted whatever owns them (Deployment, StatefulSet,
LeaderWorkerSet, KServe, a bare pod): the pods in the model's namespace that match its ``matchLabels``
and are Ready (condition ``Ready=True``) and not terminating (no ``deletionTimestamp``), as the
disruption controller counts healthy pods for a PDB. One LIST per model, by label selector.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from checks import kube as k
from checks.objects import Obj, meta, namespaced_name, status_of
from gpu_knowledge import capacity
from fleetspec.model import FleetSpec, Model
from vocabulary.triggers import TriggerKind


@dataclass(frozen=True)
class Trigger:
    kind: TriggerKind  # upgrade-failed | below-min-available | stuck (operator); below-min-available | not-ready (image)
    subject: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "message": self.message}


@dataclass
class StateTracker:
    """When this watch first saw each node in its current state (survives across polls)."""

    first_seen: dict[str, tuple[str, float]] = field(default_factory=dict)

    def since(self, node: str, state: str, now: float) -> float:
        seen = self.first_seen.get(node)
        if seen is None or seen[0] != state:
            self.first_seen[node] = (state, now)
            return now
        return seen[1]


def epoch(text: str | None) -> float | None:
    """An RFC 3339 timestamp as epoch seconds; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def label_written_at(node: Obj, key: str) -> float | None:
    """``time`` of the managedFields entry that owns label ``key``: the label is at least this old."""
    field_key = f"f:{key}"
    for entry in meta(node).get("managedFields") or []:
        owned = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        if field_key in owned:
            return epoch(entry.get("time"))
    return None


def model_key(model: Model) -> str:
    return f"{model.namespace}/{model.name}"


def model_selector(model: Model) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(model.matchLabels.items()))


def pod_ready(pod: Obj) -> bool:
    """Ready=True and not terminating: a replica that serves."""
    if meta(pod).get("deletionTimestamp"):
        return False
    conditions = status_of(pod).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def list_model_pods(kube: k.Kube, spec: FleetSpec) -> dict[str, list[Obj]]:
    """Each declared model's pods (its matchLabels in its namespace), whatever owns them: one LIST per model."""
    return {model_key(m): kube.list(k.PODS, namespace=m.namespace, label_selector=model_selector(m))
            for m in spec.models}


def model_rows(spec: FleetSpec, deployments: list[Obj],
               pods: dict[str, list[Obj]]) -> tuple[list[dict[str, Any]], list[Trigger]]:
    """Each declared model's available replicas (its Ready pods) against its minAvailable, and a trigger
    where it is below. ``replicas`` is the same-named Deployment's where there is one, else the stack's."""
    by_key = {namespaced_name(d): d for d in deployments}
    models, triggers = [], []
    for model in spec.models:
        key = model_key(model)
        deployment = by_key.get(key)
        mine = pods.get(key, [])
        available = sum(pod_ready(p) for p in mine)
        replicas = int(((deployment or {}).get("spec") or {}).get("replicas") or model.replicas)
        minimum = capacity.min_available_replicas(model.minAvailable, replicas)
        models.append({"model": key, "available": available, "minAvailable": minimum, "replicas": replicas})
        if available < minimum:
            why = "" if mine else f" (no pod matches {model_selector(model)} in namespace {model.namespace})"
            triggers.append(Trigger(TriggerKind.BELOW_MIN_AVAILABLE, key, f"model {key} has {available} available "
                                    f"replica(s), below its minAvailable {minimum}{why}"))
    return models, triggers
