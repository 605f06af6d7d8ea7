"""What a change to the stack files does to each stack, as a reviewer reads it: pure functions over the
facts of two renderings of a stack (base and head), for `gpu-rollout diff`.

A side's facts (:class:`StackView`) come from what the offline engine rendered, read the way the policy
pack reads them (:class:`policy.facts.StackFacts` over ``engine_contracts.resource_facts``): the operator's driver
objects, the cloud pools of each pool, the models' PodDisruptionBudgets; plus the program's own outputs
for what it states per pool (``engine_contracts.resource_facts.PoolSummary``: driver, node image, generations, held) and
the policy verdicts of the stage. Nothing here re-reads config or renders: :mod:`rollout.diff` renders both
sides with the engine `gpu-rollout plan` uses and hands the results in, so these functions are tested on
any two renderings, and the Pulumi SDK is never imported here.

Risks are said in plain words and come from two places only: the policy verdicts (a verdict new at head,
such as ``cloud-pool-not-replaced`` when a change would replace a node group, is reported with the rule's
own message) and what the verdicts cannot know: a prod pool moving to a driver the canary has not attested
(the attestations are files in the repository, looked up through a callable the caller passes), a pool or
a stack file removed, the driver changing owner.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from policy.evaluate import Violation
from policy.facts import Resource, StackFacts, node_image_owns_driver
from preview.pack_diff import PackChange
from policy.findings import Level
from gpu_knowledge import replacement
from engine_contracts import resource_facts as rf
from engine_contracts.resource_facts.values import flag_text

NONE = "-"  # a fact a side does not state


# ---------------------------------------------------------------- one side


@dataclass(frozen=True)
class StackView:
    """The facts of one rendered stack that a driver-upgrade review compares, as (subject, field) -> text,
    with the policy verdicts of its stage."""

    stack: str
    stage: str | None
    facts: Mapping[tuple[str, str], str]  # ("pool gpuh100", "driver") -> "580.173.02"
    pool_drivers: Mapping[str, str]  # pool -> the driver its nodes are pinned to (what attestation gates)
    violations: tuple[Violation, ...] = ()
    owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # pool -> owners of the models on it

    def subjects(self) -> list[str]:
        return list(dict.fromkeys(subject for subject, _ in self.facts))

    def of(self, subject: str) -> dict[str, str]:
        return {f: v for (s, f), v in self.facts.items() if s == subject}


def _text(value: Any) -> str:
    if value is None or value == "" or value == []:
        return NONE
    if isinstance(value, bool):
        return flag_text(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True)
    return str(value)


def flat_policy(policy: Any) -> dict[str, str]:
    """An upgradePolicy as sent (CRD spelling), flattened to ``podDeletion.timeoutSeconds``-style keys."""
    out: dict[str, str] = {}
    if not isinstance(policy, Mapping):
        return out
    for key, value in policy.items():
        if isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in flat_policy(value).items()})
        else:
            out[str(key)] = _text(value)
    return out


REPLACE_ONLY = "replace-only"  # fields of a cloud pool fixed at creation (gpu_knowledge.replacement)


def _replace_only(res: Resource) -> dict[str, str]:
    """A cloud pool's fields the cloud cannot change in place, as ``gpu_knowledge.replacement`` records them."""
    if res.type == rf.EKS_NODE_GROUP:
        fields, keys = replacement.eks_node_group_fields(res.props), replacement.EKS_REPLACE_ONLY
    else:
        fields, keys = replacement.aks_agent_pool_fields(res.props), replacement.AKS_REPLACE_ONLY
    return {key: fields[key] for key in keys}


def _driver_owner(stack: StackFacts) -> str:
    """``image`` when a node image brings the driver (a cloud pool on a driver-carrying image, or the
    cluster-wide driver switched off), else ``operator``."""
    cluster_wide = [d for d in stack.drivers if d.cluster_wide]
    images = any(node_image_owns_driver(r) for pool in stack.pools.values() for r in pool.resources
                 if r.type in rf.CLOUD_POOL_TYPES)
    return "image" if images or (cluster_wide and not cluster_wide[0].facts.enabled) else "operator"


def _waivers(stack: StackFacts) -> dict[tuple[str, str], str]:
    """A prod pool's waiver (promotion.waivers, on the promotion record): what differs from its canary pool that
    the gate accepts, and why."""
    out = {}
    for record in (r for r in stack.resources if r.type == rf.CONFIG_MAP and rf.is_promotion_record(r.props)):
        for pool, waiver in sorted(rf.read_promotion(record.props).waivers.items()):
            out[(f"pool {pool}", "gate waiver")] = f"accepts {', '.join(sorted(waiver.accept))}: {waiver.reason}"
    return out


def view(stack: str, resources: Sequence[Resource], outputs: Mapping[str, Any],
         violations: Iterable[Violation] = ()) -> StackView:
    """The facts of one rendering: ``resources`` as the pack sees them, the program's ``outputs``, and the
    stage's policy ``violations``."""
    found = StackFacts(resources)
    facts: dict[tuple[str, str], str] = {}

    def put(subject: str, name: str, value: Any) -> None:
        facts[(subject, name)] = _text(value)

    stated = rf.read_stack_outputs(outputs)
    put("stack", "stage", stated.stage)
    put("stack", "cluster", stated.cluster)
    put("stack", "change ticket", found.change_ticket)
    put("driver", "owner", _driver_owner(found))
    put("driver", "version", stated.driver_version)
    put("driver", "held pools stay on", stated.previous_driver_version)
    operator = next((d for d in found.drivers if d.facts.operator_version), None)
    put("GPU Operator", "chart", operator.facts.operator_version if operator else stated.operator_version)
    put("GPU Operator", "per-pool NVIDIADrivers", stated.per_pool_drivers)
    for driver in found.drivers:
        if driver.cluster_wide:
            enabled = driver.facts.enabled
            put("GPU Operator", "driver", f"{'enabled' if enabled else 'disabled'} {_text(driver.facts.version)}")
            for key, value in flat_policy(driver.facts.upgrade_policy if enabled else None).items():
                facts[("upgrade policy", key)] = value

    pool_drivers: dict[str, str] = {}
    for name, summary in stated.pools.items():
        subject = f"pool {name}"
        pool_drivers[name] = _text(summary.driver_version)
        put(subject, "driver", summary.driver_version)
        put(subject, "node image", summary.image)
        put(subject, "state", "held" if summary.held else "released")
        put(subject, "wave", summary.wave)
        for generation in summary.generations:
            put(subject, f"generation {generation.id}",
                f"{_text(generation.driver_version)} on {_text(generation.image)}"
                + (" (retired)" if generation.retired else ""))
        cloud = [r for r in found.pool(name).resources if r.type in rf.CLOUD_POOL_TYPES]
        if cloud:
            put(subject, "cloud pools", [r.name for r in cloud])
        for res in cloud:
            for key, value in _replace_only(res).items():
                facts[(subject, f"{REPLACE_ONLY} {res.name} {key}")] = value

    for (subject, name), value in _waivers(found).items():
        facts[(subject, name)] = value

    # Registration order follows the engine's resolution of dependencies, not the config: sort by name.
    for driver in sorted(found.drivers, key=lambda d: d.resource.name):
        if driver.cluster_wide:
            continue
        subject = f"NVIDIADriver {driver.resource.name}"
        put(subject, "version", driver.facts.version)
        put(subject, "state", "held" if driver.held else "released")
        for key, value in flat_policy(driver.facts.upgrade_policy).items():
            facts[(subject, f"upgrade policy {key}")] = value

    for model in sorted(found.models, key=lambda m: m.name):
        subject = f"model {model.name}"
        put(subject, "image", model.facts.image)
        put(subject, "CUDA", model.facts.cuda)
        put(subject, "pools", list(model.facts.pools))
        put(subject, "replicas", f"{_text(model.facts.replicas)} (min available {_text(model.facts.min_available)})")
        put(subject, "owners", list(model.facts.owners))

    return StackView(stack, stated.stage, facts, pool_drivers, tuple(violations), _pool_owners(found))


def _pool_owners(found: StackFacts) -> dict[str, tuple[str, ...]]:
    """Pool -> the owners of the models that run on it."""
    owners: dict[str, tuple[str, ...]] = {}
    for model in found.models:
        for pool in model.facts.pools:
            owners[pool] = tuple(dict.fromkeys([*owners.get(pool, ()), *model.facts.owners]))
    return owners


# ---------------------------------------------------------------- two sides


class Status(StrEnum):
    CHANGED = "changed"
    ADDED = "added"  # the stack file exists at head only
    REMOVED = "removed"  # ... at base only


@dataclass(frozen=True)
class Change:
    """One fact that differs; ``base`` or ``head`` is None where the subject exists on one side only."""

    subject: str
    field: str
    base: str | None
    head: str | None


class RiskKind(StrEnum):
    NEW_VIOLATION = "new-violation"  # a policy verdict new at head
    UNATTESTED_DRIVER = "unattested-driver"  # a prod pool moves to a driver the canary has not attested
    OWNER_CHANGE = "driver-owner-change"
    POOL_REMOVED = "pool-removed"
    STACK_REMOVED = "stack-removed"


@dataclass(frozen=True)
class Risk:
    kind: RiskKind
    text: str
    policy: str | None = None
    enforcement: str | None = None


@dataclass(frozen=True)
class StackDiff:
    stack: str
    file: str  # as the report names it (REV:path, or the path in the work tree)
    status: Status
    changes: tuple[Change, ...]
    introduced: tuple[Violation, ...]  # verdicts at head that base did not have
    fixed: tuple[Violation, ...]  # verdicts at base that head no longer has
    standing: tuple[Violation, ...] = ()  # mandatory verdicts at head that base had too (the change keeps them)
    risks: tuple[Risk, ...] = field(default=())
    note: str | None = None  # why a side is missing although its file exists (base not renderable)
    # What head was judged against (its last deployment, its canary), each as rollout.basis.Source.model() dumps it:
    # role, source, assumed, answeredBy, line.
    basis: tuple[Mapping[str, Any], ...] = ()
    # A mandatory verdict at head that rests on an assumed source: (policy, resource, message) -> which, and the
    # flags that answer it.
    assumptions: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    moved: tuple[str, ...] = ()  # pools whose nodes this change moves (driver, node image, generation, release)
    owners: tuple[str, ...] = ()  # the owners of the models on those pools (models[].owners), to mention

    def assumption(self, v: Violation) -> str | None:
        return self.assumptions.get((v.policy, v.resource, v.message))

    @property
    def newly_mandatory(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.introduced if v.enforcement == Level.MANDATORY)


def _verdict(v: Violation) -> tuple[str, str, str]:
    return (v.policy, v.resource, v.enforcement.value)


def _matched(before: Sequence[Violation], after: Sequence[Violation]) -> tuple[list[Violation], list[Violation],
                                                                            list[Violation]]:
    """(introduced, fixed, kept at head). Findings of one policy on one resource at one level are matched one for
    one, never collapsed: first those whose message is the same on both sides, then the rest in order (messages
    quote versions, so a finding kept across a bump reads otherwise); what one side has more of is introduced or
    fixed."""
    groups: dict[tuple[str, str, str], tuple[list[Violation], list[Violation]]] = {}
    for side, found in ((0, before), (1, after)):
        for v in found:
            groups.setdefault(_verdict(v), ([], []))[side].append(v)
    introduced: list[Violation] = []
    fixed: list[Violation] = []
    kept: list[Violation] = []
    for old, new in groups.values():
        same, rest = [], []
        for v in new:
            twin = next((o for o in old if o.message == v.message), None)
            if twin is not None:
                old.remove(twin)
                same.append(v)
            else:
                rest.append(v)
        kept += same + rest[:len(old)]
        introduced += rest[len(old):]
        fixed += old[len(rest):]
    # In the order each side lists them (identity, not equality: two findings may read alike).
    def order(found: Sequence[Violation], chosen: list[Violation]) -> list[Violation]:
        return sorted(chosen, key=lambda v: next(i for i, f in enumerate(found) if f is v))

    return order(after, introduced), order(before, fixed), order(after, kept)


def _summary(facts: Mapping[str, str]) -> str:
    """A subject on one side only, in one cell: its main facts (the upgrade policy and the replace-only
    fields of a pool that only one side has are left out; the rendering shows them)."""
    return ", ".join(f"{name} {value}" for name, value in facts.items()
                     if value != NONE and not name.startswith(("upgrade policy", REPLACE_ONLY)))


def changes(base: StackView | None, head: StackView | None) -> list[Change]:
    """Every fact that differs, subject by subject in the order the sides state them; a subject on one
    side only is one change whose other side is None."""
    subjects = list(dict.fromkeys((base.subjects() if base else []) + (head.subjects() if head else [])))
    out: list[Change] = []
    for subject in subjects:
        old = base.of(subject) if base else {}
        new = head.of(subject) if head else {}
        if not old or not new:
            out.append(Change(subject, "", _summary(old) if old else None, _summary(new) if new else None))
            continue
        for name in dict.fromkeys([*old, *new]):
            if old.get(name, NONE) != new.get(name, NONE):
                out.append(Change(subject, name, old.get(name, NONE), new.get(name, NONE)))
    return out


def compare(stack: str, file: str, base: StackView | None, head: StackView | None,
            unattested: Callable[[str], str | None] | None = None, base_error: str | None = None,
            basis: Sequence[Mapping[str, Any]] = (),
            assumptions: Mapping[tuple[str, str, str], str] | None = None) -> StackDiff:
    """The diff of one stack between two sides (None: the stack file does not exist on that side).
    ``unattested(driver)`` says why the canary has not attested a driver (None: it has); without it that
    risk is not judged. ``base_error``: the base file exists but the program under
    review refuses it (a change of the config schema); head is then shown whole. ``basis``: what head was judged
    against; ``assumptions``: the mandatory verdicts at head that rest on an assumed part of it."""
    status = Status.CHANGED if base_error else Status.ADDED if base is None else Status.REMOVED if head is None else Status.CHANGED
    added, gone, kept = _matched(base.violations if base else (), head.violations if head else ())
    introduced = tuple(added)
    fixed = tuple(gone) if head is not None else ()
    standing = tuple(v for v in kept if v.enforcement == Level.MANDATORY)
    note = f"the base side does not render with the program under review, so head is shown whole: {base_error}" if base_error else None
    found = tuple(changes(base, head))
    moved = moved_pools(found)
    told = tuple(sorted({o for side in (base, head) if side is not None for pool in moved
                         for o in side.owners.get(pool, ())}))
    diff = StackDiff(stack, file, status, found, introduced, fixed, standing, note=note,
                     basis=tuple(basis), assumptions=dict(assumptions or {}), moved=moved, owners=told)
    return replace(diff, risks=tuple(risks(diff, base, head, unattested)))


MOVING_FIELDS = ("driver", "node image", "state")  # a pool's facts whose change moves its nodes (and generations)


def moved_pools(found: Sequence[Change]) -> tuple[str, ...]:
    """The pools a change moves: added or removed, or a change of their driver, node image, held or released state
    or a generation."""
    out = [c.subject.removeprefix("pool ") for c in found if c.subject.startswith("pool ")
           and (c.field == "" or c.field in MOVING_FIELDS or c.field.startswith("generation "))]
    return tuple(dict.fromkeys(out))


def risks(diff: StackDiff, base: StackView | None, head: StackView | None,
          unattested: Callable[[str], str | None] | None) -> list[Risk]:
    """What a reviewer must weigh, in plain words (see the module's docstring for where each comes from)."""
    out: list[Risk] = []
    if head is None:
        out.append(Risk(RiskKind.STACK_REMOVED,
                        f"stack file {diff.file} is removed: the stack's resources stay deployed until someone runs "
                        f"`pulumi destroy --stack {diff.stack}`; this change does not remove them"))
        return out
    if base is not None:
        owner = (base.facts.get(("driver", "owner")), head.facts.get(("driver", "owner")))
        if owner[0] != owner[1]:
            out.append(Risk(RiskKind.OWNER_CHANGE,
                            f"{diff.stack}: the driver changes owner from {owner[0]} to {owner[1]}; a node must never "
                            "run both, so move pools by new generations, not in place"))
        for pool in base.pool_drivers:
            if pool not in head.pool_drivers:
                out.append(Risk(RiskKind.POOL_REMOVED,
                                f"{diff.stack} pool {pool} is removed: its cloud pools and their nodes go with it"))
    if head.stage == "prod" and unattested is not None:
        for pool, driver in head.pool_drivers.items():
            moved = base is None or base.pool_drivers.get(pool) != driver
            why = unattested(driver) if moved and driver != NONE else None
            if why is not None:
                out.append(Risk(RiskKind.UNATTESTED_DRIVER,
                                f"prod pool {pool} moves to {driver}, which the canary has not attested ({why})"))
    for v in sorted(diff.introduced, key=lambda v: (v.enforcement != Level.MANDATORY, v.policy, v.resource)):
        gate = ": `pulumi up` with the policy pack refuses this change" if v.enforcement == Level.MANDATORY else ""
        assumed = diff.assumption(v)
        out.append(Risk(RiskKind.NEW_VIOLATION, f"{v.message} ({v.policy}, {v.enforcement.value}{gate})"
                        + (f"; this {assumed}" if assumed else ""), v.policy, v.enforcement.value))
    return out


# ---------------------------------------------------------------- the report


@dataclass(frozen=True)
class Report:
    """Every stack whose file differs between the two sides; ``unchanged`` are the stacks that do not."""

    base: Mapping[str, str | None]  # {"revision": as given, "commit": full id or None}
    head: Mapping[str, str | None]
    stacks: tuple[StackDiff, ...]
    unchanged: tuple[str, ...] = ()
    pack: tuple[PackChange, ...] = ()  # changes under policy/: every one a risk (preview.pack_diff)


def _cell(value: str | None) -> str:
    """A table cell: a code span, so a value from a stack file cannot become markup or break the table."""
    if value is None:
        return "*(none)*"
    return "`" + " ".join(value.replace("`", "'").split()).replace("|", "\\|") + "`"


def _line(text: str) -> str:
    """A sentence from a rule message or a stack file, as text: no HTML (``<`` and ``&`` escaped), one line."""
    return " ".join(text.replace("&", "&amp;").replace("<", "&lt;").split())


def _side(side: Mapping[str, str | None]) -> str:
    commit = side.get("commit")
    label = side.get("revision") or "work tree"
    return f"`{label}`" + (f" ({commit[:12]})" if commit and not commit.startswith(str(label)) else "")


def markdown(report: Report) -> str:
    """One compact pull-request comment: per stack a table old -> new, then its risks and what it fixes."""
    lines = [f"### GPU fleet diff: {_side(report.base)} → {_side(report.head)}", ""]
    if report.pack:
        lines += ["#### The policy pack (`policy/`)", "",
                  "**Risks**: the pack is the gate. The prod `up` enforces the protected base's pack, so this change "
                  "judges only what merges after it; CODEOWNERS of `policy/` review it.", ""]
        lines += [f"- {_line(c.text)}" for c in report.pack]
        lines.append("")
    if not report.stacks:
        lines.append("No stack file differs." if report.pack else "No stack file differs: nothing to review here.")
    for diff in report.stacks:
        lines.append(f"#### `{diff.stack}` ({diff.status.value}: `{diff.file}`)")
        lines.append("")
        if diff.note:
            lines += [f"_{_line(diff.note)}_", ""]
        if diff.basis:
            lines += ["Judged against: " + "; ".join(_line(str(source["line"])) for source in diff.basis) + ".", ""]
        if diff.changes:
            lines += ["| what | field | base | head |", "|---|---|---|---|"]
            lines += [f"| {_line(c.subject)} | {_line(c.field) or '-'} | {_cell(c.base)} | {_cell(c.head)} |"
                      for c in diff.changes]
        else:
            lines.append("The file changed, but nothing this review compares did.")
        lines.append("")
        if diff.owners:
            lines += [f"**Model owners told**: {', '.join(diff.owners)}: this change moves pools "
                      f"{', '.join(f'`{p}`' for p in diff.moved)}, where their models run.", ""]
        if diff.risks:
            lines.append("**Risks**")
            lines += [f"- {_line(r.text)}" for r in diff.risks]
            lines.append("")
        if diff.fixed:
            lines.append("**Fixed**")
            lines += [f"- {_line(v.message)} ({v.policy}, {v.enforcement.value})" for v in diff.fixed]
            lines.append("")
        if diff.standing:
            lines.append("**Still refused** (mandatory at base already; this change keeps it)")
            lines += [f"- {_line(v.message)} ({v.policy})" + (f"; this {_line(diff.assumption(v) or '')}"
                                                              if diff.assumption(v) else "") for v in diff.standing]
            lines.append("")
    if report.unchanged:
        lines.append(f"Unchanged: {', '.join(f'`{s}`' for s in report.unchanged)}.")
    return "\n".join(lines).rstrip() + "\n"
