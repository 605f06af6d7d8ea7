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
from engine_contracts.resource_facts.outputs import StackIdentity, StackOutputs, read_stack_identity
from engine_contracts.resource_facts.values import prop

CANARY_STACK = "canaryStack"
MIN_SOAK_HOURS = "minSoakHours"
# promotion.minSoakReason: why this prod stack asks its canary for less than the runbook's week; always sent, ""
# when none (a reason removed must not linger in a preview).
MIN_SOAK_REASON = "minSoakReason"
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
# What binds the attestation to the declared canary (issue 30), written by a program of facts version 2:
STACK = "stack"  # this prod stack, org/project/stack as the engine names it (a stack is never its own canary)
CANARY_IDENTITY = "canaryIdentity"  # the canary stack's identity output, JSON (outputs.StackIdentity); "" if none
MAX_ATTESTATION_AGE_DAYS = "maxAttestationAgeDays"
# The served-traffic floors (issue 31): the least share of the soak judged and the least requests served that the
# attestation must show for a canary pool.
MIN_JUDGED_FRACTION = "minJudgedFraction"
MIN_REQUESTS = "minRequests"
INSTALL = "install"  # JSON: this stack's install factors, {driverMode, kernelModuleType, pools: {pool: {...}}}


@dataclass(frozen=True)
class WaiverFacts:
    """A prod pool's declared waiver: the differences from its canary pool the gate accepts, and why; the
    driver branch or version it was given for, its change ticket and its last day (``YYYY-MM-DD``). A record
    of facts version 1 states none of the three: such a waiver accepts nothing (the gate says why)."""

    accept: frozenset[str]
    reason: str
    driver: str | None = None
    ticket: str | None = None
    expires: str | None = None


@dataclass(frozen=True)
class InstallFacts:
    """How this stack installs the driver, per what the gate compares with the attested canary: who installs
    it (``nvidiadriver``/``clusterpolicy``/``image``), the kernel modules the operator is told to load
    (``auto``/``open``/``proprietary``; None where the image owns the driver), whether precompiled modules
    are used, and per pool the node image and OS it declares (None where it declares none)."""

    driver_mode: str | None = None
    kernel_module_type: str | None = None
    precompiled: bool = False
    pools: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)

    def as_data(self) -> str:
        return json.dumps({"driverMode": self.driver_mode, "kernelModuleType": self.kernel_module_type,
                           "precompiled": self.precompiled, "pools": {k: dict(v) for k, v in self.pools.items()}},
                          sort_keys=True, ensure_ascii=False)


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
    stack: str | None = None  # this prod stack, qualified
    canary_identity: StackIdentity | None = None  # the canary's identity output; None: it states none
    max_attestation_age_days: float | None = None
    install: InstallFacts | None = None
    min_judged_fraction: float | None = None  # None: the record states none (the gate then admits no traffic)
    min_requests: int | None = None
    min_soak_reason: str | None = None  # why less than the runbook's week; None: none stated


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


def canary_runs(canary: StackOutputs) -> str:
    """The drivers the canary stack's released pools run, from its outputs (``drivers_text``); empty when they
    show none. What the promotion record's ``canaryDrivers`` holds."""
    if canary.pools:
        running = {p.driver_version for p in canary.pools.values() if not p.held and p.driver_version is not None}
    else:
        running = {canary.driver_version} if canary.driver_version else set()
    return drivers_text(running)


def canary_fields(canary: StackOutputs) -> dict[str, str]:
    """The promotion record's data that the canary's outputs decide: what it runs and which stack and cluster it
    is. Nothing else of the record reads the canary."""
    return {CANARY_DRIVERS: canary_runs(canary), CANARY_IDENTITY: identity_text(canary.identity)}


def promotion_data(
    canary_stack: str, min_soak_hours: float, canary_drivers: Any, attested: Iterable[str], texts: Mapping[str, str],
    waivers: Mapping[str, WaiverFacts] | None = None, running_today: RunningTodayFacts | None = None, *,
    stack: str = "", canary_identity: Any = "",
    max_attestation_age_days: float = 90, install: InstallFacts | None = None,
    min_judged_fraction: float = 0.9, min_requests: int = 1000, min_soak_reason: str | None = None,
) -> dict[str, Any]:
    """The record's data; ``canary_drivers`` and ``canary_identity`` may be the program's Outputs of
    ``drivers_text`` and ``identity_text``."""
    declared = {pool: {"accept": sorted(w.accept), "reason": w.reason, "driver": w.driver, "ticket": w.ticket,
                       "expires": w.expires} for pool, w in (waivers or {}).items()}
    return {
        STACK: stack,
        CANARY_IDENTITY: canary_identity,
        MAX_ATTESTATION_AGE_DAYS: f"{max_attestation_age_days:g}",
        MIN_JUDGED_FRACTION: f"{min_judged_fraction:g}",
        MIN_REQUESTS: str(min_requests),
        INSTALL: (install or InstallFacts()).as_data(),
        CANARY_STACK: canary_stack,
        MIN_SOAK_HOURS: f"{min_soak_hours:g}",
        MIN_SOAK_REASON: min_soak_reason or "",
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
            bound = [entry.get(k) if isinstance(entry.get(k), str) and entry.get(k) else None
                     for k in ("driver", "ticket", "expires")]
            out[str(pool)] = WaiverFacts(frozenset(accept), reason, *bound)
    return out


def identity_text(identity: StackIdentity | None) -> str:
    """The canary's identity output as the record holds it: JSON, "" when the canary states none."""
    return json.dumps(identity.as_output(), sort_keys=True) if identity is not None else ""


def read_install(text: Any) -> InstallFacts | None:
    try:
        found = json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    pools = found.get("pools")
    return InstallFacts(
        driver_mode=found.get("driverMode") if isinstance(found.get("driverMode"), str) else None,
        kernel_module_type=found.get("kernelModuleType") if isinstance(found.get("kernelModuleType"), str) else None,
        precompiled=found.get("precompiled") is True,
        pools={str(k): {str(a): (b if isinstance(b, str) else None) for a, b in v.items()}
               for k, v in pools.items() if isinstance(v, dict)} if isinstance(pools, dict) else {},
    )


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
    try:
        identity = read_stack_identity(json.loads(data.get(CANARY_IDENTITY) or "null"))
    except (TypeError, ValueError):
        identity = None
    try:
        max_age: float | None = float(data[MAX_ATTESTATION_AGE_DAYS]) if MAX_ATTESTATION_AGE_DAYS in data else None
    except (TypeError, ValueError):
        max_age = None
    own = data.get(STACK)
    try:
        min_judged: float | None = float(data[MIN_JUDGED_FRACTION])
    except (KeyError, TypeError, ValueError):
        min_judged = None
    try:
        min_requests: int | None = int(data[MIN_REQUESTS])
    except (KeyError, TypeError, ValueError):
        min_requests = None
    reason = data.get(MIN_SOAK_REASON)
    return PromotionFacts(
        canary_stack=stack if isinstance(stack, str) and stack else None,
        min_soak_hours=hours,
        min_soak_reason=reason.strip() if isinstance(reason, str) and reason.strip() else None,
        canary_drivers=read_drivers(data.get(CANARY_DRIVERS)),
        attested=read_drivers(data.get(ATTESTED)) or frozenset(),
        attestations=texts,
        waivers=read_waivers(data.get(WAIVERS)),
        running_today=read_running_today(data.get(RUNNING_TODAY)),
        stack=own if isinstance(own, str) and own else None,
        canary_identity=identity,
        max_attestation_age_days=max_age,
        install=read_install(data.get(INSTALL)),
        min_judged_fraction=min_judged,
        min_requests=min_requests,
    )
