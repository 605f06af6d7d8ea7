"""Rules for the rollout's discipline (runbook sections 2, 6 and 7, and "Prevent it next time"): prod pools released
wave by wave, least critical first, with a dwell between waves; an image-owned pool's previous generation kept
until the newest has run a business day; the post-upgrade validation job in prod; the canary's soak long enough;
a maintenance window declared and honoured.

What the last deployment released and when comes from its outputs (``StackFacts.previous``: the program's
reference to its own stack, ``engine_contracts.resource_facts.outputs.Timeline``); the stack's settings from its identity
record (``fleetspec.discipline.RolloutSettings``). The rules judge against ``StackFacts.now``. Where there is no last
deployment (an offline `gpu-rollout plan` by default), what can only be judged against it is advice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from pydantic import ValidationError

from policy.facts import Pool, Resource, StackFacts, node_labels
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from fleetspec import discipline
from engine_contracts import resource_facts as rf
from fleetspec.base import Stage
from vocabulary.policy_ids import PolicyId


@dataclass(frozen=True)
class _ProdPool:
    pool: Pool
    wave: int
    role: str | None
    held: bool

    @property
    def resource(self) -> Resource | None:
        return self.pool.resources[-1] if self.pool.resources else None


def _prod_pools(stack: StackFacts) -> list[_ProdPool]:
    """The stack's pools that roll in waves (every pool but a canary), with what their resources state."""
    found = []
    for pool in stack.pools.values():
        facts = pool.facts
        if facts.role == rf.CANARY_ROLE or facts.wave is None:
            continue
        found.append(_ProdPool(pool, facts.wave, facts.role, facts.held))
    return found


def _settings(stack: StackFacts) -> rf.IdentityFacts:
    return stack.identity or rf.IdentityFacts(None, None, None, None, None)


def _hours(value: float | None, default: float) -> float:
    return default if value is None else value


def _waves(waves: set[int] | list[int]) -> str:
    return ", ".join(str(w) for w in sorted(waves))


def _excused(message: str, reason: str | None, resource: Resource | None = None) -> Finding:
    """A violation, or advice where the stack states why it is accepted."""
    if reason:
        return advice(f"{message} (accepted: {reason})", resource)
    return Finding(message, resource)


# ---------------------------------------------------------------- waves-in-order


@stack_policy(
    PolicyId.WAVES_IN_ORDER,
    "Checks that prod pools are released wave by wave, least critical first: no wave released while an earlier "
    "one is held, at most one new wave per deployment, each a dwell time after the one before, serving pools "
    "after batch pools.",
    severity=Severity.HIGH, topics=("rollout", "disruption"),
    remediation="Release the next wave only (rollout.released on its pools) once the one before has run "
    "rollout.waveDwellHours; give serving pools a later wave than batch pools. State rollout.earlyReleaseReason "
    "(or rollout.servingBeforeBatchReason) where the change must go faster, and why.",
    config_keys=(
        "nodePools[].rollout.released",
        "nodePools[].rollout.wave",
        "rollout.earlyReleaseReason",
        "rollout.servingBeforeBatchReason",
    ),
)
def waves_in_order(stack: StackFacts) -> Iterator[Finding]:
    """The runbook's "remove the skip label pool by pool, starting with the least critical"."""
    if stack.stage is not Stage.PROD:
        return
    pools = _prod_pools(stack)
    settings = _settings(stack)
    yield from _released_in_order(pools)
    yield from _one_wave_at_a_time(stack, pools, settings)
    yield from _serving_after_batch(pools, settings)


def _released_in_order(pools: list[_ProdPool]) -> Iterator[Finding]:
    for wave in sorted({p.wave for p in pools if not p.held}):
        earlier = sorted((p for p in pools if p.held and p.wave < wave), key=lambda p: (p.wave, p.pool.name))
        if earlier:
            released = sorted(p.pool.name for p in pools if not p.held and p.wave == wave)
            held = ", ".join(f"{p.pool.name} (wave {p.wave})" for p in earlier)
            first = next(p for p in pools if not p.held and p.wave == wave)
            yield Finding(f"wave {wave} ({', '.join(released)}) is released while an earlier wave is held: {held}; "
                          "release the waves in order", first.resource)


def _one_wave_at_a_time(stack: StackFacts, pools: list[_ProdPool], settings: rf.IdentityFacts) -> Iterator[Finding]:
    last = stack.previous
    released = {p.wave for p in pools if not p.held}
    was_released = {s.wave for s in last.pools.values()
                    if s.held is False and s.role != rf.CANARY_ROLE and s.wave is not None}
    new = sorted(released - was_released)
    reason = settings.early_release_reason
    if len(new) > 1:
        message = f"this deployment releases {len(new)} waves at once ({_waves(new)}); release one wave per deployment"
        if not last.deployed:
            yield advice(f"{message} (no last deployment to compare with: only a first deployment may)")
        else:
            yield _excused(f"{message}: the last deployment released wave(s) {_waves(was_released) or 'none'}",
                           reason)
        return
    dwell = _hours(settings.wave_dwell_hours, discipline.DEFAULT_WAVE_DWELL_HOURS)
    for wave in new:
        before = [w for w in was_released if w < wave]
        if not before:
            continue  # the first wave follows the canary, whose soak the prod gate judges
        previous = max(before)
        if not last.deployed:
            yield advice(f"wave {wave} is released, and no last deployment records when wave {previous} was: keep "
                         f"it until wave {previous} has run {dwell:g} h (rollout.waveDwellHours)")
            continue
        since = last.timeline.waves_released.get(previous)
        if since is None:
            yield advice(f"wave {wave} is released, and the last deployment records no time for wave {previous} "
                         f"(released before the record was kept): make sure it has run {dwell:g} h")
            continue
        ran = discipline.hours_between(since, stack.now)
        if ran < dwell:
            ready = rf.timestamp(since + timedelta(hours=dwell))
            yield _excused(f"wave {wave} is released {ran:.1f} h after wave {previous} (released "
                           f"{rf.timestamp(since)}); rollout.waveDwellHours asks {dwell:g} h: release it from {ready}",
                           reason)


def _serving_after_batch(pools: list[_ProdPool], settings: rf.IdentityFacts) -> Iterator[Finding]:
    batch = [p for p in pools if p.role == "batch"]
    for serving in sorted((p for p in pools if p.role == "serving"), key=lambda p: p.pool.name):
        later = [b for b in batch if b.wave >= serving.wave]
        if later:
            names = ", ".join(f"{b.pool.name} (wave {b.wave})" for b in sorted(later, key=lambda b: b.pool.name))
            yield _excused(f"serving pool {serving.pool.name} is in wave {serving.wave}, not after batch pool(s) "
                           f"{names}: the least critical pools go first", settings.serving_before_batch_reason,
                           serving.resource)


# ---------------------------------------------------------------- old-generation-kept


@stack_policy(
    PolicyId.OLD_GENERATION_KEPT,
    "Checks that an image-owned pool's previous generation is retired only once the newest generation has run "
    "its declared minimum (a business day by default).",
    severity=Severity.HIGH, topics=("rollback", "generations"),
    remediation="Keep the previous generation live (retired: false) until the newest has run "
    "rollout.keepGenerationHours, then retire it in a change of its own; rollout.earlyRetireReason states why "
    "it may go sooner.",
    config_keys=("nodePools[].generations[].retired", "rollout.earlyRetireReason"),
)
def old_generation_kept(stack: StackFacts) -> Iterator[Finding]:
    """The runbook: "keep the old node pool or node group until the new one has run cleanly for a full business
    day". Judged from what the last deployment ran and recorded; with no last deployment nothing is retired."""
    last = stack.previous
    if not last.deployed:
        return
    settings = _settings(stack)
    keep = _hours(settings.keep_generation_hours, discipline.DEFAULT_KEEP_GENERATION_HOURS)
    for name, summary in sorted(last.pools.items()):
        was_live = {g.id for g in summary.generations if not g.retired and g.id is not None}
        pool = stack.pools.get(name)
        if not was_live or pool is None:
            continue
        live = {g for r in pool.resources if (g := rf.read_pool_labels(node_labels(r)).generation) is not None}
        retiring = sorted(was_live - live)
        if not retiring or not live:
            continue
        newest = max(live)
        resource = pool.resources[-1]
        gone = ", ".join(f"g{g}" for g in retiring)
        if newest not in was_live:
            yield _excused(f"pool {name}: {gone} retired in the deployment that first deploys g{newest}; keep it "
                           f"until g{newest} has run {keep:g} h (rollout.keepGenerationHours)",
                           settings.early_retire_reason, resource)
            continue
        since = last.timeline.generations_deployed.get(name, {}).get(newest)
        if since is None:
            yield advice(f"pool {name}: {gone} retired; the last deployment records no time for g{newest} (deployed "
                         f"before the record was kept): make sure it has run {keep:g} h", resource)
            continue
        ran = discipline.hours_between(since, stack.now)
        if ran < keep:
            yield _excused(f"pool {name}: {gone} retired after g{newest} ran {ran:.1f} h (first deployed "
                           f"{rf.timestamp(since)}); rollout.keepGenerationHours asks {keep:g} h before the way "
                           "back is removed", settings.early_retire_reason, resource)


# ---------------------------------------------------------------- validation-job-required


@stack_policy(
    PolicyId.VALIDATION_JOB_REQUIRED,
    "Checks that a prod stack declares the post-upgrade validation job (a fixed prompt and a tokens-per-second "
    "floor on every node after its upgrade).",
    severity=Severity.HIGH, topics=("validation",),
    remediation="Declare a validation block in the prod stack (image, model, modelPath, cacheVolume, prompt, "
    "minTokensPerSecond; docs/validation.md), as the canary stack does: the job runs on every node of a released "
    "pool after its upgrade and holds a node that fails.",
    config_keys=("validation",),
)
def validation_job_required(stack: StackFacts) -> Iterator[Finding]:
    """The runbook: "add a validation job (load a small model, run a fixed prompt, check tokens per second) that
    runs after every node upgrade". Mandatory where the operator rolls the driver; advice on image-owned pools."""
    if stack.stage is not Stage.PROD:
        return
    identity = stack.identity
    if identity is None or identity.validation_job is None:
        yield advice("the stack's identity record does not say whether it declares the validation job")
        return
    if identity.validation_job:
        return
    message = ("prod declares no validation job: nodes upgraded after the canary never get the fixed-prompt, "
               "tokens-per-second check; declare a validation block")
    if any(d.facts.enabled for d in stack.drivers):
        yield Finding(message)
    else:
        yield advice(f"{message} (recommended where the node image owns the driver too)")


# ---------------------------------------------------------------- soak-floor


@stack_policy(
    PolicyId.SOAK_FLOOR,
    "Checks that prod asks its canary for the runbook's week of soak (promotion.minSoakHours 168), or says why less "
    "(promotion.minSoakReason), and never less than a day.",
    severity=Severity.HIGH, topics=("canary", "promotion"),
    remediation="Set promotion.minSoakHours to 168 (the runbook keeps the canary a week ahead of production), or state "
    "promotion.minSoakReason for a shorter soak; never below 24 in prod.",
    config_keys=("promotion.minSoakHours", "promotion.minSoakReason"),
)
def soak_floor(stack: StackFacts) -> Iterator[Finding]:
    if stack.stage is not Stage.PROD:
        return
    for res in stack.resources:
        if not rf.is_promotion_record(res.props):
            continue
        promotion = rf.read_promotion(res.props)
        hours = promotion.min_soak_hours
        if hours is None:
            continue  # canary-attested reports a record without it
        if hours < discipline.MIN_PROD_SOAK_HOURS:
            yield Finding(f"promotion.minSoakHours is {hours:g}: prod must ask its canary for at least "
                          f"{discipline.MIN_PROD_SOAK_HOURS:g} h of soak", res)
        elif hours < discipline.RUNBOOK_SOAK_HOURS and promotion.min_soak_reason is None:
            yield Finding(f"promotion.minSoakHours is {hours:g}: the runbook keeps the canary \"a week ahead of "
                          f"production\" ({discipline.RUNBOOK_SOAK_HOURS:g} h); a shorter soak needs "
                          "promotion.minSoakReason, which the plan and the PR diff show", res)
        elif hours < discipline.RUNBOOK_SOAK_HOURS:
            yield advice(f"promotion.minSoakHours is {hours:g}, less than the runbook's week "
                         f"({discipline.RUNBOOK_SOAK_HOURS:g} h), because: {promotion.min_soak_reason}", res)


# ---------------------------------------------------------------- maintenance-window


@stack_policy(
    PolicyId.MAINTENANCE_WINDOW,
    "Checks that a prod stack declares its maintenance window, and advises when the change is made outside it.",
    severity=Severity.MEDIUM, topics=("process", "disruption"),
    remediation="Declare rollout.maintenanceWindow (timeZone and weekly windows away from peak traffic and "
    "planned batch jobs) and deploy inside it: the deploy workflow and `gpu-rollout watch` honour it.",
    config_keys=("rollout.maintenanceWindow",),
)
def maintenance_window(stack: StackFacts) -> Iterator[Finding]:
    """The runbook: "Upgrade window avoids peak traffic and any planned batch jobs". Advisory by design (its
    findings are the policy's, at its advisory level): the deploy workflow and watch are what honour the window."""
    identity = stack.identity
    if identity is None:
        return
    if identity.maintenance_window is None:
        if stack.stage is Stage.PROD:
            yield Finding("prod declares no maintenance window (rollout.maintenanceWindow): a rollout may start at "
                         "peak traffic or over planned batch jobs")
        return
    try:
        window = discipline.MaintenanceWindow.model_validate_json(identity.maintenance_window)
    except ValidationError:
        yield advice("the stack's maintenance window on its identity record is not readable")
        return
    if not window.is_open(stack.now):
        yield advice(f"this change is made {window.verdict(stack.now)}: nodes that start upgrading now would do "
                     "so at a time the stack rules out (the deploy workflow and `gpu-rollout watch` wait for it)")
