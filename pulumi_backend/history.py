"""What `gpu-rollout rollback` decides from a stack's update history: pure functions, no Pulumi import.

The history, the configs and the changes between them are the Pulumi CLI's, read and written by
:mod:`pulumi_backend.pulumi_config`, which knows nothing of this project. Here they meet the project: the keys a
rollback goes back across are read by the FleetSpec's names and defaults (:mod:`pulumi_backend.lenient_spec`,
since an old update may hold a config today's spec refuses), and each config a step would set is loaded
through the spec itself. From these it finds the update to go back to, the config changes that restore it
and, for image-owned pools, the generation moves in their order; or it refuses, saying why, before
anything is changed.

A rollback restores only what decides what runs on the GPU nodes (:func:`restored_config`: the driver, the
operator's chart and driver mode, and per pool its generations and their images, its node image and whether
it is held); every other config difference between now and the target update (a pool or model added since,
a change ticket, a PDB setting) is listed as left alone, and restored only with ``all_config``.

Refusals (:class:`RollbackRefused`) carry the exit code (docs/rollback.md): 1 (``FAILED``) when the
stack's state makes a rollback unsafe or pointless (no history, no earlier good update, an update in
progress, a target the canary never ran); 2 (``INVALID``) when the input is wrong (``--to-version`` names
no good update, secrets that cannot be decrypted with the passphrase or key given).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from refusals.errors import Declined
from refusals.exits import Exit
from pulumi_backend.lenient_spec import LenientView, config_key, fleet, is_present, taken, value_of, with_fields
from pulumi_backend.pulumi_config import (
    IN_PROGRESS,
    Change,
    Config,
    Entry,
    Update,
    apply_changes,
    config_changes,
    engine_config,
    path_value_text,
    undecryptable,
    with_value,
)
from fleetspec.base import DriverOwner
from fleetspec.load import SpecError, spec_from_config

ROLLBACK_MESSAGE = "gpu-rollout rollback to update {version}"  # the message of every update rollback runs
_ROLLBACK_MESSAGE = re.compile(r"^gpu-rollout rollback to update (\d+)\b")

# What decides what runs on the GPU nodes, by the FleetSpec's names: a rollback takes these from the target
# update (the whole ``driver`` key besides) and leaves every other key as the stack has it now.
OPERATOR_RUNTIME: tuple[tuple[str, ...], ...] = (
    ("chartVersion",), ("useNvidiaDriverCrd",), ("usePrecompiled",), ("kernelModuleType",), ("driverRepository",),
)
POOL_RUNTIME: tuple[tuple[str, ...], ...] = (
    ("generations",), ("rollout", "released"), ("eks", "releaseVersion"), ("eks", "amiType"),
    ("eks", "launchTemplate"),
)


class RollbackRefused(Declined):
    """A rollback that must not start: nothing has been changed. ``code`` is the verb's exit code (1 unless
    given)."""

    def __init__(self, message: str, code: Exit = Exit.FAILED) -> None:
        super().__init__(message, code=code)

    def text(self, speaker: str | None = None) -> str:
        return f"rollback refused: {self}"


# ---------------------------------------------------------------- what identifies a driver state


def driver_version(config: Config) -> str | None:
    return fleet(config).driver.version


def driver_owner(config: Config) -> str | None:
    return fleet(config).driver.owner


def stage(config: Config) -> str | None:
    value = fleet(config).stage
    return value if isinstance(value, str) else None


def canary_stack_of(config: Config) -> str | None:
    value = fleet(config).promotion.canaryStack
    return value if isinstance(value, str) and value else None


def rolled_back_to(update: Update) -> int | None:
    """The update a rollback went back to, when ``update`` was run by `gpu-rollout rollback` (its message)."""
    found = _ROLLBACK_MESSAGE.match(update.message)
    return int(found.group(1)) if found else None


def _pools(config: Config) -> list[LenientView]:
    return [pool for pool in fleet(config).nodePools if is_present(pool)]


def live_generations(pool: LenientView) -> list[LenientView]:
    return [g for g in pool.generations if is_present(g) and not g.retired]


def fingerprint(config: Config) -> tuple[Any, ...]:
    """What a rollback goes back across: the driver version, and per pool its node image (AKS node image,
    EKS AMI release, launch template version) and its live generations with their images and drivers."""
    pools = []
    for pool in _pools(config):
        gens = tuple(sorted(
            (g.id, g.driverVersion, g.releaseVersion, g.nodeImageVersion) for g in live_generations(pool)
        ))
        pools.append((pool.name, pool.eks.releaseVersion, pool.eks.launchTemplate.version, gens))
    return (driver_version(config), tuple(sorted(pools, key=str)))


def drivers_run(config: Config) -> set[str]:
    """Drivers a config puts on nodes: the target, and the drivers of live image generations."""
    found = {v for v in [driver_version(config)] if v}
    for pool in _pools(config):
        found |= {g.driverVersion for g in live_generations(pool) if isinstance(g.driverVersion, str)}
    return found


# ---------------------------------------------------------------- choosing the update to go back to


def check_not_in_progress(history: Sequence[Update], stack: str) -> None:
    running = [u for u in history if u.result == IN_PROGRESS or not u.ended]
    if running:
        raise RollbackRefused(
            f"stack {stack}: update {running[0].version} ({running[0].kind}) is still in progress; wait for it to "
            "end (or, if it died, clear it with `pulumi cancel` / `pulumi stack export|import`) before rolling back"
        )


def check_decryptable(configs: Iterable[tuple[str, Config]]) -> None:
    for where, config in configs:
        unreadable = undecryptable(config)
        if unreadable:
            raise RollbackRefused(
                f"{where}: secrets cannot be decrypted ({', '.join(unreadable)}): give the stack's passphrase "
                "(PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE) or access to its secrets provider",
                Exit.INVALID,
            )


def choose_target(history: Sequence[Update], current: Config, stack: str, to_version: int | None = None) -> Update:
    """The update to go back to: ``to_version`` when given (it must be a succeeded update), else the newest
    succeeded update whose driver version, node images or generations differ from the current config."""
    if not history:
        raise RollbackRefused(f"stack {stack} has no update history: there is nothing to roll back to")
    check_not_in_progress(history, stack)
    if to_version is not None:
        found = next((u for u in history if u.version == to_version), None)
        if found is None:
            versions = ", ".join(str(u.version) for u in history)
            raise RollbackRefused(f"--to-version {to_version}: stack {stack} has no such update (it has {versions})",
                                  Exit.INVALID)
        if not found.good:
            raise RollbackRefused(
                f"--to-version {to_version}: that update is a {found.kind} that {found.result}, not a succeeded update",
                Exit.INVALID,
            )
        return found
    unfinished = _ROLLBACK_MESSAGE.match(history[0].message)
    if unfinished and not history[0].good:
        target = unfinished.group(1)
        raise RollbackRefused(
            f"stack {stack}: the last update, a rollback to update {target}, {history[0].result}; finish it with "
            f"`gpu-rollout rollback --stack {stack} --to-version {target} --yes` (or `pulumi up`) rather than "
            "roll back from its half-set config"
        )
    now = fingerprint(current)
    for update in history:
        if update.good and fingerprint(update.config) != now:
            return update
    good = [u.version for u in history if u.good]
    raise RollbackRefused(
        f"stack {stack}: no earlier succeeded update ran another driver, node image or generation than the "
        f"current config ({driver_version(current) or 'no driver'}; succeeded updates: "
        f"{', '.join(map(str, good)) or 'none'}); name one with --to-version N"
    )


def check_canary_ran(target: Config, canary_stack: str, canary_history: Sequence[Update] | None) -> list[int]:
    """The canary's succeeded updates that ran the target's driver; refused when there are none."""
    driver = driver_version(target)
    if canary_history is None:
        raise RollbackRefused(f"promotion.canaryStack '{canary_stack}' has no history here: it never ran driver "
                              f"{driver}; --force rolls back anyway")
    ran = [u.version for u in canary_history if u.good and driver in drivers_run(u.config)]
    if not ran:
        raise RollbackRefused(
            f"driver {driver} was never run by the canary stack '{canary_stack}' (no succeeded update of it ran "
            "that driver): roll the canary back first, or --force"
        )
    return ran


# ---------------------------------------------------------------- what a rollback restores


def restored_config(current: Config, target: Config) -> dict[str, Entry]:
    """``current`` with what decides what runs on the GPU nodes taken from ``target``: the driver (version,
    previous version, owner), the operator's chart and driver mode (``OPERATOR_RUNTIME``) and, for each pool
    both configs have, its generations with their images, its EKS AMI and launch template, and whether it is
    held (``POOL_RUNTIME``). A pool or model added since stays; one removed since stays removed; every other
    key keeps its current value."""
    state = dict(current)
    now, then = fleet(current), fleet(target)
    driver = config_key("driver")
    if driver in target:
        state[driver] = target[driver]
    else:
        state.pop(driver, None)
    operator = config_key("gpuOperator")
    if operator in target and operator in current and not (target[operator].secret or current[operator].secret):
        state = with_value(state, operator, taken(now.gpuOperator, then.gpuOperator, *OPERATOR_RUNTIME))
    elif operator in target:
        state[operator] = target[operator]
    pools = config_key("nodePools")
    if pools in current and pools in target and not current[pools].secret:
        earlier = {pool.name: pool for pool in _pools(target)}
        state = with_value(state, pools, [
            taken(pool, earlier[pool.name], *POOL_RUNTIME) if is_present(pool) and pool.name in earlier
            else value_of(pool)
            for pool in now.nodePools
        ])
    return state


def node_image_notes(stack: str, current: Config, restored: Config) -> list[str]:
    """Where history cannot bring back what ran: an AKS agent pool takes the node image AKS offers when it is
    created (``nodeImageVersion`` is output-only), so a generation created again does not get its recorded
    image, nor necessarily the driver that image shipped. Names the image it will get as far as the stack
    knows: the newest any of its pools got."""
    if fleet(restored).cluster.cloud != "aks":
        return []
    recorded = sorted(((g.nodeImageVersion, pool.name, g.id) for pool in _pools(current) for g in live_generations(pool)
                       if isinstance(g.nodeImageVersion, str)), reverse=True)
    newest = (f"the newest node image AKS gave this stack's pools is {recorded[0][0]} (pool {recorded[0][1]} "
              f"generation {recorded[0][2]}): it gets that one or a newer one" if recorded else
              "the stack records no node image AKS gave its pools")
    notes = []
    for pool in _pools(restored):
        now = next((p for p in _pools(current) if p.name == pool.name), None)
        live_now = {g.id for g in live_generations(now)} if now is not None else set()
        for generation in live_generations(pool):
            if generation.id in live_now:
                continue
            notes.append(
                f"pool {pool.name} generation {generation.id} is created again, and AKS gives a new agent pool its "
                f"current node image for osSku {pool.aks.osSku}, not the recorded "
                f"{generation.nodeImageVersion or '(none recorded)'}, nor necessarily its driver "
                f"{generation.driverVersion}: {newest}. Check it with `gpu-rollout preflight --stack {stack}` (node-image) "
                "before its models move back, and record the image it got as its nodeImageVersion")
    return notes


# ---------------------------------------------------------------- the plan, per driver owner


@dataclass(frozen=True)
class Step:
    title: str
    changes: list[Change]


@dataclass
class Plan:
    stack: str
    target: Update
    current_driver: str | None
    target_driver: str | None
    owner: str | None
    changes: list[Change]  # current -> what the rollback restores, all at once
    steps: list[Step]  # in the order they are applied; for an operator-owned driver, one
    how: str  # how the fleet moves back, in words
    canary: str  # what the canary's history says about the target driver
    untypeable: list[Change] = field(default_factory=list)  # leaves --path cannot set with their type
    left_alone: list[Change] = field(default_factory=list)  # what restored -> the target would still change
    notes: list[str] = field(default_factory=list)  # where the rollback cannot bring back exactly what ran
    all_config: bool = False  # the whole config of the target update is restored


def _generation_steps(current: Config, target: Config) -> list[tuple[str, dict[str, Entry]]]:
    """Image-owned pools move back by generations: (1) the kept previous generation live again at its size
    beside the new one, with the driver target back; (2) the new generation held at 0 nodes, so the models
    move back through their PDBs while its node group stays; (3) the new generation retired (its entry
    removed: the newest generation cannot be marked retired). Each state is a full config."""
    step1_pools, step2_pools, moved = [], [], False
    for pool in _pools(target):
        now = next((p for p in _pools(current) if p.name == pool.name), None)
        kept_ids = {g.id for g in live_generations(pool)}
        newer = [g for g in (live_generations(now) if now is not None else []) if g.id not in kept_ids]
        if not newer:
            step1_pools.append(value_of(pool))
            step2_pools.append(value_of(pool))
            continue
        moved = True
        gens = [value_of(g) for g in pool.generations]
        step1_pools.append(with_fields(pool, generations=gens + [value_of(g) for g in newer]))
        step2_pools.append(with_fields(pool, generations=gens + [with_fields(g, nodeCount=0) for g in newer]))
    if not moved:
        return [("roll back", dict(target))]
    step1 = with_value(target, config_key("nodePools"), step1_pools)
    step2 = with_value(target, config_key("nodePools"), step2_pools)
    return [
        ("scale up the kept previous generation (the new one stays live) and set the driver back", step1),
        ("hold the new generation at 0 nodes: the models move back through their PDBs; its node group stays", step2),
        ("retire the new generation: its entry is removed and its node group deleted", dict(target)),
    ]


def _check_spec(stack: str, title: str, state: Config) -> None:
    """Each step's config must be one the program accepts today, or its `up` would fail half-way."""
    try:
        spec_from_config(engine_config(state), source=f"stack {stack}")
    except SpecError as error:
        problems = "; ".join(p.one_line() for p in error.problems)
        raise RollbackRefused(f"stack {stack}: the step '{title}' gives a config the program refuses ({problems})")\
            from None


def _upgrade_policy_words(config: Config) -> str:
    policy = fleet(config).gpuOperator.upgradePolicy
    return f"upgradePolicy maxParallelUpgrades {policy.maxParallelUpgrades}, maxUnavailable {policy.maxUnavailable}"


def plan_rollback(stack: str, history: Sequence[Update], current: Config, *, to_version: int | None = None,
                  canary_stack: str | None = None, canary_history: Sequence[Update] | None = None,
                  force: bool = False, all_config: bool = False) -> Plan:
    """The whole decision: refusals first (nothing changed yet), then the changes and their steps."""
    check_decryptable([(f"stack {stack}'s config", current)])
    target = choose_target(history, current, stack, to_version)
    check_decryptable([(f"update {target.version} of stack {stack}", target.config)])
    restored = dict(target.config) if all_config else restored_config(current, target.config)
    changes = config_changes(current, restored)
    left_alone = [] if all_config else config_changes(restored, target.config)
    rerun = not changes and to_version is not None and not history[0].good
    if not changes and not rerun:
        if left_alone:
            raise RollbackRefused(
                f"stack {stack}: update {target.version} ran what the stack runs now on its GPU nodes; the other "
                f"differences ({', '.join(c.path for c in left_alone[:5])}{' ...' if len(left_alone) > 5 else ''}) "
                "are left alone: --all-config restores them too")
        raise RollbackRefused(f"stack {stack}: update {target.version} ran the config the stack has now: "
                              "nothing to roll back")
    target_driver = driver_version(restored)
    if canary_stack is None:
        canary = "no promotion.canaryStack: this stack is not gated on a canary"
    elif canary_stack == stack:
        canary = "this stack is its own canary"
    else:
        try:
            ran = check_canary_ran(restored, canary_stack, canary_history)
            canary = f"the canary stack '{canary_stack}' ran {target_driver} in update(s) {', '.join(map(str, ran))}"
        except RollbackRefused as refusal:
            if not force:
                raise
            canary = f"--force: {refusal}"
    owner = driver_owner(restored) or driver_owner(current)
    if owner == DriverOwner.IMAGE:
        states = _generation_steps(current, restored)
        how = ("image-owned: each pool moves back to its kept previous generation, one step per `pulumi up`: "
               "scale it up, hold the new one, then retire it; watch the pool between steps")
    else:
        states = [("set the config of update %d" % target.version, restored)]
        how = (f"operator-owned: the GPU Operator rolls the nodes back one at a time through the stack's "
               f"NVIDIADriver/ClusterPolicy, under {_upgrade_policy_words(restored)} and the PDBs, as it "
               "rolled them forward")
    steps, before = [], current
    for title, state in states:
        step_changes = config_changes(before, state)
        if step_changes:
            _check_spec(stack, title, state)
            steps.append(Step(title, step_changes))
        before = state
    if rerun:  # the config already holds the target's values, but the last update with them did not succeed
        steps = [Step(f"`up` again: the config already holds update {target.version}'s values and the last "
                      f"update {history[0].result}", [])]
    if apply_changes(current, [c for s in steps for c in s.changes]) != restored:
        raise AssertionError(f"the rollback steps of stack {stack} do not lead to the config they restore")
    untypeable = [c for s in steps for c in s.changes
                  if not c.whole_key and not c.removes and path_value_text(c.new) is None]
    return Plan(stack, target, driver_version(current), target_driver, owner, changes, steps, how, canary,
                untypeable, left_alone, node_image_notes(stack, current, restored), all_config)
