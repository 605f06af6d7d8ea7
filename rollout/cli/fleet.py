"""`gpu-rollout fleet ...`: one promotion train across the fleet's stacks (Fleet.yaml; docs/fleet.md). `plan` is
offline; the others read the backend and every stack's cluster (:class:`rollout.cli.options.FleetTarget`), and
their backend refusals begin with ``fleet:``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar

import typer

from refusals.exits import Exit
from rollout.cli.options import (AtOption, DebugOption, JsonOption, MarkdownOption, ProjectDirOption, ProjectTarget,
                                 in_words, moment, not_both, stage_of)
from rollout.cli.running import command
from rollout.project import chosen_project_dir

if TYPE_CHECKING:
    from rollout.fleet import Clusters
    from rollout.fleet_project import FleetProject

KubeconfigDirOption = Annotated[
    Path | None,
    typer.Option("--kubeconfig-dir", help="A folder with one kubeconfig per stack, named after it (DIR/<stack>); a "
                 "stack without one: its cluster.existing kubeconfig and context, else $KUBECONFIG."),
]


@dataclass(frozen=True)
class FleetReach:
    """The fleet's stacks (Fleet.yaml) and their clusters: which project, where each stack's kubeconfig is."""

    NOUN: ClassVar[str] = "fleet verb"

    project_dir: ProjectDirOption = None
    kubeconfig_dir: KubeconfigDirOption = None

    def project(self) -> FleetProject:
        """The fleet file and every stack it names, loaded (a bad one: exit 2)."""
        from rollout.fleet_project import load_project

        return load_project(chosen_project_dir(self.project_dir))

    def clusters(self) -> Clusters:
        from rollout.fleet import Clusters

        return Clusters(self.kubeconfig_dir)


@dataclass(frozen=True)
class FleetTarget(FleetReach):
    """... and how to report."""

    as_json: JsonOption = False
    debug: DebugOption = False


@dataclass(frozen=True)
class HoldTarget(FleetReach):
    """`fleet hold` prints what its command prints: no document of its own, so no --json."""

    debug: DebugOption = False


fleet_verb = command(FleetTarget, speaker="fleet")
hold_verb = command(HoldTarget, speaker="fleet")


@command(ProjectTarget)
def plan(
    target: ProjectTarget,
    as_markdown: MarkdownOption = False,
    at: AtOption = None,
) -> Exit:
    """Offline, wave by wave: each stack's plan and policy verdict, the driver it moves from and to, and what each
    wave waits for. Exit 1 when the pack would refuse a stack."""
    from rollout import fleet_plan as verb

    not_both(("--markdown", as_markdown), ("--json", target.as_json))
    return verb.execute(target.project(), target.as_json, as_markdown, moment(at))


@fleet_verb
def status(target: FleetTarget) -> Exit:
    """Where the train is, read from the world: each stack's last deployment (the backend), each cluster's upgrade
    states, pauses and signs, the attestations; the current wave and what blocks its next step. Changes nothing."""
    from rollout import fleet as verb

    project = target.project()
    return verb.status(project, verb.AutomationBackend(project.project_dir), target.clusters(), target.as_json)


@fleet_verb
def advance(
    target: FleetTarget,
    yes: Annotated[bool, typer.Option("--yes", help="Take the step (else: say what it is, change nothing).")] = False,
    stage: Annotated[
        str | None, typer.Option("--stage", help="Bring up only stacks of this stage (canary or prod); an `up` of the "
                                 "other stage is reported as withheld, for a run from that stage's environment.")
    ] = None,
    packs: Annotated[
        Path | None, typer.Option("--packs", help="The protected policy packs: DIR/<commit>/pack and "
                                  "DIR/<commit>/<stage>.json for each commit deploy-plan names (packRef).")
    ] = None,
    policy_pack: Annotated[
        str | None, typer.Option("--policy-pack", help="Without --packs: the pack every `up` enforces (default: the "
                                 "project's policy/, with policy/<stage>.json).")
    ] = None,
    expect: Annotated[
        Path | None, typer.Option("--expect", help="The approved plan (the `approval` of a `fleet advance --json` "
                                  "that withheld these `up`s): bring up exactly those, with the same config digest and "
                                  "pack commit, or nothing. Waves it saw done count as done where this run cannot "
                                  "read their clusters (another environment's).")
    ] = None,
) -> Exit:
    """Take the train's next safe step and return: `up` the stacks of the current wave that differ from what they
    run (wave concurrency, fleet limits, maintenance windows), verify the ones done, or, on a bad sign in any
    cluster, pause every stack the train started and exit 1. Never waits for a rollout; run it again."""
    from fleetspec.base import Stage
    from rollout import fleet as verb

    chosen = stage_of(stage)
    if packs is not None and policy_pack is not None:
        raise typer.BadParameter("give --packs or --policy-pack, not both", param_hint="--packs")
    if packs is not None and not packs.is_dir():
        raise typer.BadParameter(f"{packs} is not a folder", param_hint="--packs")
    expected = verb.read_expected(expect) if expect is not None else None
    project = target.project()
    return verb.advance(project, verb.AutomationBackend(project.project_dir), target.clusters(), yes=yes,
                        packs=verb.Packs(packs, Path(policy_pack) if policy_pack else None),
                        only_stage=Stage(chosen) if chosen else None, as_json=target.as_json, expect=expected)


@fleet_verb
def halt(
    target: FleetTarget,
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded on the train's lease and on each node.")],
    wave_of: Annotated[
        str | None, typer.Option("--wave-of", help="A rollback's halt: halt only this stack's wave (it and the waves "
                                 "after it stay where they are) and pause the wave's other stacks, not this one.")
    ] = None,
) -> Exit:
    """Halt the train and pause every stack of the fleet at once (`pause` semantics; an image-owned stack cannot be
    paused: no `up` of it follows, and what is in flight is reported). The halt is recorded in every cluster it
    reaches, waiting for no lease: one cluster down stops nothing else."""
    from refusals.errors import FlagError
    from rollout import fleet as verb

    in_words(reason, "--reason")
    project = target.project()
    if wave_of is not None and wave_of not in project.fleet.stacks:
        raise FlagError("--wave-of", f"{wave_of} is in no wave of the fleet file")
    return verb.halt(project, target.clusters(), reason, target.as_json, wave_of=wave_of)


@fleet_verb
def resume(target: FleetTarget) -> Exit:
    """Resume every stack of the fleet (`resume` semantics: only the skip labels `pause` set) and lift the train's
    halt. A node held by a failed validation stays held: `gpu-rollout release-node`."""
    from rollout import fleet as verb

    return verb.resume_all(target.project(), target.clusters(), target.as_json)


@hold_verb
def hold(
    target: HoldTarget,
    command: Annotated[list[str], typer.Argument(help="The command to run holding the lease (after --).")],
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for the lease.")] = 900,
) -> Exit:
    """Run a command holding the train's Lease, so it never runs beside a `fleet advance` (rollback.yml runs
    `gpu-rollout rollback` so). Waits for the Lease; where its cluster does not answer, runs without it and says so.
    Exit 1 when the command fails or the Lease stayed held."""
    from rollout import fleet as verb

    return verb.hold(target.project(), target.clusters(), command, wait)
