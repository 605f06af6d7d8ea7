"""`gpu-rollout simulate`: the rollout predicted before it starts (docs/simulate.md), from the stack or, with
``--from-cluster``, from the live cluster (read-only). Prints the predicted time per wave and pool, each model's
lowest availability, every stall with its cause, the peak of what is out at once, the lower bound and the safest
fast parallelism as the stack-file change that applies it.

Exit 0 when the configured policy completes with every model at or above its minimum; 1 when it would stop a
node for good (a failed node, a PDB that never lets go, a skip label) or drop a model below its minimum; 2 for
bad input (a stack whose node image owns the driver: nothing to simulate).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from rollout import documents, schemas
from rollout import console as consoles
from rollout.console import say
from refusals.errors import InvalidInput
from refusals.exits import Exit
from simulate.assess import Assessment, assess
from simulate.fleet import Fleet, NotSimulated, fleet_from_spec
from simulate.outcome import Outcome
from simulate.search import DELETION_TIMEOUT_CAP, Recommended
from simulate.schedule import Schedule, schedule
from fleetspec import load
from fleetspec.model import PROJECT, FleetSpec

if TYPE_CHECKING:  # the Kubernetes client only where a cluster is read
    from checks import kube as kube_module

POLICY_KEY = "gpuOperator.upgradePolicy"  # the stack key every NVIDIADriver and the ClusterPolicy take their policy from
POOL_POLICY_KEY = "nodePools[{index}].upgradePolicy"  # a pool's own, for its NVIDIADriver (operator v26.7.0 on)
STALLS_SHOWN = 20


def stack_change(max_parallel: int, max_unavailable: int, key: str = POLICY_KEY,
                 deletion_timeout: int | None = None) -> list[dict[str, Any]]:
    """The stack-file keys (full config key paths, as `pulumi config set --path` spells them) and values that apply
    a recommendation (``podDeletion.timeoutSeconds`` where it sets one)."""
    timeout = [] if deletion_timeout is None else [
        {"key": f"{PROJECT}:{key}.podDeletion.timeoutSeconds", "value": deletion_timeout}]
    return [{"key": f"{PROJECT}:{key}.maxParallelUpgrades", "value": max_parallel},
            {"key": f"{PROJECT}:{key}.maxUnavailable", "value": max_unavailable}, *timeout]


def recommended_change(fleet: Fleet, recommended: Recommended) -> list[dict[str, Any]]:
    """The stack-file change that applies ``recommended``: per pool, the two keys of its own upgradePolicy (each
    pool its pair, whatever it has now, so the change is the same with or without ``--parallel``); else the
    stack's one policy. Empty when nothing is recommended."""
    if not recommended.found:
        return []
    if not recommended.per_pool:
        assert recommended.max_parallel is not None and recommended.max_unavailable is not None
        return stack_change(recommended.max_parallel, recommended.max_unavailable)
    index = {pool.name: k for k, pool in enumerate(fleet.pools)}
    timeouts = recommended.timeouts or (None,) * len(fleet.groups)
    return [{**entry, "pool": pool}
            for group, pair, timeout in zip(fleet.groups, recommended.values, timeouts, strict=True) if pair is not None
            for pool in group.pools
            for entry in stack_change(*pair, key=POOL_POLICY_KEY.format(index=index[pool]), deletion_timeout=timeout)]


def stack_fleet(path: Path) -> Fleet:
    """The fleet the stack file declares; no cluster is reached."""
    return fleet_from_spec(load.load_stack_file(path))


def cluster_fleet(kube: kube_module.Kube, spec: FleetSpec) -> Fleet:
    """The fleet as the live cluster shows it (read-only)."""
    from checks import snapshot

    return snapshot.read_fleet(kube, spec)


BEYOND_THE_PACK = "a stack that sends these values fails `gpu-rollout plan`"


def document(stack: str, assessment: Assessment) -> schemas.SimulateDocument:
    """``simulate --json``: what each upgrade policy predicts, the lower bound, and the recommendation."""
    recommended = assessment.recommended
    advice: dict[str, Any] = {
        "perPool": recommended.per_pool,
        "maxParallelUpgrades": recommended.max_parallel, "maxUnavailable": recommended.max_unavailable,
        "perPolicy": [{**r.as_json(), "confirmed": None if pair is None else
                       {"maxParallelUpgrades": pair[0], "maxUnavailable": pair[1],
                        "podDeletionTimeoutSeconds": timeout}}
                      for r, pair, timeout in zip(recommended.per_policy, recommended.values or
                                                  [None] * len(recommended.per_policy),
                                                  recommended.timeouts or [None] * len(recommended.per_policy),
                                                  strict=True)],
        "predicted": None if recommended.outcome is None else recommended.outcome.as_json(),
        "ratio": None if assessment.recommended_ratio is None else round(assessment.recommended_ratio, 2),
        "withinPackRatio": None if assessment.recommended_within_pack_ratio is None
        else round(assessment.recommended_within_pack_ratio, 2),
    }
    if recommended.found:
        advice["stackChange"] = recommended_change(assessment.fleet, recommended)
    # The simulator's records as plain values, read into the document's typed parts (rollout.schemas): a key the
    # model does not declare is an error, so the schema and what is printed never part.
    return schemas.SimulateDocument.model_validate(dict(
        stack=stack, source=assessment.fleet.source, seed=assessment.seed,
        policies=[{"policy": g.title, "pools": list(g.pools), "autoUpgrade": g.policy.auto_upgrade,
                   "maxParallelUpgrades": g.policy.max_parallel, "maxUnavailable": g.policy.max_unavailable}
                  for g in assessment.fleet.groups],
        beyondThePack=list(assessment.beyond_the_pack),
        predicted=assessment.outcome.as_json(), lowerBound=assessment.lower_bound.as_json(),
        withinPackBound=None if assessment.within_pack is None else assessment.within_pack.as_json(),
        ratio=None if assessment.ratio is None else round(assessment.ratio, 2), recommended=advice,
        schedule=schedule(assessment.fleet, assessment.outcome).as_json()))


def execute(stack: str, read_fleet: Callable[[], Fleet], *, parallel: int | None, seed: int, as_json: bool) -> Exit:
    try:
        fleet = read_fleet()
    except NotSimulated as error:
        raise InvalidInput(f"simulate: {error}") from None
    assessment = assess(fleet, seed, parallel)
    if as_json:
        documents.write(document(stack, assessment))
    else:
        render(stack, assessment, consoles.stdout())
    outcome = assessment.outcome
    for found in assessment.beyond_the_pack:
        say(f"{found}: {BEYOND_THE_PACK}")
    for model in outcome.below_minimum:
        say(f"model {model.name} drops to {model.lowest} available replica(s), below its minAvailable "
            f"{model.minimum}, for {model.seconds_below / 60:.1f} min")
    permanent = outcome.permanent_stalls
    if permanent:
        first = permanent[0]
        say(f"the rollout stops for good: {len(permanent)} node(s), first {first.node} in {first.state}: "
            f"{first.detail}")
    return Exit.failed_if(not outcome.ok)


# ---------------------------------------------------------------- the table view


def _minutes(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds / 60:.1f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "does not finish"
    return f"{seconds / 3600:.1f} h ({seconds / 60:.0f} min)"


def _waves(waves: tuple[int, ...]) -> str:
    return ("wave " if len(waves) == 1 else "waves ") + ", ".join(map(str, waves))


def _hours(seconds: float | None) -> str:
    return "does not finish" if seconds is None else f"{seconds / 3600:.1f} h"


def render(stack: str, assessment: Assessment, console: Console) -> None:
    """The report in lines and narrow tables that read at 100 columns: no column is given a sentence to fold."""
    outcome = assessment.outcome
    source = "the live cluster" if assessment.fleet.source == "cluster" else "the stack"
    console.print(f"simulate (stack {stack}, from {source}, seed {assessment.seed}):", markup=False, highlight=False)
    for g in assessment.fleet.groups:
        console.print(f"  {g.title}: maxParallelUpgrades {g.policy.max_parallel}, maxUnavailable "
                      f"{g.policy.max_unavailable}" + ("" if g.policy.auto_upgrade else ", autoUpgrade false"),
                      markup=False, highlight=False)
    if assessment.beyond_the_pack:
        console.print(f"beyond what the policy pack admits ({BEYOND_THE_PACK}):", markup=False, highlight=False)
        for found in assessment.beyond_the_pack:
            console.print(f"  {found}", markup=False, highlight=False)
    plan = schedule(assessment.fleet, outcome)
    change = f"this change: {_waves(plan.released_waves)} ({', '.join(plan.released_pools)}) in " \
        f"{_duration(plan.change_seconds)}"
    if len(plan.released_waves) > 1:
        change += f", with {plan.dwell_hours:g} h of rollout.waveDwellHours between waves"
    console.print(change, markup=False, highlight=False)
    if plan.held_waves:
        console.print(f"held: {_waves(plan.held_waves)} ({', '.join(plan.held_pools)}), each released by a later "
                      f"change {plan.dwell_hours:g} h (rollout.waveDwellHours) after the wave before it",
                      markup=False, highlight=False)
    dwells = len(plan.released_waves) + len(plan.held_waves) - 1
    console.print(f"the whole rollout: {_duration(plan.upgrade_seconds)} of upgrades"
                  + (f" and {dwells} dwell(s) of {plan.dwell_hours:g} h: {_hours(plan.whole_seconds)}"
                     if dwells > 0 else ""), markup=False, highlight=False)
    ratio = assessment.ratio
    bound = assessment.lower_bound
    console.print(f"every wave's upgrades: {_duration(outcome.seconds)} against a lower bound of "
                  f"{_duration(bound.seconds)}" + (f", ratio {ratio:.2f}" if ratio is not None else "")
                  + f" (limited by {bound.limited_by})", markup=False, highlight=False)
    within = assessment.within_pack
    if within is None:
        console.print("within what the policy pack admits: no schedule (it admits no parallelism on a pool: see the "
                      "recommendation)", markup=False, highlight=False)
    elif within.seconds > bound.seconds:
        # The step between the two bounds is what the pack's rules cost: no parallelism the pack admits buys it back.
        console.print(f"within what the policy pack admits: a lower bound of {_duration(within.seconds)} (limited by "
                      f"{within.limited_by}); the step up from {_duration(bound.seconds)} is what the pack's "
                      "parallelism rules cost (each policy's reason below)", markup=False, highlight=False)
    console.print(f"peak unavailable: {outcome.peak_unavailable_nodes} node(s), {outcome.peak_unavailable_gpus} GPU(s)")
    render_outcome(outcome, console, plan)
    render_recommendation(assessment, console)


def render_outcome(outcome: Outcome, console: Console, plan: Schedule | None = None) -> None:
    held = {f"wave {w}" for w in plan.held_waves} | set(plan.held_pools) if plan is not None else set()
    spans = Table(title="waves and pools", title_justify="left")
    for column in ("wave / pool", "nodes", "start (min)", "end (min)", "minutes"):
        spans.add_column(column)
    for span in (*outcome.waves, *outcome.pools):
        took = None if span.start is None or span.end is None else span.end - span.start
        spans.add_row(span.name + (" (held)" if span.name in held else ""), str(span.nodes), _minutes(span.start),
                      _minutes(span.end), _minutes(took))
    console.print(spans)
    models = Table(title="models", title_justify="left")
    for column in ("model", "replicas", "minAvailable", "lowest", "min below"):
        models.add_column(column)
    for model in outcome.models:
        style = "bold red" if model.below_minimum else ""
        models.add_row(model.name, str(model.replicas), str(model.minimum), f"[{style}]{model.lowest}[/]" if style
                       else str(model.lowest), f"{model.seconds_below / 60:.1f}")
    console.print(models)
    if not outcome.stalls:
        console.print("stalls: none")
        return
    # One line each: a node's stall is a sentence, which a table column would fold mid-word.
    console.print(f"stalls ({len(outcome.stalls)}):")
    for stall in outcome.stalls[:STALLS_SHOWN]:
        until = "for good" if stall.until is None else f"until {_minutes(stall.until)}"
        console.print(f"  {stall.node} ({stall.pool}) {stall.state} from {_minutes(stall.since)} {until} min, "
                      f"{stall.cause}: {stall.detail}", markup=False, highlight=False)
    if len(outcome.stalls) > STALLS_SHOWN:
        console.print(f"  ... {len(outcome.stalls) - STALLS_SHOWN} more (--json lists them all)")


def how_chosen(recommended: Recommended) -> str:
    """How the recommendation was found, in words that are true of this one."""
    values = [r.max_parallel for r in recommended.per_policy if r.nodes and r.max_parallel is not None]
    if recommended.per_pool:
        stepped = [r.group for r, pair in zip(recommended.per_policy, recommended.values or (), strict=False)
                   if pair is not None and r.max_parallel is not None and pair[0] < r.max_parallel]
        timed = [r.group for r, t in zip(recommended.per_policy, recommended.timeouts, strict=False) if t is not None]
        return ("each pool its own: the most nodes at once its simulation alone keeps every model at its minimum "
                "with, no more than the policy pack admits"
                + (f" ({', '.join(timed)} with a longer podDeletion.timeoutSeconds, at most "
                   f"{DELETION_TIMEOUT_CAP} s, where the configured one stops a drain that honours the PDBs)"
                   if timed else "")
                + "; confirmed by a run of the whole fleet"
                + (f", where {', '.join(stepped)} stepped down until that run was safe" if stepped else ""))
    fewest = min(values) if values else None
    halved = fewest is not None and recommended.max_parallel is not None and recommended.max_parallel < fewest
    return (f"one value for every policy ({POLICY_KEY} is the stack's one): the fewest of the policies' own "
            f"({fewest})" + (f", halved to {recommended.max_parallel} until a run of the whole fleet was safe"
                             if halved else ", confirmed by a run of the whole fleet"))


def render_recommendation(assessment: Assessment, console: Console) -> None:
    recommended = assessment.recommended
    table = Table(title="safest fast parallelism per policy", title_justify="left")
    for column in ("policy", "pools", "nodes", "maxParallelUpgrades", "maxUnavailable"):
        table.add_column(column)
    for found in recommended.per_policy:
        table.add_row(found.group, ", ".join(found.pools), str(found.nodes),
                      "none" if found.max_parallel is None else str(found.max_parallel),
                      "none" if found.max_unavailable is None else str(found.max_unavailable))
    console.print(table)
    for found in recommended.per_policy:
        console.print(f"  {found.group}: {found.reason}", markup=False, highlight=False)
    if recommended.outcome is None:
        console.print("recommended: none: no parallelism keeps every model at its minimum (see why above)")
        return
    ratio = assessment.recommended_ratio
    within = assessment.recommended_within_pack_ratio
    configured = assessment.ratio
    console.print(f"recommended: {how_chosen(recommended)}. Every wave's upgrades: predicted "
                  f"{_duration(recommended.outcome.seconds)}" + (f", ratio {ratio:.2f}" if ratio is not None else "")
                  + (f" ({within:.2f} within what the pack admits)"
                     if within is not None and ratio is not None and f"{within:.2f}" != f"{ratio:.2f}" else "")
                  + f"; as configured {_duration(assessment.outcome.seconds)}"
                  + (f", ratio {configured:.2f}" if configured is not None else ""), markup=False, highlight=False)
    changes = recommended_change(assessment.fleet, recommended)
    console.print("apply with the stack-file change:")
    for entry in changes:
        pool = f"  # {entry['pool']}" if "pool" in entry else ""
        console.print(f"  {entry['key']}: {entry['value']}{pool}", markup=False, highlight=False)
