"""`gpu-rollout plan`: the offline preview of one stack, rendered by the real program under mocks.

The stack file is judged against its last deployment and, for a prod stack, its canary's outputs, taken from
where `diff` takes them (:mod:`rollout.basis`; the ones rendered offline are kept across runs by what determines
them, :mod:`preview.renderings`); the report's first lines say the stack, the file, the project
folder and those two sources, and a mandatory finding that would not stand if the assumed last deployment or
canary were otherwise says so and names the flags that answer it (:func:`assumption_notes`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checks.results import CheckResult, Status, any_failed
from policy.evaluate import Violation, evaluate, from_registered, load_config, mandatory, pack_config_dir
from preview.changes import SIGN, Change, Marker, Rendered, compare, counts
from preview.renderings import custom_resources, rendered, rendered_outputs, rendered_run
from preview.run import PROGRAM_FILE, ProgramRun, recanaried, redeployed
from preview.summary import payload_summary, payloads, review_fields
from rollout import basis, documents, schemas
from rollout import console as consoles
from refusals.exits import Exit
from fleetspec.load import SpecError, SpecProblem, load_stack_file, read_stack_file, spec_from_config, stack_file
from fleetspec.model import PROJECT
from renderers.ownership import shared_objects
from engine_contracts.resource_facts import read_stack_outputs
from fleetspec.stacks import stack_name
from vocabulary.check_ids import CheckId
from vocabulary.policy_ids import PolicyId
from vocabulary.verdicts import Verdict

# The one rule that reads the canary's outputs (through the promotion record, components/promotion.py).
CANARY_GATE = PolicyId.CANARY_ATTESTED


def read_previous_outputs(path: Path, flag: str = "--previous-outputs") -> dict[str, Any]:
    """A stack's outputs as `pulumi stack output --json` prints them; anything else is invalid input."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([SpecProblem(flag, f"cannot read {path}: {exc.strerror}")]) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecError([SpecProblem(flag, f"{path} is not JSON: {exc}")]) from None
    if not isinstance(document, dict):
        raise SpecError([SpecProblem(flag, f"{path} must hold a JSON object of stack outputs")])
    return document


def canary_file(path: Path, canary: str, project_dir: Path | None = None) -> Path | None:
    """The canary's stack file: beside this stack file, else in the project folder; None when neither has it."""
    for folder in (path.parent, project_dir):
        if folder is not None and stack_file(folder, canary).is_file():
            return stack_file(folder, canary)
    return None


def run(
    stack: str, path: Path, project_dir: Path, previous_outputs: dict[str, Any] | None = None,
    canary_outputs: dict[str, Any] | None = None, config: dict[str, str] | None = None,
) -> ProgramRun:
    """Render ``stack`` from its stack file with the project's program (kept across runs by what determines it,
    :mod:`preview.renderings`); SpecError means exit 2. ``config``: the stack file as already read
    (:func:`read_stack_file`), else it is read here."""
    program = project_dir / PROGRAM_FILE
    if not program.is_file():
        raise SpecError([SpecProblem("--project-dir", f"no Pulumi program {program}: run from the project "
                                     "folder (the one with Pulumi.yaml) or pass --project-dir")])
    config = read_stack_file(path) if config is None else config
    check_ownership(config, path, project_dir)
    referenced = canary_stack_outputs(config, path, program, canary_outputs, project_dir)
    return rendered_run(config, stack, program, previous_outputs, referenced)


def canary_stack_outputs(
    config: dict[str, str], path: Path, program: Path, given: dict[str, Any] | None, project_dir: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """What the StackReference of a promoted stack to its canary reads offline: the outputs given
    (``--canary-outputs``: `pulumi stack output --json --stack <canary>`, or the backend's), else those of the
    canary's stack file beside this one (else in the project folder), rendered as plan renders it (what the
    canary declares; the engine's preview reads what it runs; kept across runs, :mod:`preview.renderings`), else
    none."""
    spec = spec_from_config(config, source=str(path))
    if spec.promotion is None:
        return {}
    name = stack_name(spec.promotion.canaryStack)
    if given is not None:
        return {name: given}
    found = canary_file(path, name, project_dir)
    if found is None:
        return {}
    return {name: rendered_outputs(read_stack_file(found), name, program)}


def check_ownership(config: dict[str, str], path: Path, project_dir: Path | None = None) -> None:
    """A stack promoted from a canary stack on the same cluster must own none of the canary's objects."""
    spec = spec_from_config(config, source=str(path))
    if spec.promotion is None:
        return
    canary_path = canary_file(path, stack_name(spec.promotion.canaryStack), project_dir)
    if canary_path is None:
        return  # the canary stack lives elsewhere (another repo or cluster): nothing to compare here
    shared = shared_objects(spec, load_stack_file(canary_path))
    if shared:
        raise SpecError(
            [SpecProblem(f"{PROJECT}:promotion.canaryStack",
                         f"this stack and '{spec.promotion.canaryStack}' both own {', '.join(shared)} on cluster "
                         f"{spec.cluster.name}; each object needs one owner (see gpuOperator.clusterPolicy: external)")],
            source=str(path),
        )


def policy_report(result: ProgramRun, now: datetime | None = None, project_dir: Path | None = None) -> list[Violation]:
    """The pack's rules over what the program registered, at the stage's enforcement (the project's
    policy/<stage>.json: :func:`policy.evaluate.pack_config_dir`), as of ``now`` (default: the clock)."""
    config = load_config(read_stack_outputs(result.outputs).stage, pack_config_dir(project_dir))
    return evaluate(from_registered(result.resources), config, now)


def live_checks(kube: Any, spec: Any, project_dir: Path) -> list[CheckResult]:
    """``plan --from-cluster``: preflight's checks that ask a policy's own question (their ids are policy ids:
    ``spare-capacity`` and the driver's and operator's compatibility), answered on what the cluster runs (its
    nodes, their GPUs, the pods on them) rather than what the stack file declares, and ``pool-adopted`` (a cloud
    pool the change would create that the cluster runs already, unadopted, refuses); one read, read-only, and
    another cluster than the stack's is refused before any check runs, as preflight does."""
    from checks import preflight
    from checks.attested import read_attested

    shared = {policy.value for policy in PolicyId} | {CheckId.POOL_ADOPTED.value}
    found = [r for r in preflight.run_preflight(kube, spec, read_attested(project_dir, spec)) if r.id in shared]
    # Preflight warns of a pool the cluster runs that the stack neither made nor adopts; the change judged here is
    # the `up` that would create it again, so here it refuses.
    return [replace(r, status=Status.FAIL) if r.id == CheckId.POOL_ADOPTED and r.status is Status.WARN else r
            for r in found]


# ---------------------------------------------------------------- what the judgement rests on


def verdict_key(v: Violation) -> tuple[str, str, str]:
    return (v.policy, v.resource, v.message)


def assumption_notes(
    result: ProgramRun, violations: list[Violation], last: basis.Source, canary: basis.Source | None,
    with_canary: Callable[[dict[str, Any]], ProgramRun], now: datetime | None = None, project_dir: Path | None = None,
) -> dict[tuple[str, str, str], str]:
    """For each mandatory finding that would not stand under another last deployment or canary than the assumed
    ones, which assumption it rests on and the flags that answer it. A finding rests on the assumed last
    deployment when it is gone once this very stack file is taken as deployed (``preview.run.redeployed``: a
    driver it already ran is no promotion, a pool it already has is not replaced); on the assumed canary when it
    is gone once the canary runs what this stack runs (``with_canary`` renders with those outputs)."""
    refused = mandatory(violations)
    notes: dict[tuple[str, str, str], list[basis.Source]] = {}
    if not refused:
        return {}
    if last.assumed:
        standing = {verdict_key(v) for v in mandatory(policy_report(redeployed(result), now, project_dir))}
        for v in refused:
            if verdict_key(v) not in standing:
                notes.setdefault(verdict_key(v), []).append(last)
    if canary is not None and canary.assumed and any(v.policy == CANARY_GATE for v in refused):
        standing = {verdict_key(v) for v in mandatory(policy_report(with_canary(result.outputs), now, project_dir))}
        for v in refused:
            if v.policy == CANARY_GATE and verdict_key(v) not in standing:
                notes.setdefault(verdict_key(v), []).append(canary)
    return {key: "rests on the assumed " + " and the assumed ".join(f"{s.role} ({s.text})" for s in sources)
            + f"; {basis.either(_flags(sources))} answers it"
            for key, sources in notes.items()}


def _flags(sources: list[basis.Source]) -> tuple[str, ...]:
    """The flags that answer these sources, each once, the one that answers all of them last."""
    flags = dict.fromkeys(f for source in sources for f in source.flags)
    return tuple(sorted(flags, key=lambda f: all(f in source.flags for source in sources)))


@dataclass
class Judged:
    """A stack file rendered on its last deployment and canary, and the pack's verdicts on it."""

    result: ProgramRun
    violations: list[Violation]
    sources: tuple[basis.Source, ...]
    notes: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # The driver the last deployment ran (its outputs' driverVersion); None for a first deployment, or outputs
    # that state none. Where it moves from: `fleet plan` shows it, not the file's previousVersion.
    last_driver: str | None = None

    # Each resource marked against the last deployment's rendering (:mod:`preview.changes`); None where the last
    # deployment is known by its outputs alone (given, or the backend's).
    changes: list[Change] | None = None
    # With --from-cluster: what the live checks that judge a policy's own question found (:func:`live_checks`),
    # and where they were read; None offline.
    live: list[CheckResult] | None = None

    @property
    def refused(self) -> bool:
        return bool(mandatory(self.violations)) or any_failed(self.live or [])

    @property
    def verdict(self) -> Verdict:
        """The one verdict every verb that judges a change gives: refused on a mandatory finding (or a failed live
        check), admitted with advice where an advisory finding (or a live warning) is left, else admitted."""
        if self.refused:
            return Verdict.REFUSED
        if self.violations or any(r.status is not Status.PASS for r in self.live or []):
            return Verdict.ADVISED
        return Verdict.ADMITTED

    def violation_models(self) -> list[schemas.Violation]:
        return [schemas.Violation.of(v, self.notes.get(verdict_key(v))) for v in self.violations]


def judge(
    stack: str, path: Path, project_dir: Path, *, previous_outputs: dict[str, Any] | None = None,
    previous_file: Path | None = None, canary_outputs: dict[str, Any] | None = None, canary_path: Path | None = None,
    from_backend: bool = False, now: datetime | None = None,
) -> Judged:
    """Render the stack file on its last deployment and canary, from where :mod:`rollout.basis` says, and judge it."""
    config = read_stack_file(path)
    spec = spec_from_config(config, source=str(path))
    program = project_dir / PROGRAM_FILE
    same_as_file = False  # the last deployment is this very stack file
    last_resources: list[Rendered] | None = None  # its rendering's resources, where it was rendered here
    if previous_file is not None:
        last = basis.given_outputs(previous_file, "last deployment", "--previous-outputs")
    elif from_backend:
        previous_outputs, last = basis.backend_outputs(project_dir, stack, "last deployment",
                                                       basis.LAST_DEPLOYMENT_FLAGS)
    else:
        committed = basis.committed_base(project_dir, path) if program.is_file() else \
            basis.Committed(None, "none: no program to render it with")
        if committed.config is None:
            last = basis.Source("last deployment", f"a first deployment ({committed.text})", True,
                                basis.LAST_DEPLOYMENT_FLAGS)
            last_resources = []
        else:
            last = basis.Source("last deployment", committed.text, True, basis.LAST_DEPLOYMENT_FLAGS)
            same_as_file = committed.config == config
            if not same_as_file:
                # Rendered with the canary this stack is judged on: the promotion record's canary fields come from
                # the canary, not from the change, so they never show as one.
                previous_outputs, last_resources = rendered(
                    committed.config, stack, program, None,
                    canary_stack_outputs(config, path, program, canary_outputs, project_dir))
    canary: basis.Source | None = None
    if spec.promotion is not None:
        name = stack_name(spec.promotion.canaryStack)
        role = f"canary '{name}'"
        if canary_path is not None:
            canary = basis.given_outputs(canary_path, role, "--canary-outputs")
        elif from_backend:
            found_outputs, canary = basis.backend_outputs(project_dir, name, role, basis.CANARY_FLAGS)
            canary_outputs = found_outputs if found_outputs is not None else {}
        else:
            found = canary_file(path, name, project_dir)
            text = f"what {_shown(found, project_dir)} declares, rendered offline" if found is not None else \
                f"none: no {stack_file(Path(), name)} beside the stack file or in the project folder, so it shows no driver"
            canary = basis.Source(role, text, True, basis.CANARY_FLAGS)

    if from_backend and previous_outputs is not None and program.is_file():
        # The markers' base: the stack file as its last succeeded update ran it (the commit the history records),
        # rendered on the canary this stack is judged on; the outputs stay the backend's own.
        ran = basis.backend_base(project_dir, path, stack)
        if ran.config is not None:
            _, last_resources = rendered(
                ran.config, stack, program, None, canary_stack_outputs(config, path, program, canary_outputs, project_dir))
        last = replace(last, text=f"{last.text}; changes marked against {ran.text}" if ran.config is not None
                       else f"{last.text}; changes not marked ({ran.text})")

    def render(canary_given: dict[str, Any] | None) -> ProgramRun:
        rendered = run(stack, path, project_dir, None if same_as_file else previous_outputs, canary_given, config)
        return redeployed(rendered) if same_as_file else rendered

    result = render(canary_outputs)
    violations = policy_report(result, now, project_dir)
    sources = (last,) if canary is None else (last, canary)
    deployed = result.outputs if same_as_file else previous_outputs
    current = custom_resources(result)
    if same_as_file:
        last_resources = current
    return Judged(result, violations, sources,
                  # Another canary changes only the promotion record's canary fields: no second rendering.
                  assumption_notes(result, violations, last, canary, lambda given: recanaried(result, given), now,
                                   project_dir),
                  read_stack_outputs(deployed).driver_version if deployed is not None else None,
                  compare(current, last_resources) if last_resources is not None else None)


def _shown(path: Path, project_dir: Path) -> str:
    try:
        return str(path.resolve().relative_to(project_dir.resolve()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- the report


def render_json(result: ProgramRun, violations: list[Violation] | None = None, judged: Judged | None = None,
                heading: schemas.Basis | None = None) -> str:
    resources = [schemas.PlannedResource(type=r.type, name=r.name, inputs=r.inputs, adopt=r.adopt or None)
                 for r in sorted(result.custom_resources, key=lambda r: (r.type, r.name))]
    if judged is None:
        judged = Judged(result, list(violations or []), ())
    document = schemas.PlanDocument(
        stack=result.stack, resources=resources, outputs=result.outputs, violations=judged.violation_models(),
        verdict=judged.verdict,
        live=None if judged.live is None else [schemas.CheckResult.of(r) for r in judged.live],
        changes=None if judged.changes is None else [
            schemas.PlannedChange(marker=c.marker, type=c.type, name=c.name, replacedBy=list(c.replaced_by),
                                  fields=[schemas.ChangedField(field=k, old=a, new=b) for k, a, b in c.fields])
            for c in judged.changes])
    if heading is not None:
        document.basis = heading
    return documents.dumps(document).rstrip("\n")


def render_violations(violations: list[Violation], console: Console,
                      notes: dict[tuple[str, str, str], str] | None = None) -> None:
    if not violations:
        console.print("policies: no violations")
        return
    notes = notes or {}
    table = Table(title="policy violations", show_lines=True)
    # The resource under its policy: the message keeps the width (a key id or a version is never cut).
    for column in ("policy / resource", "enforcement", "message"):
        table.add_column(column, overflow="fold")
    for v in sorted(violations, key=lambda v: (v.enforcement.value != "mandatory", v.policy, v.resource)):
        style = "bold red" if v.enforcement.value == "mandatory" else "yellow"
        note = notes.get(verdict_key(v))
        message = escape(v.message) + (f"\n[italic]{escape(note)}[/]" if note else "")
        if v.enforcement.value == "mandatory" and v.config_keys:  # where the fix goes (the whole fix is in --json)
            message += f"\n[dim]edit: {escape(', '.join(v.config_keys))}[/]"
        table.add_row(f"{v.policy}\n[dim]{escape(v.resource)}[/]", f"[{style}]{v.enforcement.value}[/]", message)
    console.print(table)


def short_type(type_token: str) -> str:
    """A resource type as a reviewer names it: the kind (``NVIDIADriver``, ``AgentPool``), or ``provider
    kubernetes``; the whole token is in ``--json``."""
    package, _, rest = type_token.partition(":")
    if package == "pulumi" and rest.startswith("providers:"):
        return f"provider {rest.removeprefix('providers:')}"
    return type_token.rsplit(":", 1)[-1]


def change_summary(changes: list[Change] | None) -> str:
    """The line near the top: how many resources of each marker, against the last deployment's rendering."""
    if changes is None:
        return ("changes: not marked (the last deployment is known by its outputs only: with --previous-outputs, "
                "or --from-backend where its update recorded no clean commit, nothing is rendered to compare with)")
    tally = counts(changes)
    return "changes against the last deployment: " + (", ".join(f"{n} {marker}" for marker, n in tally.items())
                                                      or "no resources")


def render_table(result: ProgramRun, console: Console, changes: list[Change] | None = None,
                 show_all: bool = False) -> None:
    """One row per resource: its kind above its name (the whole type token is in ``--json``), its change marker
    where the last deployment's rendering is known, then what a reviewer checks: a changed field old → new. A
    resource the same as deployed is folded into a count unless ``show_all``. No column cuts a value: a row folds
    rather than end in an ellipsis."""
    marked = {(c.type, c.name): c for c in changes or []}
    table = Table(title=f"gpu-driver-upgrade plan: stack {result.stack}", show_lines=True)
    table.add_column("resource", overflow="fold")
    table.add_column("what a reviewer checks", overflow="fold")
    folded = 0
    for resource in sorted(result.custom_resources, key=lambda r: (r.type, r.name)):
        change = marked.get((resource.type, resource.name))
        if change is not None and change.marker is Marker.SAME and not show_all:
            folded += 1
            continue
        fields = review_fields(resource.type, resource.inputs)
        if change is not None and change.marker in (Marker.UPDATE, Marker.REPLACE):
            fields = [(k, f"{old} → {new}") for k, old, new in change.fields]
            if change.replaced_by:
                fields.append(("replaced because", ", ".join(change.replaced_by) + " cannot change in place"))
        if resource.adopt:  # imported, not created: the engine reads the existing one into the stack
            fields = [("adopt", f"the existing {resource.adopt} (not created)"), *fields]
        mark = f"{SIGN[change.marker]} {change.marker.value} " if change is not None else ""
        # Values are text, not markup: "[secret]" or a selector in brackets must print as written.
        table.add_row(f"{escape(mark)}[dim]{escape(short_type(resource.type))}[/]\n{escape(resource.name)}",
                      escape("\n".join(f"{k}: {v}" for k, v in fields)))
    for change in changes or []:
        if change.marker is Marker.DELETE:
            table.add_row(f"{SIGN[change.marker]} delete [dim]{escape(short_type(change.type))}[/]\n"
                          f"{escape(change.name)}", "in the last deployment, not in this one")
    if table.row_count:
        console.print(table)
    if folded:
        console.print(f"{folded} resource(s) the same as the last deployment, not shown (--all shows them)")
    outputs = read_stack_outputs(result.outputs)
    console.print(
        f"stage [bold]{outputs.stage}[/], driver [bold]{outputs.driver_version}[/]; "
        f"released pools: {', '.join(outputs.released_pools) or '-'}; "
        f"held pools: {', '.join(outputs.held_pools) or '-'}"
    )


def render_payloads(result: ProgramRun, console: Console) -> None:
    """``--show-data``: each ConfigMap payload after the report, whole and unwrapped, to read or copy as the file
    it is, under its full sha256 (the table shows its start)."""
    for resource in sorted(result.custom_resources, key=lambda r: (r.type, r.name)):
        for key, text in payloads(resource.type, resource.inputs):
            console.print(f"--- {short_type(resource.type)} {resource.name}: data[{key!r}] "
                          f"({payload_summary(text, digits=64)}) ---", markup=False, soft_wrap=True)
            console.print(text, markup=False, highlight=False, soft_wrap=True, end="" if text.endswith("\n") else "\n")


def render_live(results: list[CheckResult], console: Console) -> None:
    """``--from-cluster``: the live checks that judge a policy's question, one row each."""
    style = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}
    table = Table(title="live checks (the policies' questions, on what the cluster runs)", show_lines=False)
    for column in ("status", "check / subject", "finding"):
        table.add_column(column, overflow="fold")
    for r in results:
        table.add_row(f"[{style[r.status]}]{r.status.value}[/]", f"{r.id}\n[dim]{escape(r.subject)}[/]",
                      escape(r.message))
    console.print(table)


def verdict_line(judged: Judged, stack: str) -> str:
    """The report's last line: the verdict, what it counts, and the next command."""
    refused = mandatory(judged.violations)
    failed = [r for r in judged.live or [] if r.status is Status.FAIL]
    counts = [f"{len(refused)} mandatory finding(s)"] if refused else []
    counts += [f"{len(failed)} failed live check(s)"] if failed else []
    advice = len(judged.violations) - len(refused)
    warned = sum(r.status is Status.WARN for r in judged.live or [])
    if judged.verdict is Verdict.REFUSED:
        return (f"verdict: refused ({', '.join(counts)}): fix them (each names what to edit) and run "
                f"`gpu-rollout plan --stack {stack}` again")
    notes = [f"{advice} advisory finding(s)"] if advice else []
    notes += [f"{warned} live warning(s)"] if warned else []
    said = f" ({', '.join(notes)} to read)" if notes else ""
    return (f"verdict: {judged.verdict.value}{said}; next: `gpu-rollout diff --markdown` for the pull request; "
            "once merged, the deploy workflow runs it (`fleet advance`)")


def heading(stack: str, shown_path: str, project_dir: Path, project_found: str,
            sources: tuple[basis.Source, ...]) -> schemas.Basis:
    return schemas.Basis(stack=stack, stackFile=shown_path, projectDir=str(project_dir), projectFound=project_found,
                         sources=[s.model() for s in sources])


def heading_lines(head: schemas.Basis, sources: tuple[basis.Source, ...]) -> list[str]:
    return [f"plan of stack {head.stack}: {head.stackFile} in project {head.projectDir} "
            f"({head.projectFound})", *(s.line() for s in sources)]


def execute(
    stack: str, stack_file: Path, as_json: bool, project_dir: Path, previous_outputs: dict[str, Any] | None = None,
    canary_outputs: dict[str, Any] | None = None, *, previous_file: Path | None = None,
    canary_path: Path | None = None, from_backend: bool = False, show_data: bool = False,
    shown_path: str | None = None, project_found: str = "--project-dir", now: datetime | None = None,
    live: Callable[[], tuple[list[CheckResult], str]] | None = None, show_all: bool = False,
) -> Exit:
    """Render, run the policies as of ``now``, print (table or one JSON document); 1 on a mandatory violation.
    The first lines say what was read and what the judgement rests on. ``live`` (``--from-cluster``): the live
    checks of the policies' questions and where they were read (a failed one refuses, as preflight would)."""
    judged = judge(stack, stack_file, project_dir, previous_outputs=previous_outputs, previous_file=previous_file,
                   canary_outputs=canary_outputs, canary_path=canary_path, from_backend=from_backend, now=now)
    if live is not None:
        judged.live, where = live()
        judged.sources = (*judged.sources, basis.Source("cluster", where, False, ()))
    head = heading(stack, shown_path or str(stack_file), project_dir, project_found, judged.sources)
    if as_json:
        sys.stdout.write(render_json(judged.result, judged=judged, heading=head) + "\n")
    else:
        console = consoles.stdout()
        for line in heading_lines(head, judged.sources):
            console.print(line, markup=False, highlight=False)
        console.print(change_summary(judged.changes), markup=False, highlight=False)
        render_table(judged.result, console, judged.changes, show_all)
        render_violations(judged.violations, console, judged.notes)
        if judged.live is not None:
            render_live(judged.live, console)
        if show_data:
            render_payloads(judged.result, console)
        console.print(verdict_line(judged, stack), markup=False, highlight=False)
    return Exit.failed_if(judged.refused)
