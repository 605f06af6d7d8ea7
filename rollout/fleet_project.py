"""The fleet as the project declares it: the fleet file (``Fleet.yaml``) and every stack file it orders, checked
against each other (fleetspec/fleet_file.py). Offline and light: `fleet plan` reads it without the cluster client, the live
fleet verbs without the Pulumi SDK."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from promotion_train.stacks import StackFile, stack_files
from fleetspec.fleet_file import DeclaredStack, FleetFile, fleet_path, read_fleet_file
from fleetspec.load import SpecError, SpecProblem, load_stack_file
from fleetspec.model import FleetSpec


@dataclass(frozen=True)
class FleetProject:
    project_dir: Path
    fleet: FleetFile
    stacks: dict[str, StackFile]  # every stack of the fleet, by name
    specs: dict[str, FleetSpec]


def load_project(project_dir: Path) -> FleetProject:
    """The fleet file and every stack file it orders; SpecError (exit 2) naming each problem."""
    project_dir = project_dir.resolve()
    path = fleet_path(project_dir)
    if not path.is_file():
        raise SpecError([SpecProblem(str(path), "no fleet file: write one (docs/fleet.md) or pass --project-dir")])
    files = {s.name: s for s in stack_files(project_dir)}
    fleet = read_fleet_file(path, {name: DeclaredStack(s.stage, s.canary, s.problem) for name, s in files.items()})
    specs = {name: load_stack_file(project_dir / files[name].file) for name in fleet.stacks}
    return FleetProject(project_dir, fleet, {name: files[name] for name in fleet.stacks}, specs)
