"""The prod gate: a driver reaches a prod pool only after the canary attested it on that kind of pool.

The program of a prod stack with a ``promotion`` block states, on its promotion record, the text of the
attestation of each driver its pools move to or are pinned to, the drivers its canary stack runs and the
stack's waivers (``components/promotion.py``, ``engine_contracts.resource_facts.promotion``). This rule judges them with
``engine_contracts.attestation``, for each pool whose driver is a promotion:

- the attestation is intact (digest) and signed by a key the pack config trusts (``trustedKeys``, this policy's
  setting in ``policy/prod.json``), made on the canary stack, for that driver, covering the pool's GPU
  architecture, with a soak of at least ``minSoakHours``; the canary stack still runs the driver;
- an attested canary pool matches the prod pool: the same GPU product (or a spelling of it listed in
  ``gpu_knowledge.compat_data.PRODUCT_EQUIVALENTS``), GPUs per node, NVSwitch and MIG layout, it served model traffic
  during the soak, and the canary ran the operator release prod runs. Each difference is named; one that
  ``promotion.waivers.<pool>`` accepts is advice, with the waiver's reason.

What is a promotion comes from what the pools ran, as the deployments recorded it per pool in the ``timeline``
output's ``driversRun`` (each driver a deployment released the pool to through this gate; never a config field,
never a held pool's pin: docs/validation.md, What "ran" means): a pool's driver unless that pool ran it before (a
redeployment, a rollback: what would block it is advice), even where other pools run it, since an attestation
binds a kind of GPU; a held pool's pin unless the pool ran it, so on a stack's first deployment (nothing
recorded) a held pool's pin (``driver.previousVersion``) is a promotion like any new driver. Only
``promotion.runningToday``, a declaration with its reason that the fleet runs a driver today, admits that driver
without an attestation, as advice naming it: as a held pool's pin, and as the driver a pool goes back to that a
deployment held on it (the ``timeline`` output's ``heldOnDeclared``) and a later one moved away through the gate (a
rollback); never as a driver a pool is released onto for the first time, nor for a pool never held on it. `gpu-rollout
preflight` fails when a pool's nodes run another driver than declared.

The rule also refuses trusting the example key (``engine_contracts.attestation.EXAMPLE_KEY_ID``, whose private half is in
this repository's tests) outside the example fleets, and says on them how to make a key of one's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from datetime import UTC, date, datetime
from typing import Any

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, advice
from policy.metadata import PolicyConfig, Severity, stack_policy
from engine_contracts import attestation
from gpu_knowledge import compat, labels
from gpu_knowledge.versions import is_branch_only
from fleetspec import stacks
from engine_contracts import resource_facts as rf
from fleetspec.base import Stage
from vocabulary.policy_ids import PolicyId
from gpu_knowledge.versions import driver_given_for


DEFAULT_MAX_ATTESTATION_AGE_DAYS = 90.0  # promotion.maxAttestationAgeDays of a record that states none

TRUSTED_KEYS = "trustedKeys"


@dataclass(frozen=True)
class GateSettings:
    """canary-attested's settings: the public keys whose attestations it trusts."""

    trusted_keys: tuple[attestation.TrustedKey, ...] = ()


def read_settings(entry: Mapping[str, Any]) -> GateSettings:
    return GateSettings(attestation.read_trusted_keys(entry.get(TRUSTED_KEYS, []), TRUSTED_KEYS))


SETTINGS = PolicyConfig(properties={TRUSTED_KEYS: attestation.TRUSTED_KEYS_SCHEMA}, read=read_settings)


class _Judged(Enum):
    """How the gate takes a driver a pool moves to or is pinned to."""

    PROMOTION = "promotion"  # a new driver for the pool: an attestation must admit it
    RAN = "ran"  # the pool (or, for a pool new to the stack, the fleet) ran it: what would block it is advice
    DECLARED = "declared"  # promotion.runningToday declares the fleet runs it: advice naming the declaration


_ORDER = (_Judged.RAN, _Judged.PROMOTION, _Judged.DECLARED)  # the order a driver's findings are given in


@dataclass
class _Target:
    """A driver pools move to, with those pools and how the gate takes it."""

    driver: str
    judged: _Judged
    pools: list[facts.Pool] = field(default_factory=list)
    architectures: set[str] = field(default_factory=set)

    def where(self) -> str:
        names = ", ".join(sorted(p.name for p in self.pools))
        return f"driver {self.driver} (pools {names}; {', '.join(sorted(self.architectures))})"


def _target_drivers(pool: facts.Pool, stack: StackFacts) -> set[str]:
    """The drivers a pool's nodes take: its operator drivers' versions (its NVIDIADriver's pin, or the
    cluster-wide driver), and the driver the node image of its newest generation ships (an older generation is
    the one being replaced, on what the pool ran before)."""
    found = {str(d.facts.version) for d in stack.drivers_of(pool) if d.facts.version}
    shipped = [(rf.read_pool_labels(facts.node_labels(res)).generation or 0, driver) for driver, res in pool.image_drivers]
    if shipped:
        found.add(str(max(shipped)[1]))
    return found


def _declares(declared: rf.RunningTodayFacts, driver: str) -> bool:
    """Whether the declaration names ``driver``: the same release, or the same branch where either is a branch
    alone (precompiled pins are branches; the nodes report releases)."""
    if declared.driver == driver:
        return True
    if is_branch_only(declared.driver) or is_branch_only(driver):
        return declared.driver.split(".")[0] == driver.split(".")[0]
    return False


def _judge(pool: facts.Pool, driver: str, last: rf.PreviousDeployment,
           declared: rf.RunningTodayFacts | None) -> _Judged | None:
    """How the pool's taking ``driver`` is judged; None: a held pool that stays on a driver it ran (not judged).
    "Ran" is per pool, since the attestation binds a kind of GPU: a driver other pools run is still a promotion of
    this one (wave 2 onto what wave 1 runs). A held pool's pin is judged like any driver: on a first deployment
    nothing records what the pool runs, so only ``promotion.runningToday`` admits it without an attestation; the
    declaration also admits a pool going back to it that a deployment held on it (``heldOnDeclared``) and a later
    one moved away through the gate (a rollback), never a release onto it."""
    ran = last.pool_drivers.get(pool.name, frozenset())
    if driver in ran:
        return None if pool.facts.held else _Judged.RAN
    if declared is not None and _declares(declared, driver) and (pool.facts.held or (
            ran and last.timeline.held_on_declared.get(pool.name) == declared.driver)):
        return _Judged.DECLARED  # held on it, or back to it after a deployment held the pool on it and one moved it
    if pool.facts.held and last.deployed and pool.name not in last.pools and driver in last.drivers_ran:
        return _Judged.RAN  # a pool new to the stack, held on a driver the fleet's pools ran
    return _Judged.PROMOTION


def _targets(stack: StackFacts, declared: rf.RunningTodayFacts | None
             ) -> tuple[dict[tuple[str, _Judged], _Target], list[Finding]]:
    """The drivers pools move to, by driver and how each is judged; and the pools whose GPU architecture cannot be
    told where an attestation must cover it."""
    targets: dict[tuple[str, _Judged], _Target] = {}
    problems: list[Finding] = []
    for pool in stack.pools.values():
        if not pool.resources:
            continue
        judged = {d: j for d in _target_drivers(pool, stack) if (j := _judge(pool, d, stack.previous, declared)) is not None}
        for version in [d for d, j in judged.items() if j is _Judged.DECLARED]:
            targets.setdefault((version, _Judged.DECLARED), _Target(version, _Judged.DECLARED)).pools.append(pool)
            del judged[version]
        if not judged:
            continue
        res = pool.resources[0]
        if not pool.facts.gpu_product:
            problems.append(Finding(
                f"pool {pool.name}: its GPU product is not visible (label {labels.POOL_GPU_PRODUCT}); no attestation "
                "can be matched to its GPU architecture", res,
            ))
            continue
        answer = compat.architecture(pool.facts.gpu_product)
        if answer.value is None:
            problems.append(Finding(
                f"pool {pool.name}: {answer.reason}; no attestation can cover a GPU the architecture table does not "
                "know (add it to gpu_knowledge/compat_data.py)", res,
            ))
            continue
        for version, how in judged.items():
            target = targets.setdefault((version, how), _Target(version, how))
            target.pools.append(pool)
            target.architectures.add(answer.value)
    return targets, problems


def _source(canary: str, driver: str) -> str:
    """The attestation file as the message names it: ``attestations/<canary-stack>/<driver>.json``."""
    name = stacks.stack_name(canary)
    return f"{attestation.ATTESTATION_DIR}/{name if stacks.is_stack_name(name) else canary}/{driver}.json"


# ---------------------------------------------------------------- what the canary pool was, against the prod pool


def _yes_no(value: bool | None) -> str:
    return "not stated" if value is None else "yes" if value else "no"


def install_differences(sealed: attestation.Attestation, canary: attestation.AttestedPool, pool: str,
                        install: rf.InstallFacts | None, driver: str) -> dict[str, str]:
    """What differs in how the driver is installed between an attested canary pool and a prod pool: who installs
    it, its kernel modules (open or proprietary), the OS and node image the prod pool declares, and, where
    modules are precompiled, the kernel (by release series elsewhere: the driver container builds against the
    running kernel). A factor prod does not state is named as such; one the attestation does not record (a
    node image an existing pool does not show) is not compared."""
    if install is None:
        return {"driver-mode": "the promotion record states no install factors (a program of facts version 1): "
                               "redeploy with this release"}
    found: dict[str, str] = {}
    if install.driver_mode != sealed.driverMode:
        found["driver-mode"] = (f"driver installed by {sealed.driverMode} on the canary, "
                                f"{install.driver_mode or 'not stated'} in prod")
    prod_modules = attestation.resolved_module_type(install.kernel_module_type, driver) \
        if install.driver_mode != "image" else None
    if canary.kernelModuleType != prod_modules:
        found["kernel-module-type"] = (f"{canary.kernelModuleType or 'unknown'} kernel modules on the canary, "
                                       f"{prod_modules or 'unknown'} in prod")
    declared = install.pools.get(pool) or {}
    prod_os = [o for o in (declared.get("os") or "").split(",") if o]
    canary_os = attestation.os_family(canary.osImage) if canary.osImage else None
    if canary_os is not None and canary_os not in prod_os:
        found["os-image"] = (f"OS {canary.osImage} ({canary_os}) on the canary, "
                             f"{' or '.join(prod_os) or 'not stated'} in prod")
    image = declared.get("nodeImage")
    # AKS's node label spells the image's version after its name (AKSUbuntu-2204gen2containerd-202510.14.0).
    if canary.nodeImage is not None and image is not None and canary.nodeImage.rsplit("-", 1)[-1] != image \
            and canary.nodeImage != image:
        found["node-image-version"] = f"node image {canary.nodeImage} on the canary, {image} in prod"
    kernels = canary.kernels
    if install.precompiled and len(kernels) > 1:
        found["kernel"] = (f"precompiled modules, but the canary's nodes ran several kernels ({', '.join(sorted(kernels))})"
                           ": one exact kernel is attested per precompiled image")
    elif len({attestation.kernel_series(k) for k in kernels}) > 1:
        found["kernel"] = f"the canary's nodes ran kernels of several series ({', '.join(sorted(kernels))})"
    return found


def differences(canary: attestation.AttestedPool, pool: rf.PoolFacts, operator: str | None,
                attested_operator: str) -> dict[str, str]:
    """What differs between an attested canary pool and a prod pool, by the name a waiver accepts it under
    (``fleetspec.model.WAIVABLE_DIFFERENCES``), each in words: canary, then prod."""
    found: dict[str, str] = {}
    if not pool.gpu_product or not compat.same_gpu_product(canary.gpuProduct, pool.gpu_product):
        found["gpu-product"] = f"GPU {canary.gpuProduct} on the canary, {pool.gpu_product or 'not stated'} in prod"
    if canary.gpusPerNode != pool.gpus_per_node:
        found["gpus-per-node"] = (f"{canary.gpusPerNode} GPUs per node on the canary, "
                                  f"{pool.gpus_per_node or 'not stated'} in prod")
    if canary.nvswitch != pool.nvswitch:
        fm = f", Fabric Manager from {canary.fabricManager}" if canary.nvswitch and canary.fabricManager else ""
        found["nvswitch"] = f"NVSwitch {_yes_no(canary.nvswitch)}{fm} on the canary, {_yes_no(pool.nvswitch)} in prod"
    if canary.migConfig != pool.mig_config:
        found["mig-config"] = f"MIG layout {canary.migConfig} on the canary, {pool.mig_config} in prod"
    if not canary.servedTraffic:
        found["served-traffic"] = f"the canary pool served no model traffic during the soak ({canary.traffic or 'no model'})"
    if operator is None or attested_operator != operator:
        found["operator-release"] = (f"GPU Operator {attested_operator} on the canary, {operator or 'not stated'} "
                                     "in prod")
    return found


@dataclass(frozen=True)
class _Cover:
    """The attested canary pool nearest a prod pool, and what differs."""

    canary: attestation.AttestedPool
    differences: dict[str, str]
    waived: frozenset[str]

    @property
    def admitted(self) -> bool:
        return set(self.differences) <= self.waived


def traffic_difference(sealed: attestation.Attestation, canary: attestation.AttestedPool, gate: rf.PromotionFacts,
                       found: dict[str, str]) -> dict[str, str]:
    """``found`` with ``served-traffic`` where the attested canary pool's coverage is under the prod stack's floors
    (``promotion.minJudgedFraction``, ``promotion.minRequests``): served traffic means that floor, not one request."""
    short = attestation.coverage_problem(sealed, canary.name, gate.min_judged_fraction, gate.min_requests)
    if short is None:
        return found
    earlier = found.get("served-traffic")
    return {**found, "served-traffic": f"{earlier}; {short}" if earlier else short}


def _nearest(sealed: attestation.Attestation, pool: facts.Pool, operator: str | None,
             waiver: rf.WaiverFacts | None, gate: rf.PromotionFacts) -> _Cover | None:
    """The canary pool of the pool's GPU architecture that covers it (every difference waived), else the one
    with the fewest differences not waived; None when the attestation has no pool of that architecture (the
    architecture check names that)."""
    architecture = compat.architecture(pool.facts.gpu_product or "").value
    waived = waiver.accept if waiver is not None else frozenset()
    covers = [_Cover(c, traffic_difference(sealed, c, gate, {
                  **differences(c, pool.facts, operator, sealed.operatorChart),
                  **install_differences(sealed, c, pool.name, gate.install, sealed.driver)}), waived)
              for c in sealed.pools if c.architecture == architecture]
    if not covers:
        return None
    return min(covers, key=lambda c: (len(set(c.differences) - c.waived), len(c.differences), c.canary.name))


def waiver_problems(pool: str, waiver: rf.WaiverFacts, driver: str, now: datetime) -> list[str]:
    """Why ``promotion.waivers.<pool>`` may not accept a difference for ``driver``: bound to no driver, ticket
    or expiry (a record of facts version 1), given for another driver (a branch covers its versions), or
    expired (its ``expires`` day is past, UTC)."""
    name = f"promotion.waivers.{pool}"
    if waiver.driver is None or waiver.ticket is None or waiver.expires is None:
        return [f"{name} names no driver, change ticket or expiry: a waiver accepts a difference only for the "
                "driver it was given for, until it expires (set driver, ticket and expires)"]
    problems = []
    if not driver_given_for(waiver.driver, driver):
        problems.append(f"{name} (ticket {waiver.ticket}) was given for driver {waiver.driver}, not {driver}: a "
                        "foreign waiver accepts nothing; review the difference for this driver and give it anew")
    try:
        last_day = date.fromisoformat(waiver.expires)
    except ValueError:
        problems.append(f"{name} (ticket {waiver.ticket}): expires {waiver.expires!r} is not a day (YYYY-MM-DD)")
    else:
        if now.astimezone(UTC).date() > last_day:
            problems.append(f"{name} (ticket {waiver.ticket}, driver {waiver.driver}) expired on {waiver.expires}: "
                            "renew it with a new ticket or remove it")
    return problems


def _binding(sealed: attestation.Attestation, target: _Target, gate: rf.PromotionFacts, operator: str | None,
             source: str, now: datetime) -> tuple[list[str], list[str]]:
    """(reasons, waived notes) of each of the target's pools against the attested canary pools."""
    reasons: list[str] = []
    notes: list[str] = []
    for pool in sorted(target.pools, key=lambda p: p.name):
        waiver = gate.waivers.get(pool.name)
        if waiver is not None and waiver_problems(pool.name, waiver, target.driver, now):
            waiver = None  # refused on its own (canary_attested): it accepts nothing
        cover = _nearest(sealed, pool, operator, waiver, gate)
        if cover is None:
            continue
        open_ = {k: v for k, v in cover.differences.items() if k not in cover.waived}
        if open_:
            what = "; ".join(f"{kind}: {text}" for kind, text in open_.items())
            reasons.append(
                f"{source}: no attested canary pool matches pool {pool.name}; the nearest, {cover.canary.name}, "
                f"differs in {what} (accept a difference only with a reasoned promotion.waivers.{pool.name})"
            )
        accepted = {k: v for k, v in cover.differences.items() if k in cover.waived}
        if accepted and waiver is not None:
            what = "; ".join(f"{kind}: {text}" for kind, text in accepted.items())
            notes.append(f"pool {pool.name} is covered by canary pool {cover.canary.name} with the difference "
                         f"{what}, accepted by promotion.waivers.{pool.name}: {waiver.reason}")
    return reasons, notes


# ---------------------------------------------------------------- the gate


def qualified_canary(gate: rf.PromotionFacts) -> str | None:
    """The declared canary stack as the engine names it: a bare ``promotion.canaryStack`` is in this prod stack's
    organization and project (as the program's StackReference qualifies it)."""
    if gate.canary_stack is None:
        return None
    if gate.canary_stack.count("/") == 2 or gate.stack is None or gate.stack.count("/") != 2:
        return gate.canary_stack
    org, project, _ = gate.stack.split("/")
    return attestation.qualified_stack(gate.canary_stack, org, project)


def identity_problems(sealed: attestation.Attestation, gate: rf.PromotionFacts, source: str) -> list[str]:
    """Why the attestation was not made on the declared canary: its qualified stack, stage, cluster and cloud
    identity against the canary stack's ``identity`` output (read by the prod program through its
    StackReference), and that output's own stage."""
    canary = qualified_canary(gate)
    declared = gate.canary_identity
    problems = []
    if sealed.stage != attestation.CANARY_STAGE:
        problems.append(f"{source} was made on a {sealed.stage} stack: only a canary stack's verify attests")
    if declared is None:
        problems.append(f"the canary stack '{canary}' states no identity output (deployed by an older release, or "
                        "not readable from this stack): redeploy the canary, then re-attest; the gate binds an "
                        "attestation to the canary's stack and cluster")
        return problems
    if declared.stage != attestation.CANARY_STAGE:
        problems.append(f"promotion.canaryStack '{canary}' is a {declared.stage or 'stage-less'} stack (its "
                        "identity output), not a canary: only a canary's attestation admits a driver")
    if canary is not None and declared.stack != canary:
        problems.append(f"the canary stack's identity output names stack '{declared.stack}', not "
                        f"promotion.canaryStack '{canary}'")
    if sealed.stack != declared.stack:
        problems.append(f"{source} was made on stack '{sealed.stack}', not on the canary stack '{declared.stack}'")
    if sealed.cluster != declared.cluster or sealed.identity.cloudId != declared.cloud_id:
        made = f"{sealed.cluster} ({sealed.identity.cloudId or 'no cloud resource'})"
        ours = f"{declared.cluster} ({declared.cloud_id or 'no cloud resource'})"
        problems.append(f"{source} was made on cluster {made}, not on the canary stack's cluster {ours}")
    uid = sealed.identity.kubeSystemUid
    if declared.cluster_read is None:
        problems.append(f"the canary stack '{declared.stack}' states no kube-system UID in its identity output "
                        "(deployed by an older release): redeploy the canary, so the gate can compare its cluster "
                        f"with the one {source} was made on")
    elif declared.cluster_read and declared.kube_system_uid != uid:
        problems.append(f"{source} was made on the cluster whose kube-system namespace has UID {uid}; the canary "
                        f"stack's cluster has {declared.kube_system_uid}: another cluster of the same name, or the "
                        "canary's cluster was recreated since (let it soak and re-attest on it)")
    return problems


def identity_notes(sealed: attestation.Attestation, gate: rf.PromotionFacts, source: str) -> list[str]:
    """What the gate could not compare about the canary's identity, said as advice: the kube-system UID where the
    canary's outputs were rendered offline rather than read (no cluster was asked for it)."""
    declared = gate.canary_identity
    if declared is None or declared.cluster_read is not False:
        return []
    return [f"{source} was made on the cluster whose kube-system namespace has UID "
            f"{sealed.identity.kubeSystemUid}; the canary stack's outputs here were rendered, not read from its "
            "cluster, so that UID is not compared (the engine compares it with the UID the deployed canary read; "
            "offline, --from-backend or --canary-outputs does)"]


def _admission(target: _Target, gate: rf.PromotionFacts, settings: GateSettings,
               operator: str | None, now: datetime) -> tuple[list[str], list[str]]:
    """(why the record does not admit the target's driver, one line each; the waivers that admitted it)."""
    driver, canary = target.driver, gate.canary_stack or "(none)"
    source = _source(canary, driver)
    reasons: list[str] = []
    notes: list[str] = []
    text = gate.attestations.get(driver)
    if text is None:
        held = ", ".join(sorted(gate.attested)) or "none"
        reasons.append(f"no attestation {source} (the folder holds: {held}); run "
                       f"`gpu-rollout verify --stack {canary}` on the canary once it has soaked")
    else:
        try:
            sealed = attestation.parse(text, source)
        except attestation.AttestationError as exc:
            reasons.append(str(exc))
        else:
            reasons += attestation.trust_problems(sealed, settings.trusted_keys, source, stacks.stack_name(canary),
                                                  gate.stack, now)
            reasons += identity_problems(sealed, gate, source)
            if gate.min_soak_hours is None:
                reasons.append("the promotion record states no minSoakHours")
            else:
                reasons += [f"{source}: {problem}" for problem in attestation.admission_problems(
                    sealed, driver=driver, architectures=sorted(target.architectures),
                    min_soak_hours=gate.min_soak_hours, now=now,
                    max_age_days=(gate.max_attestation_age_days if gate.max_attestation_age_days is not None
                                  else DEFAULT_MAX_ATTESTATION_AGE_DAYS),
                )]
            bound, notes = _binding(sealed, target, gate, operator, source, now)
            reasons += bound
            notes += identity_notes(sealed, gate, source)
    if gate.canary_stack is None:
        reasons.append("the promotion record names no canary stack (promotion.canaryStack)")
    elif gate.canary_drivers is None:
        reasons.append(f"the promotion record does not state what the canary stack '{canary}' runs")
    elif not gate.canary_drivers:
        reasons.append(f"the canary stack '{canary}' shows no driver (no driverVersion or pools output: not deployed "
                       "yet, or not readable from this stack); cannot confirm it runs the attested driver")
    elif driver not in gate.canary_drivers:
        # Only an attested driver is one the canary ran and left; without an attestation it never ran it here.
        why = ("the canary has moved on or was rolled back since it was attested" if text is not None else
               "the canary does not run it (deploy it on the canary first, let it soak and attest it)")
        reasons.append(f"the canary stack '{canary}' runs {', '.join(sorted(gate.canary_drivers))}, not {driver}: {why}")
    return reasons, notes


def _trusted_example_key(stack: StackFacts, settings: GateSettings, gate: rf.PromotionFacts,
                         record: Resource) -> Iterator[Finding]:
    """Trusting the example key is advice only where the pack config scopes it to the very prod stack judged
    (the examples' own config, policy/examples/prod.json, names the example stacks); unscoped, or for any other
    stack, it is refused: its private half is in this repository."""
    key = next((k for k in settings.trusted_keys if k.id == attestation.EXAMPLE_KEY_ID), None)
    if key is None:
        return
    where = record
    message = (
        f"the gate trusts the example key {attestation.EXAMPLE_KEY_ID} ({TRUSTED_KEYS} of the pack config), whose "
        "private half is in this repository's tests: anyone can sign with it. Generate a key of your own "
        "(`gpu-rollout keygen --out DIR`), keep the private key as the CI secret GPU_ROLLOUT_SIGNING_KEY, list its "
        "entry in trustedKeys and remove the example key's (docs/validation.md, Keys)"
    )
    own = gate.stack
    if key.scope and key.scoped_to(own):
        yield advice(f"{message}; accepted only because this config scopes it to the example stack '{own}' "
                     f"({', '.join(key.scope)})", where)
    elif key.scope:
        yield Finding(f"stack '{own or '(not stated)'}' is outside the example key's scope "
                      f"({', '.join(key.scope)}), but {message}", where)
    else:
        yield Finding(f"the example key is trusted with no scope: {message}", where)


def _refused_waivers(targets: Mapping[tuple[str, _Judged], _Target], gate: rf.PromotionFacts, record: Resource,
                     now: datetime) -> Iterator[Finding]:
    """Each waiver of a pool a promotion reaches that may not accept anything (foreign, expired, unbound)."""
    for (driver, how), target in sorted(targets.items(), key=lambda item: (item[0][0], _ORDER.index(item[0][1]))):
        for pool in sorted(p.name for p in target.pools):
            waiver = gate.waivers.get(pool)
            if waiver is not None and how is _Judged.PROMOTION:
                for problem in waiver_problems(pool, waiver, driver, now):
                    yield Finding(f"driver {driver}: {problem}", record)


def _own_canary(gate: rf.PromotionFacts, record: Resource) -> Iterator[Finding]:
    """A prod stack that names itself as its canary attests its own drivers: refused."""
    canary = qualified_canary(gate)
    if canary is not None and gate.stack is not None and canary == gate.stack:
        yield Finding(f"promotion.canaryStack '{gate.canary_stack}' is this stack ({gate.stack}): a stack is never "
                      "its own canary; name the canary stack that runs the driver first", record)


@stack_policy(
    PolicyId.CANARY_ATTESTED,
    "Checks that every driver a prod pool moves to was attested by the canary on that kind of pool: an intact "
    "attestation for that version, signed by a trusted key, from the canary stack, which still runs it, soaked at "
    "least promotion.minSoakHours, with a canary pool of the prod pool's GPU product, GPUs per node, NVSwitch and "
    "MIG layout that served model traffic, on the operator release prod runs.",
    severity=Severity.CRITICAL, topics=("promotion", "canary"),
    remediation="Let the canary soak, run `gpu-rollout verify --stack <canary>` with the signing key so it writes "
    "attestations/<canary>/<driver>.json, and commit that file with the prod change; never edit an attestation by "
    "hand. Give the canary a pool like each prod pool, or accept a difference in promotion.waivers with its reason.",
    config=SETTINGS,
    config_keys=("driver.version", "driver.previousVersion", "promotion.canaryStack", "promotion.waivers",
                 "promotion.runningToday"),
)
def canary_attested(stack: StackFacts, settings: GateSettings = GateSettings()) -> Iterator[Finding]:
    """Every promoted driver of a prod pool is admitted by a canary attestation (the module docstring)."""
    if not stack.stage_stated:
        yield advice("the stack's stage is not visible on its resources; cannot tell whether the prod gate applies")
        return
    if stack.stage is not Stage.PROD:
        return
    records = stack.promotion_records
    gate = stack.promotion
    if gate is not None:  # without a record every promotion is refused for that alone
        yield from _trusted_example_key(stack, settings, gate, records[0])
        yield from _own_canary(gate, records[0])
    targets, problems = _targets(stack, gate.running_today if gate is not None else None)
    yield from problems
    operator = next((r.facts.operator_version for r in stack.identities if r.facts.operator_version), None)
    for (driver, how), target in sorted(targets.items(), key=lambda item: (item[0][0], _ORDER.index(item[0][1]))):
        if how is _Judged.DECLARED and gate is not None and gate.running_today is not None:
            names = ", ".join(sorted(p.name for p in target.pools))
            yield advice(
                f"driver {driver} (pools {names}): admitted without an attestation by promotion.runningToday, which "
                f"declares the fleet runs {driver} today ({gate.running_today.reason}); `gpu-rollout preflight` "
                f"fails if a pool's nodes run another driver. A declaration is no run: releasing a pool onto {driver} "
                "still needs the canary's attestation",
                records[0],
            )
            continue
        if gate is None:
            reasons = ["this prod stack has no promotion record: set promotion.canaryStack and promotion.minSoakHours"]
            notes: list[str] = []
            resource = target.pools[0].resources[0]
        else:
            reasons, notes = _admission(target, gate, settings, operator, stack.now)
            resource = records[0]
        for reason in reasons:
            message = f"{target.where()}: {reason}"
            if how is _Judged.PROMOTION:
                yield Finding(message, resource)
            else:
                yield advice(
                    f"{message} (each of these pools ran {driver} before: a rollback or a redeployment, not a "
                    "promotion, not blocked)",
                    resource,
                )
        for note in notes:
            yield advice(f"driver {driver}: {note}", resource)
    if gate is not None and gate.running_today is not None and not any(
            how is _Judged.DECLARED for _driver, how in targets):
        yield advice(f"promotion.runningToday (driver {gate.running_today.driver}) admits nothing in this change: no "
                     "held pool is pinned to it and no pool goes back to it; remove the declaration", records[0])
    if gate is not None:
        yield from _refused_waivers(targets, gate, records[0], stack.now)
        used = {p.name for t in targets.values() if t.judged is not _Judged.DECLARED for p in t.pools}
        for pool, waiver in sorted(gate.waivers.items()):
            if pool not in used:
                yield advice(f"promotion.waivers.{pool} (accepts {', '.join(sorted(waiver.accept))}: {waiver.reason}) "
                             f"is not used by this change: pool {pool} takes no driver that is a promotion",
                             records[0])
