"""What both watches share: triggers, when a node was first seen in a state, timestamps, and the
declared models against their minAvailable (:mod:`checks.watch` for operator-owned drivers,
:mod:`checks.generations` for image-owned ones)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from checks.inventory import meta, name_of
from spec import capacity
from spec.model import FleetSpec


@dataclass(frozen=True)
class Trigger:
    kind: str  # upgrade-failed | below-min-available | stuck (operator); below-min-available | not-ready (image)
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


def model_rows(spec: FleetSpec, deployments: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Trigger]]:
    """Each declared model's available replicas against its minAvailable, and a trigger where it is below."""
    by_key = {f"{meta(d).get('namespace')}/{name_of(d)}": d for d in deployments}
    models, triggers = [], []
    for model in spec.models:
        key = f"{model.namespace}/{model.name}"
        deployment = by_key.get(key)
        status = (deployment or {}).get("status") or {}
        available = int(status.get("availableReplicas") or 0)
        replicas = int(((deployment or {}).get("spec") or {}).get("replicas") or model.replicas)
        minimum = capacity.min_available_replicas(model.minAvailable, replicas)
        models.append({"model": key, "available": available, "minAvailable": minimum, "replicas": replicas})
        if available < minimum:
            triggers.append(Trigger("below-min-available", key, f"model {key} has {available} available "
                                    f"replica(s), below its minAvailable {minimum}" +
                                    ("" if deployment else " (Deployment not found)")))
    return models, triggers
