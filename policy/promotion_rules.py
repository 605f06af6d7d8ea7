"""The prod gate: a driver reaches a released prod pool only after the canary attested it (issue 10 point 4).

The program of a prod stack with a ``promotion`` block states, on its promotion record, the text of the
attestation of each driver its released pools move to and the drivers its canary stack runs
(``components/promotion.py``, ``spec.resource_facts.promotion``). This rule judges them with
``spec.attestation``: intact (digest; the HMAC too where ``GPU_ROLLOUT_ATTESTATION_KEY`` is set in the
environment that runs the pack), made on the canary stack, for that driver, covering the GPU architecture of
every released pool that moves to it, with a soak of at least ``minSoakHours``; and the canary stack still
runs the driver. A driver the fleet already ran as of its last deployment is not a promotion (a rollback, a
redeployment): what would block it is advice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from spec import attestation, compat, labels, stacks
from spec import resource_facts as rf
from spec.base import Stage


@dataclass
class _Target:
    """A driver released prod pools move to, with those pools and their GPU architectures."""

    driver: str
    pools: list[str] = field(default_factory=list)
    architectures: set[str] = field(default_factory=set)
    resource: Resource | None = None

    def where(self) -> str:
        return f"driver {self.driver} (pools {', '.join(sorted(self.pools))}; {', '.join(sorted(self.architectures))})"


def _target_drivers(pool: facts.Pool, stack: StackFacts) -> set[str]:
    """The drivers a released pool moves to: its operator drivers' versions, and the driver the node image of
    its newest generation ships (an older generation is the one being replaced, on what prod ran before)."""
    found = {str(d.facts.version) for d in facts.drivers_for_pool(pool, stack.drivers) if d.facts.version}
    shipped = [(rf.read_pool_labels(facts.node_labels(res)).generation or 0, driver) for driver, res in pool.image_drivers]
    if shipped:
        found.add(str(max(shipped)[1]))
    return found


def _targets(stack: StackFacts) -> tuple[dict[str, _Target], list[Finding]]:
    """The drivers released pools run, by driver; and the pools whose GPU architecture cannot be told."""
    targets: dict[str, _Target] = {}
    problems: list[Finding] = []
    for pool in stack.pools.values():
        if pool.facts.held or not pool.resources:
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
                "know (add it to spec/compat_data.py)", res,
            ))
            continue
        for version in _target_drivers(pool, stack):
            target = targets.setdefault(version, _Target(version, resource=res))
            if pool.name not in target.pools:
                target.pools.append(pool.name)
            target.architectures.add(answer.value)
    return targets, problems


def _source(canary: str, driver: str) -> str:
    """The attestation file as the message names it: ``attestations/<canary-stack>/<driver>.json``."""
    name = stacks.stack_name(canary)
    return f"{attestation.ATTESTATION_DIR}/{name if stacks.is_stack_name(name) else canary}/{driver}.json"


def _admission_problems(target: _Target, record: Resource, gate: rf.PromotionFacts) -> Iterator[str]:
    """Why the record does not admit the target's driver: each reason, one line."""
    driver, canary = target.driver, gate.canary_stack or "(none)"
    source = _source(canary, driver)
    text = gate.attestations.get(driver)
    if text is None:
        held = ", ".join(sorted(gate.attested)) or "none"
        yield (f"no attestation {source} (the folder holds: {held}); run "
               f"`gpu-rollout verify --stack {canary}` on the canary once it has soaked")
    else:
        try:
            sealed = attestation.parse(text, source, attestation.key_from_environment())
        except attestation.AttestationError as exc:
            yield str(exc)
        else:
            if gate.canary_stack is not None and not stacks.same_stack(sealed.stack, gate.canary_stack):
                yield f"{source} was made on stack '{sealed.stack}', not on the canary stack '{gate.canary_stack}'"
            if gate.min_soak_hours is None:
                yield "the promotion record states no minSoakHours"
            else:
                for problem in attestation.admission_problems(
                    sealed, driver=driver, architectures=sorted(target.architectures),
                    min_soak_hours=gate.min_soak_hours,
                ):
                    yield f"{source}: {problem}"
    if gate.canary_stack is None:
        yield "the promotion record names no canary stack (promotion.canaryStack)"
    elif gate.canary_drivers is None:
        yield f"the promotion record does not state what the canary stack '{canary}' runs"
    elif not gate.canary_drivers:
        yield (f"the canary stack '{canary}' shows no driver (no driverVersion or pools output: not deployed "
               "yet, or not readable from this stack); cannot confirm it runs the attested driver")
    elif driver not in gate.canary_drivers:
        yield (f"the canary stack '{canary}' runs {', '.join(sorted(gate.canary_drivers))}, not {driver}: the "
               "canary has moved on or was rolled back since it was attested")


@stack_policy(
    "canary-attested",
    "Checks that every driver a released prod pool moves to was attested by the canary: an intact attestation for "
    "that version, covering the pool's GPU architecture, soaked at least promotion.minSoakHours, from the canary "
    "stack, which still runs it.",
    severity=Severity.CRITICAL, topics=("promotion", "canary"),
    remediation="Let the canary soak, run `gpu-rollout verify --stack <canary>` so it writes "
    "attestations/<canary>/<driver>.json, "
    "and commit that file with the prod change; never edit an attestation by hand.",
)
def canary_attested(stack: StackFacts) -> Iterator[Finding]:
    """Every driver of a released prod pool is admitted by a canary attestation (the module docstring)."""
    if not stack.stage_stated:
        yield advice("the stack's stage is not visible on its resources; cannot tell whether the prod gate applies")
        return
    if stack.stage is not Stage.PROD:
        return
    targets, problems = _targets(stack)
    yield from problems
    records = [r for r in stack.resources if r.type == rf.CONFIG_MAP and rf.is_promotion_record(r.props)]
    for driver, target in sorted(targets.items()):
        if not records:
            reasons = ["this prod stack has no promotion record: set promotion.canaryStack and promotion.minSoakHours"]
            resource = target.resource
        else:
            reasons = list(_admission_problems(target, records[0], rf.read_promotion(records[0].props)))
            resource = records[0]
        for reason in reasons:
            message = f"{target.where()}: {reason}"
            if driver in stack.previous.drivers_ran:
                yield advice(
                    f"{message} (the fleet ran {driver} as of its last deployment: not a promotion, not blocked)",
                    resource,
                )
            else:
                yield Finding(message, resource)
