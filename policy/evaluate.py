"""Run the pack's rules over a list of resources with a stage's enforcement config.

``gpu-rollout plan`` calls this on the resources the mocked program registered; the CrossGuard pack
runs the very same rule functions inside the engine. The config has the shape of a
``--policy-pack-config`` file: ``{"all": level, "<policy-id>": level | {"enforcementLevel": level, ...}}``;
an object without ``enforcementLevel`` leaves the level to ``all``, then to the policy's default, as the
engine does; its other keys are the policy's settings (``policy.metadata.PolicyConfig``), handed to its rule as
the CrossGuard pack hands it ``args.get_config()``. ``policy-advice`` (the pack's advice policy) may be ``advisory`` or ``disabled``; disabled,
no advice is shown here either.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from policy.facts import Resource, StackFacts
from policy.findings import Level
from policy.metadata import ENFORCEMENT_LEVEL
from policy.registry import ADVICE_POLICY_ID, REGISTRY, PolicyDef
from vocabulary.policy_ids import ALL_POLICIES
from engine_contracts import resource_facts as rf

POLICY_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcement: Level
    resource: str  # the resource's logical name, or "stack" for the stack as a whole
    message: str
    config_keys: tuple[str, ...] = ()  # what to edit in the stack file (docs/config.md paths)
    fix: str = ""  # the policy's remediation


def _level(value: Any, where: str) -> Level | None:
    """The level an entry sets; None for an object without ``enforcementLevel`` (it sets other config)."""
    if isinstance(value, Mapping):
        if "enforcementLevel" not in value:
            return None
        raw = value["enforcementLevel"]
    else:
        raw = value
    try:
        return Level(raw)
    except ValueError:
        choices = ", ".join(level.value for level in Level)
        raise ValueError(f"{where}: enforcement level {raw!r} is not one of {choices}") from None


def _resolve(policy_id: str, default: Level, config: Mapping[str, Any]) -> Level:
    """A policy's level: its own entry, else "all", else its default."""
    for key in (policy_id, ALL_POLICIES):
        if key in config:
            level = _level(config[key], key)
            if level is not None:
                return level
    return default


def enforcement(policy: PolicyDef, config: Mapping[str, Any]) -> Level:
    """A policy's level: its own entry, else "all", else its registered default."""
    return _resolve(policy.id, policy.level, config)


def settings_entry(policy_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A policy's settings in a pack config: its entry's keys but ``enforcementLevel`` (what the engine hands
    the policy as ``args.get_config()``); {} for an entry that is only a level, or none."""
    entry = config.get(policy_id)
    return {k: v for k, v in entry.items() if k != ENFORCEMENT_LEVEL} if isinstance(entry, Mapping) else {}


def advice_enforcement(config: Mapping[str, Any]) -> Level:
    """The level of the pack's advice policy (advisory unless the config disables it)."""
    return _resolve(ADVICE_POLICY_ID, Level.ADVISORY, config)


def check_config(config: Mapping[str, Any]) -> None:
    """Unknown policy ids are typos that would silently leave a policy at its default; advice must never
    block, so the advice policy may only be advisory or disabled (an explicit entry is needed when
    "all" is mandatory, since "all" sets the advice policy too); a configurable policy's settings must read
    (an unknown or malformed one names the policy and the setting)."""
    unknown = sorted(set(config) - set(REGISTRY) - {ALL_POLICIES, ADVICE_POLICY_ID})
    if unknown:
        raise ValueError(f"pack config names unknown policies: {', '.join(unknown)}")
    for key, value in config.items():
        _level(value, key)
        policy = REGISTRY.get(key)
        if policy is not None and policy.config is not None:
            try:
                policy.config.settings(value if isinstance(value, Mapping) else {})
            except ValueError as error:
                raise ValueError(f"pack config {key}: {error}") from None
    if advice_enforcement(config) not in (Level.ADVISORY, Level.DISABLED):
        raise ValueError(
            f"{ADVICE_POLICY_ID} would be {advice_enforcement(config).value}: advice must never block; set "
            f'"{ADVICE_POLICY_ID}": "advisory" (or "disabled")'
        )


def pack_config_dir(project_dir: Path | None) -> Path | None:
    """Where a project keeps its stages' pack configs: its own policy/ folder (a team's trustedKeys and levels
    live there, `gpu-rollout init --trust-key` writes them); None for the pack's folder this code came with
    (:func:`config_path` resolves it, the examples' configs included where asked for)."""
    own = project_dir / "policy" if project_dir is not None else None
    if own is None or not own.is_dir() or own.resolve() == POLICY_DIR.resolve():
        return None
    return own


# The example stacks' own pack configs: policy/examples/<stage>.json, read instead of policy/<stage>.json only
# where GPU_ROLLOUT_PACK_CONFIG_DIR names that folder (`make plan`, the tests, the example e2e runs): the example
# key's trust lives there, scoped to the example prod stacks, never in a config a team deploys with.
EXAMPLES_CONFIG_DIR = POLICY_DIR / "examples"
PACK_CONFIG_DIR_ENV = "GPU_ROLLOUT_PACK_CONFIG_DIR"


def config_path(stage: str, policy_dir: Path | None = None) -> Path:
    """The stage's pack config file: ``<policy_dir>/<stage>.json``; by default the file of that name in
    ``$GPU_ROLLOUT_PACK_CONFIG_DIR`` where it has one, else the pack's own (policy/<stage>.json)."""
    if policy_dir is not None:
        return policy_dir / f"{stage}.json"
    chosen = os.environ.get(PACK_CONFIG_DIR_ENV)
    if chosen:
        candidate = Path(chosen) if Path(chosen).is_absolute() else POLICY_DIR.parent / chosen
        if (candidate / f"{stage}.json").is_file():
            return candidate / f"{stage}.json"
    return POLICY_DIR / f"{stage}.json"


def load_config(stage: str | None, policy_dir: Path | None = None) -> dict[str, Any]:
    """The stage's pack config file (:func:`config_path`); the registry defaults when there is none."""
    if stage is None:
        return {}
    path = config_path(stage, policy_dir)
    if not path.is_file():
        return {}
    config: dict[str, Any] = json.loads(path.read_text())
    check_config(config)
    return config


def evaluate(resources: Sequence[Resource], config: Mapping[str, Any], now: datetime | None = None) -> list[Violation]:
    """Every finding of every enabled policy: violations at the policy's level, advice (which the pack
    reports through its advice policy) as advisory under the rule's own id. The stack's facts are read
    once and handed to every rule; ``now`` is the moment they are judged at (default: the clock)."""
    violations = []
    show_advice = advice_enforcement(config) != Level.DISABLED
    stack = StackFacts(resources, now)
    for policy in REGISTRY.values():
        level = enforcement(policy, config)
        if level == Level.DISABLED:
            continue
        for finding in policy.findings(stack, settings_entry(policy.id, config)):
            if finding.advisory and not show_advice:
                continue
            effective = Level.ADVISORY if finding.advisory else level
            where = finding.resource.name if finding.resource is not None else "stack"
            violations.append(Violation(policy.id, effective, where, finding.message, policy.config_keys,
                                        policy.remediation))
    return violations


def from_registered(registered: Iterable[Any]) -> list[Resource]:
    """Resources as ``preview.run`` records them: custom resources with their inputs, and the component
    holding the stack's last deployment with the outputs it registered (what the engine shows a stack
    policy of it). Other components carry nothing a rule reads."""
    return [
        Resource(r.type, r.name, r.outputs if r.type == rf.PREVIOUS_DEPLOYMENT_COMPONENT else r.inputs, r.urn)
        for r in registered if r.custom or r.type == rf.PREVIOUS_DEPLOYMENT_COMPONENT
    ]


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.enforcement == Level.MANDATORY]
