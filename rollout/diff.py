"""`gpu-rollout diff`: what a change to the stack files does to each stack, between two git revisions.

Both sides of every changed stack are rendered in this one process by the engine `gpu-rollout plan` uses,
step for step (:mod:`rollout.plan`: the ownership check, the canary reference, the project's ``__main__.py``
under Pulumi's mocks, kept across runs by what determines it: :func:`preview.renderings.rendered_run`; then the
stage's policy report), so the SDKs are imported once. Both sides run the work tree's program: the diff is of
config, as the code under review would deploy it. The head side is rendered against the base side's outputs as its
last deployment, so the rules that compare with a deployment (``cloud-pool-not-replaced``,
``per-pool-mode-own-change``, whether a prod driver is a promotion) judge the step from base to head, and a
promoted stack reads its canary from the canary's stack file on the same side: the offline assumption
`gpu-rollout plan` makes too (:mod:`rollout.basis`). ``--previous-outputs``/``--canary-outputs`` (one
``--stack``) or ``--from-backend`` replace it; each stack's report says what head was judged against, and a
mandatory verdict that rests on an assumption says so. The comparison is :mod:`preview.diff`; the revisions
and their stack files are :mod:`git_revisions.repository`.

Exit codes: 0 whenever the report was rendered, risks and new violations included (the report is for
review; the gate is the policy pack in `pulumi preview`/`up` and `gpu-rollout plan`, which exit 1); 2 for
a revision, ``--stack`` or stack file that cannot be used (the message names the flag, or the file at its
revision, and what is wrong).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.evaluate import Violation, from_registered
from preview import diff as compare
from preview.pack_diff import PACK_DIR, pack_changes
from preview.renderings import rendered_run
from preview.run import PROGRAM_FILE, ProgramRun, recanaried, redeployed
from git_revisions.repository import Repository, RevisionError, Side
from rollout import basis, documents, schemas
from rollout import console as consoles
from rollout import plan
from refusals.exits import Exit
from engine_contracts import attestation
from fleetspec.load import MAX_STACK_FILE_BYTES, SpecError, SpecProblem, read_stack_file, spec_from_config
from fleetspec.stacks import stack_name


class _Files:
    """Each side's stack files as files: the work tree's where they lie, a revision's written once to a
    temporary folder (all of them, as `plan` reads a promoted stack's canary file beside it). Errors about
    a written file name it as ``REV:path``."""

    def __init__(self, repo: Repository, exits: ExitStack, *sides: Side) -> None:
        self.repo, self._exits = repo, exits
        self._folders: dict[str, Path] = {}  # by side (its flag)
        self._labels = {side.flag: side.label for side in sides}

    def path(self, side: Side, stack: str) -> Path:
        file = side.files[stack]
        self.repo.check_size(side, stack)  # refused unread past the bound, at a revision or in the work tree
        if file.path is not None:
            return file.path
        folder = self._folders.get(side.flag)
        if folder is None:
            folder = Path(self._exits.enter_context(tempfile.TemporaryDirectory(prefix="gpu-rollout-diff-")))
            for name, other in side.files.items():
                if other.size <= MAX_STACK_FILE_BYTES:  # one past the bound fails only where it is compared
                    (folder / other.name).write_bytes(self.repo.read(side, name))
            self._folders[side.flag] = folder
        return folder / file.name

    def named(self, error: SpecError) -> SpecError:
        """``error`` with each temporary path replaced by the revision and path it was read from."""
        def fix(text: str) -> str:
            for flag, folder in self._folders.items():
                text = text.replace(f"{folder}/", f"{self._labels[flag]}:{self.repo.prefix}")
            return text

        problems = [SpecProblem(fix(p.path), fix(p.message)) for p in error.problems]
        return SpecError(problems, source=fix(error.source))


def _unattested(project_dir: Path) -> Callable[[str | None], Callable[[str], str | None]]:
    """For a prod stack promoted from a canary stack: why that canary has not attested a driver (None: it has),
    from the project's attestation files as the program and the pack read them (``engine_contracts.attestation``). Only
    whether a sound file exists; the pack's ``canary-attested`` judges soak time and GPU architectures."""
    directory = project_dir / attestation.ATTESTATION_DIR

    def of_canary(canary: str | None) -> Callable[[str], str | None]:
        def why(driver: str) -> str | None:
            if canary is None:
                return "the stack names no promotion.canaryStack"
            try:
                path = attestation.path_for(directory, canary, driver)
                if not path.is_file():
                    return f"no {path.relative_to(project_dir)}"
                attestation.load(path)
            except attestation.AttestationError as error:
                return str(error)
            return None

        return why

    return of_canary


def _declared_canary(config: dict[str, str] | None) -> str | None:
    """The canary stack a stack's config names (promotion.canaryStack); None without one or for invalid config."""
    if config is None:
        return None
    try:
        promotion = spec_from_config(config, source="stack").promotion
    except SpecError:
        return None
    return promotion.canaryStack if promotion is not None else None


@dataclass(frozen=True)
class Given:
    """What replaces the offline assumption (:mod:`rollout.basis`): outputs given in files (one stack's), or
    the backend's for every stack."""

    previous: tuple[dict[str, Any], basis.Source] | None = None
    canary: tuple[dict[str, Any], basis.Source] | None = None
    from_backend: bool = False


class _Renderer:
    """Renders stack files with `plan`'s engine, each side's stack files read once, and answers a promoted
    stack's reference to its canary from the canary's own rendering on the same side (rendered once per
    content when the diff has not rendered it already), instead of `plan.run` rendering the canary again
    for every rendering of the prod stack. The canary reference reads the canary's driver and pools."""

    def __init__(self, files: _Files, project_dir: Path, given: Given | None = None) -> None:
        self.files, self.program, self.project_dir = files, project_dir / PROGRAM_FILE, project_dir
        self.given = given or Given()
        self._backend: dict[tuple[str, str], tuple[dict[str, Any] | None, basis.Source]] = {}
        if not self.program.is_file():
            raise SpecError([SpecProblem("--project-dir", f"no Pulumi program {self.program}: diff renders both "
                                         "sides with the project's program (the folder with Pulumi.yaml)")])
        self._owners_checked: set[tuple[str, str]] = set()
        self._configs: dict[tuple[str, str], dict[str, str]] = {}
        self._outputs: dict[tuple[str, str], dict[str, Any]] = {}  # (side, stack) -> a rendering's outputs
        self._first: dict[tuple[str, frozenset[tuple[str, str]]], ProgramRun] = {}  # by content
        self._canaries: dict[tuple[str, str], str | None] = {}

    def config(self, side: Side, stack: str) -> dict[str, str]:
        key = (side.flag, stack)
        if key not in self._configs:
            self._configs[key] = read_stack_file(self.files.path(side, stack))
        return self._configs[key]

    def canary(self, side: Side, stack: str) -> str | None:
        """The canary stack a stack is promoted from, when that stack file is on this side (None too for a
        file that is no valid stack: it is reported where it is compared)."""
        key = (side.flag, stack)
        if key not in self._canaries:
            try:
                promotion = spec_from_config(self.config(side, stack), source=stack).promotion
            except SpecError:
                promotion = None
            name = stack_name(promotion.canaryStack) if promotion is not None else None
            self._canaries[key] = name if name in side.files and name != stack else None
        return self._canaries[key]

    def declared_canary(self, side: Side, stack: str) -> str | None:
        """The canary stack the side's stack file names, wherever its file is (None: none, or invalid config)."""
        try:
            name = _declared_canary(self.config(side, stack))
        except SpecError:
            return None
        return stack_name(name) if name is not None else None

    def from_backend(self, stack: str, role: str, flags: tuple[str, ...]) -> tuple[dict[str, Any] | None, basis.Source]:
        if (stack, role) not in self._backend:
            self._backend[(stack, role)] = basis.backend_outputs(self.project_dir, stack, role, flags)
        return self._backend[(stack, role)]

    def _canary_outputs(self, side: Side, stack: str) -> dict[str, Any] | None:
        if self.given.canary is not None:
            return self.given.canary[0]
        if self.given.from_backend:
            canary = self.declared_canary(side, stack)
            if canary is None:
                return None
            return self.from_backend(canary, f"canary '{canary}'", basis.CANARY_FLAGS)[0] or {}
        name = self.canary(side, stack)
        if name is None:
            return None
        return self._outputs.get((side.flag, name)) or self.first_outputs(side, name)

    def first_outputs(self, side: Side, stack: str) -> dict[str, Any]:
        """The outputs of a first deployment of the side's stack file (once per content)."""
        return self._first_run(side, stack).outputs

    def _first_run(self, side: Side, stack: str) -> ProgramRun:
        key = (stack, frozenset(self.config(side, stack).items()))
        if key not in self._first:
            self._first[key] = self._run(side, stack, None)
        return self._first[key]

    def _run(self, side: Side, stack: str, previous: dict[str, Any] | None,
             canary: dict[str, Any] | None = None) -> ProgramRun:
        """What `plan.run` does, with the stack file read once per side and the ownership check (which reads
        the canary's file) made once per side, though a diff renders each stack twice. ``canary``: outputs that
        replace the canary's."""
        config, path = self.config(side, stack), self.files.path(side, stack)
        if (side.flag, stack) not in self._owners_checked:
            plan.check_ownership(config, path)
            self._owners_checked.add((side.flag, stack))
        given = canary if canary is not None else self._canary_outputs(side, stack)
        referenced = plan.canary_stack_outputs(config, path, self.program, given)
        return rendered_run(config, stack, self.program, previous, referenced)

    def render(self, side: Side, stack: str, previous: dict[str, Any] | None) -> compare.StackView:
        """One side of a stack: rendered on ``previous`` as its last deployment, with its policy report."""
        return self._view(side, stack, self._run(side, stack, previous))

    def judge_head(self, side: Side, stack: str, base_outputs: dict[str, Any] | None, base_text: str,
                   canary_file: str | None) -> tuple[compare.StackView, list[basis.Source], dict[Any, str]]:
        """Head of a stack, rendered on its last deployment (given, the backend's, else base's rendering, which
        ``base_text`` names, or why there is none) with its canary's outputs likewise (``canary_file``: the
        canary's file at head, None when there is none); what it was judged against, and the mandatory verdicts
        that rest on an assumed part of that."""
        previous: dict[str, Any] | None
        if self.given.previous is not None:
            previous, last = self.given.previous
        elif self.given.from_backend:
            previous, last = self.from_backend(stack, "last deployment", basis.LAST_DEPLOYMENT_FLAGS)
        else:
            previous = base_outputs
            last = basis.Source("last deployment", base_text, True, basis.LAST_DEPLOYMENT_FLAGS)
        sources = [last]
        canary_source = None
        name = self.declared_canary(side, stack)
        if name is not None and name != stack:
            role = f"canary '{name}'"
            if self.given.canary is not None:
                canary_source = basis.Source(role, self.given.canary[1].text, False, ())
            elif self.given.from_backend:
                canary_source = self.from_backend(name, role, basis.CANARY_FLAGS)[1]
            else:
                text = f"what {canary_file} declares, rendered offline" if canary_file is not None else \
                    f"none: no stack file of '{name}' at {side.label}, so it shows no driver"
                canary_source = basis.Source(role, text, True, basis.CANARY_FLAGS)
            sources.append(canary_source)
        result = self._run(side, stack, previous)
        view = self._view(side, stack, result)
        # Another canary changes only the promotion record's canary fields (preview.run.recanaried).
        notes = plan.assumption_notes(result, list(view.violations), last, canary_source,
                                      lambda outputs: recanaried(result, outputs), project_dir=self.project_dir)
        return view, sources, notes

    def _view(self, side: Side, stack: str, result: ProgramRun) -> compare.StackView:
        self._outputs[(side.flag, stack)] = result.outputs
        violations = plan.policy_report(result, project_dir=self.project_dir)
        return compare.view(stack, from_registered(result.resources), result.outputs, violations)

    def deployed(self, side: Side, stack: str) -> tuple[compare.StackView, dict[str, Any]]:
        """Base as deployed: rendered once for its outputs, and seen with that rendering as its own last
        deployment (``preview.run.redeployed``: what a second rendering would register, without one), so
        the rules that compare with a deployment see base in its steady state and head as the step from it
        (judged as a first deployment, base would differ from head in every such rule)."""
        first = self._first_run(side, stack)
        return self._view(side, stack, redeployed(first)), first.outputs


def build(project_dir: Path, base: str | None, head: str | None, stacks: list[str] | None,
          given: Given | None = None) -> compare.Report:
    """Resolve the sides, render each stack whose config differs on both, and compare them."""
    repo = Repository(project_dir)
    base_side = repo.side(base if base is not None else repo.default_base(), "--base")
    if base is None:
        base_side = Side("merge base", base_side.commit, base_side.files, "--base")
    head_side = repo.side(head, "--head")
    names = sorted(set(base_side.files) | set(head_side.files))
    for wanted in stacks or []:
        if wanted not in names:
            raise RevisionError("--stack", f"no stack file Pulumi.{wanted}.yaml in {project_dir} at "
                                f"{base_side.label} or {head_side.label}; its stacks: {', '.join(names) or 'none'}")
    chosen = [n for n in names if not stacks or n in stacks]
    unattested = _unattested(project_dir)
    found: dict[str, compare.StackDiff] = {}
    unchanged = []
    with ExitStack() as exits:
        files = _Files(repo, exits, base_side, head_side)
        renderer = _Renderer(files, project_dir, given)
        try:
            # Canary stacks first: a promoted stack's reference to its canary reuses the canary's rendering.
            promoted = {n for n in chosen for side in (base_side, head_side)
                        if n in side.files and _config_reads(renderer, side, n) and renderer.canary(side, n)}
            for stack in sorted(chosen, key=lambda n: n in promoted):
                diff = _one(repo, renderer, base_side, head_side, stack, unattested)
                if diff is None:
                    unchanged.append(stack)
                else:
                    found[stack] = diff
        except SpecError as error:
            raise files.named(error) from None
    pack = pack_changes(repo.files_under(base_side, PACK_DIR), repo.files_under(head_side, PACK_DIR))
    return compare.Report(
        base={"revision": base_side.label, "commit": base_side.commit},
        head={"revision": head_side.label, "commit": head_side.commit},
        stacks=tuple(found[n] for n in sorted(found)), unchanged=tuple(sorted(unchanged)), pack=tuple(pack),
    )


def _config_reads(renderer: _Renderer, side: Side, stack: str) -> bool:
    """The side's stack file reads as YAML config; one that does not is reported where it is compared."""
    try:
        renderer.config(side, stack)
    except SpecError:
        return False
    return True


def _one(repo: Repository, renderer: _Renderer, base_side: Side, head_side: Side, stack: str,
         unattested: Callable[[str | None], Callable[[str], str | None]]) -> compare.StackDiff | None:
    """The diff of one stack; None when its config is the same on both sides (comments, order)."""
    old, new = stack in base_side.files, stack in head_side.files
    head_config = renderer.config(head_side, stack) if new else None
    base_error = None
    try:
        base_config = renderer.config(base_side, stack) if old else None
    except SpecError as error:
        if not new:
            raise
        base_config, base_error = None, error
    if old and new and base_config == head_config:
        return None
    base_view, outputs = None, None
    if old and base_error is None:
        try:
            base_view, outputs = renderer.deployed(base_side, stack)
        except SpecError as error:
            if not new:
                raise
            base_error = error
    note = None
    if base_error is not None:
        problems = "; ".join(str(problem) for problem in renderer.files.named(base_error).problems)
        note = f"{repo.display_path(base_side, stack)}: {problems}"
    head_view: compare.StackView | None = None
    sources: list[basis.Source] = []
    notes: dict[Any, str] = {}
    if new:
        canary = renderer.declared_canary(head_side, stack)
        canary_file = repo.display_path(head_side, canary) if canary is not None and canary in head_side.files else None
        if base_view is not None:
            base_text = f"{repo.display_path(base_side, stack)} ({str(base_side.commit)[:12]})"
        elif old:
            base_text = "a first deployment (the base file does not render with the program under review)"
        else:
            base_text = "a first deployment (the stack file is new at head)"
        head_view, sources, notes = renderer.judge_head(head_side, stack, outputs, base_text, canary_file)
    shown = repo.display_path(head_side if new else base_side, stack)
    return compare.compare(stack, shown, base_view, head_view, unattested(_declared_canary(head_config)), note,
                           [source.model().model_dump() for source in sources], notes)


def document(report: compare.Report) -> schemas.DiffDocument:
    """``diff --json``: every stack whose file differs, with its changes, verdicts and risks."""
    def verdicts(diff: compare.StackDiff, found: tuple[Violation, ...], noted: bool = True) -> list[schemas.Violation]:
        return [schemas.Violation.of(v, diff.assumption(v) if noted else None) for v in found]

    stacks = []
    for diff in report.stacks:
        entry = schemas.StackDiff(
            stack=diff.stack, file=diff.file, status=diff.status.value,
            changes=[schemas.Change(subject=c.subject, field=c.field, base=c.base, head=c.head) for c in diff.changes],
            violations=schemas.ViolationDiff(introduced=verdicts(diff, diff.introduced),
                                             fixed=verdicts(diff, diff.fixed, noted=False),
                                             standing=verdicts(diff, diff.standing)),
            risks=[schemas.Risk(kind=r.kind.value, text=r.text, policy=r.policy, enforcement=r.enforcement)
                   for r in diff.risks],
            note=diff.note)
        # Only where a flag replaced the offline assumption (--previous-outputs, --canary-outputs, --from-backend):
        # the document of a plain offline diff keeps its shape; Markdown always says it.
        if any(not source.get("assumed") for source in diff.basis):
            entry.basis = [schemas.Source.model_validate(dict(source)) for source in diff.basis]
        if diff.owners:
            entry.owners = list(diff.owners)
        stacks.append(entry)
    found = schemas.DiffDocument(base=schemas.Revision.model_validate(dict(report.base)),
                                 head=schemas.Revision.model_validate(dict(report.head)),
                                 stacks=stacks, unchanged=list(report.unchanged))
    if report.pack:  # only where the pack changed: the document of a stacks-only change keeps its shape
        found.pack = [schemas.PackChange(kind=c.kind, file=c.file, policy=c.policy, base=c.base, head=c.head,
                                         text=c.text) for c in report.pack]
    return found


def execute(project_dir: Path, base: str | None, head: str | None, stacks: list[str] | None, *,
            as_markdown: bool, as_json: bool, given: Given | None = None) -> Exit:
    """Build the report and print it: one JSON document, the Markdown of the PR comment, or (on a
    terminal) that Markdown rendered. 0 whenever it was rendered (see the module's docstring)."""
    report = build(project_dir, base, head, stacks, given)  # a bad revision: RevisionError, one line (a refusal)
    if as_json:
        documents.write(document(report))
    elif as_markdown:
        sys.stdout.write(compare.markdown(report))
    else:
        from rich.markdown import Markdown

        consoles.stdout().print(Markdown(compare.markdown(report)))
    return Exit.OK
