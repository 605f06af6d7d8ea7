"""The promotion record (a ConfigMap of a prod stack): the canary attestations this deployment relies on.

The pack cannot read files or other stacks; the program can. So a prod stack with a ``promotion`` block
states, on a record the pack sees, what the gate needs: which stack is its canary and how long it must have
soaked, which drivers that canary stack runs (read through a StackReference), which drivers the project's
``attestations/`` folder holds an attestation for, and the text of the attestation of each driver its
released pools target, as read from the file. The rule (``canary-attested``) judges that text itself
(``engine_contracts.attestation``): a changed byte fails the digest there, not only in the program.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpu_knowledge import labels
from fleetspec.base import Stage
from engine_contracts.resource_facts.values import prop

CANARY_STACK = "canaryStack"
MIN_SOAK_HOURS = "minSoakHours"
CANARY_DRIVERS = "canaryDrivers"  # comma-separated; empty when the canary stack shows none
ATTESTED = "attested"  # comma-separated drivers with a file in attestations/
# One key, a JSON object driver -> the text of attestations/<driver>.json. Not a key per driver: in a preview
# the engine shows the pack the API server's dry-run of the apply, merged into the live object, where a key
# this deployment no longer sends (an attestation file removed) would still be there.
ATTESTATIONS = "attestations"
# The stack's waivers (promotion.waivers), a JSON object pool -> {accept: [differences], reason}; always sent, "{}"
# when none, for the same reason: a waiver removed must not linger in a preview.
WAIVERS = "waivers"
# promotion.runningToday, a JSON object {driver, reason}; always sent, "{}" when none declared (a declaration removed
# must not linger in a preview either).
RUNNING_TODAY = "runningToday"


@dataclass(frozen=True)
class WaiverFacts:
    """A prod pool's declared waiver: the differences from its canary pool the gate accepts, and why."""

    accept: frozenset[str]
    reason: str


@dataclass(frozen=True)
class RunningTodayFacts:
    """promotion.runningToday: the driver the team declares the fleet's pools run today, and how it knows."""

    driver: str
    reason: str


@dataclass(frozen=True)
class PromotionFacts:
    canary_stack: str | None
    min_soak_hours: float | None
    canary_drivers: frozenset[str] | None  # None: the record does not say (hand-edited)
    attested: frozenset[str] = frozenset()
    attestations: Mapping[str, str] = field(default_factory=dict)  # driver -> the file's text
    waivers: Mapping[str, WaiverFacts] = field(default_factory=dict)  # prod pool -> its waiver
    running_today: RunningTodayFacts | None = None  # the declared driver the fleet runs today, and why


def promotion_labels() -> dict[str, str]:
    return {labels.RECORD: labels.RECORD_PROMOTION}


def promotion_annotations(stage: Stage) -> dict[str, str]:
    return {labels.ANNOTATION_STAGE: stage.value}


def drivers_text(versions: Iterable[str]) -> str:
    return ",".join(sorted(set(versions)))


def read_drivers(text: Any) -> frozenset[str] | None:
    if not isinstance(text, str):
        return None
    return frozenset(v.strip() for v in text.split(",") if v.strip())


def promotion_data(
    canary_stack: str, min_soak_hours: float, canary_drivers: Any, attested: Iterable[str], texts: Mapping[str, str],
    waivers: Mapping[str, WaiverFacts] | None = None, running_today: RunningTodayFacts | None = None,
) -> dict[str, Any]:
    """The record's data; ``canary_drivers`` may be the program's Output of ``drivers_text``."""
    declared = {pool: {"accept": sorted(w.accept), "reason": w.reason} for pool, w in (waivers or {}).items()}
    return {
        CANARY_STACK: canary_stack,
        MIN_SOAK_HOURS: f"{min_soak_hours:g}",
        CANARY_DRIVERS: canary_drivers,
        ATTESTED: drivers_text(attested),
        ATTESTATIONS: json.dumps(dict(texts), sort_keys=True, ensure_ascii=False),
        WAIVERS: json.dumps(declared, sort_keys=True, ensure_ascii=False),
        RUNNING_TODAY: json.dumps({"driver": running_today.driver, "reason": running_today.reason}
                                  if running_today is not None else {}, sort_keys=True, ensure_ascii=False),
    }


def read_running_today(text: Any) -> RunningTodayFacts | None:
    """The record's declaration; a malformed one (hand-edited) reads as none, so it admits nothing."""
    try:
        found = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return None
    driver, reason = (found.get("driver"), found.get("reason")) if isinstance(found, dict) else (None, None)
    if isinstance(driver, str) and driver and isinstance(reason, str) and reason.strip():
        return RunningTodayFacts(driver, reason)
    return None


def read_waivers(text: Any) -> dict[str, WaiverFacts]:
    """The record's waivers; a malformed entry (hand-edited) is left out, so its difference is not accepted."""
    try:
        found = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    out: dict[str, WaiverFacts] = {}
    for pool, entry in (found.items() if isinstance(found, dict) else ()):
        accept, reason = (entry.get("accept"), entry.get("reason")) if isinstance(entry, dict) else (None, None)
        if isinstance(accept, list) and all(isinstance(a, str) for a in accept) and isinstance(reason, str) and reason:
            out[str(pool)] = WaiverFacts(frozenset(accept), reason)
    return out


def is_promotion_record(props: Mapping[str, Any]) -> bool:
    return bool(prop(props, "metadata", "labels", labels.RECORD) == labels.RECORD_PROMOTION)


def read_promotion(props: Mapping[str, Any]) -> PromotionFacts:
    data = props.get("data") or {}
    raw_hours = data.get(MIN_SOAK_HOURS)
    try:
        hours: float | None = None if raw_hours is None else float(raw_hours)
    except (TypeError, ValueError):
        hours = None
    stack = data.get(CANARY_STACK)
    try:
        found = json.loads(data.get(ATTESTATIONS) or "{}")
    except (TypeError, ValueError):
        found = {}
    texts = {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}
    return PromotionFacts(
        canary_stack=stack if isinstance(stack, str) and stack else None,
        min_soak_hours=hours,
        canary_drivers=read_drivers(data.get(CANARY_DRIVERS)),
        attested=read_drivers(data.get(ATTESTED)) or frozenset(),
        attestations=texts,
        waivers=read_waivers(data.get(WAIVERS)),
        running_today=read_running_today(data.get(RUNNING_TODAY)),
    )
