"""Run the pack's rules over a list of resources with a stage's enforcement config.

``gpu-rollout plan`` calls this on the resources the mocked program registered; the CrossGuard pack
runs the very same rule functions inside the engine. The config has the shape of a
``--policy-pack-config`` file: ``{"all": level, "<policy-id>": level | {"enforcementLevel": level}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.facts import Resource
from policy.findings import Level
from policy.registry import REGISTRY, PolicyDef

POLICY_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcement: Level
    resource: str  # the resource's logical name, or "stack" for the stack as a whole
    message: str

    def as_json(self) -> dict[str, str]:
        return {"policy": self.policy, "enforcement": self.enforcement.value, "resource": self.resource,
                "message": self.message}


def _level(value: Any, where: str) -> Level:
    raw = value.get("enforcementLevel") if isinstance(value, Mapping) else value
    try:
        return Level(raw)
    except ValueError:
        choices = ", ".join(level.value for level in Level)
        raise ValueError(f"{where}: enforcement level {raw!r} is not one of {choices}") from None


def enforcement(policy: PolicyDef, config: Mapping[str, Any]) -> Level:
    """A policy's level: its own entry, else "all", else its registered default."""
    if policy.id in config:
        return _level(config[policy.id], policy.id)
    if "all" in config:
        return _level(config["all"], "all")
    return policy.level


def check_config(config: Mapping[str, Any]) -> None:
    """Unknown policy ids are typos that would silently leave a policy at its default."""
    unknown = sorted(set(config) - set(REGISTRY) - {"all"})
    if unknown:
        raise ValueError(f"pack config names unknown policies: {', '.join(unknown)}")
    for key, value in config.items():
        _level(value, key)


def load_config(stage: str | None) -> dict[str, Any]:
    """The stage's pack config file (policy/<stage>.json); the registry defaults when there is none."""
    path = POLICY_DIR / f"{stage}.json"
    if stage is None or not path.is_file():
        return {}
    config = json.loads(path.read_text())
    check_config(config)
    return config


def evaluate(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Violation]:
    violations = []
    for policy in REGISTRY.values():
        level = enforcement(policy, config)
        if level == Level.DISABLED:
            continue
        for finding in policy.findings(resources):
            effective = Level.ADVISORY if finding.advisory else level
            where = finding.resource.name if finding.resource is not None else "stack"
            violations.append(Violation(policy.id, effective, where, finding.message))
    return violations


def from_registered(registered: Iterable[Any]) -> list[Resource]:
    """Resources as ``preview.run`` records them (custom resources only: components carry no props)."""
    return [Resource(r.type, r.name, r.inputs, r.urn) for r in registered if r.custom]


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.enforcement == Level.MANDATORY]
