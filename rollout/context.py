"""What a verb resolves from its flags before its one call into a package: the stack, its project and,
for the live verbs, the cluster. One place, so every verb reads ``--stack``, ``--stack-file``,
``--project-dir``, ``--kubeconfig`` and ``--context`` alike.

Which cluster (docs/runbook.md, "Which cluster the live commands reach"): the kubeconfig file is
``--kubeconfig``, else the stack's ``cluster.existing.kubeconfig``, else ``$KUBECONFIG``, else
``~/.kube/config`` (else the in-cluster service account); the context is ``--context``, else the stack's
``cluster.existing.context``, else the kubeconfig's current context. No environment variable beats what
the stack declares: ``$KUBECONFIG`` is read by :func:`checks.kube.connect` only when neither the flag nor
the stack names a file.

Nothing here imports the Pulumi SDK: the live verbs never pay for it (``gpu-rollout plan`` does, in
:mod:`rollout.plan`).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rollout.project import find_project
from fleetspec import load
from fleetspec.model import FleetSpec

if TYPE_CHECKING:  # the Kubernetes client costs 0.2 s to import; the offline verbs never need it
    from checks import kube as kube_module



@dataclass(frozen=True)
class StackRef:
    name: str  # the stack's name: --stack, or Pulumi.<name>.yaml of --stack-file
    path: Path  # its stack file
    project_dir: Path  # the Pulumi project (Pulumi.yaml, __main__.py)
    project_found: str = "--project-dir"  # how the project folder was found, in words

    @property
    def shown_path(self) -> str:
        """The stack file as a report names it: relative to the project folder when it lies inside it."""
        try:
            return str(self.path.resolve().relative_to(self.project_dir.resolve()))
        except ValueError:
            return str(self.path)


STACK_VARIABLE = "GPU_ROLLOUT_STACK"
STACK_FILE_VARIABLE = "GPU_ROLLOUT_STACK_FILE"
_STACK_FILE_NAME = re.compile(r"^Pulumi\.(?P<stack>.+)\.ya?ml$")


def _from_environment(variable: str, value: object) -> bool:
    """Whether a flag's value is its environment variable's: typer reads the variable when the flag is not on the
    command line (a flag given with the very same value reads as the variable; both name the same thing)."""
    return value is not None and os.environ.get(variable) == str(value)


def stack_names(project_dir: Path) -> list[str]:
    """The stacks whose files the project folder holds, by name."""
    if not project_dir.is_dir():
        return []
    return sorted(m["stack"] for p in project_dir.iterdir() if (m := _STACK_FILE_NAME.match(p.name)) and p.is_file())


def resolve_stack(stack: str | None, stack_file: Path | None, project_dir: Path | None) -> StackRef:
    """The stack from ``--stack`` or ``--stack-file`` (not both) and the project from ``--project-dir``;
    a conflict or a missing stack is a usage error (exit 2).

    Forgiving where the intent is plain: ``--stack Pulumi.prod.yaml`` (or a path to one) names stack prod; a
    flag on the command line beats the other's environment variable (``GPU_ROLLOUT_STACK`` /
    ``GPU_ROLLOUT_STACK_FILE``), and a conflict names the variable; an unknown stack lists the stacks there
    are."""
    if project_dir is not None:
        project, found = project_dir, "--project-dir"
    else:
        project, found = find_project()
    if stack and stack_file:
        stack_env, file_env = _from_environment(STACK_VARIABLE, stack), _from_environment(STACK_FILE_VARIABLE, stack_file)
        if stack_env and not file_env:
            stack = None  # --stack-file on the line beats $GPU_ROLLOUT_STACK
        elif file_env and not stack_env:
            stack_file = None
        elif stack_env and file_env:
            raise typer.BadParameter(f"both {STACK_VARIABLE} and {STACK_FILE_VARIABLE} are set in the environment: "
                                     "unset one, or give --stack or --stack-file", param_hint="--stack")
        else:
            raise typer.BadParameter("give --stack or --stack-file, not both", param_hint="--stack")
    if stack_file is not None:
        name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
        return StackRef(name, stack_file, project, found)
    if not stack:
        raise typer.BadParameter("a stack is required", param_hint="--stack")
    named = _STACK_FILE_NAME.match(Path(stack).name)
    if named is not None:  # --stack Pulumi.prod.yaml, or a path to one: that file, that stack
        given = Path(stack)
        path = given if given.parent != Path(".") else load.stack_file(project, named["stack"])
        return StackRef(named["stack"], path, project, found)
    path = load.stack_file(project, stack)
    known = stack_names(project)
    if not path.is_file() and known:
        where = f"${STACK_VARIABLE}" if _from_environment(STACK_VARIABLE, stack) else "--stack"
        near = difflib.get_close_matches(stack.removesuffix(".yaml").removesuffix(".yml"), known, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise load.SpecError([load.SpecProblem(
            where, f"no stack {stack!r}: {project} has no {path.name} (from {found}); {hint}its stacks: "
                   f"{', '.join(known)}"
        )])
    return StackRef(stack, path, project, found)


@dataclass(frozen=True)
class ClusterRef:
    kubeconfig: str | None  # None: $KUBECONFIG, else ~/.kube/config, else in-cluster (checks.kube.connect)
    context: str | None  # None: the kubeconfig's current context


def resolve_cluster(spec: FleetSpec, kubeconfig: str | None, context: str | None) -> ClusterRef:
    """The flag, else what the stack declares (``cluster.existing``), else None (the client's defaults)."""
    declared = spec.cluster.existing  # an existing cluster names its kubeconfig and context in the stack
    return ClusterRef(kubeconfig or (declared.kubeconfig if declared else None),
                      context or (declared.context if declared else None))


@dataclass(frozen=True)
class Live:
    """What a live verb acts with: its stack, the stack's spec, and an adapter to the stack's cluster."""

    stack: StackRef
    spec: FleetSpec
    kube: kube_module.Kube


def open_live(stack: str | None, stack_file: Path | None, project_dir: Path | None, kubeconfig: str | None,
              context: str | None, settings: kube_module.ClientSettings | None = None, in_cluster: bool = False) -> Live:
    """Resolve the stack, load its file and connect to its cluster. A bad stack file raises
    :class:`fleetspec.load.SpecError`, an unusable kubeconfig or context :class:`checks.errors.ConfigError`
    (both exit 2); nothing has reached the cluster yet."""
    from checks import kube as kube_module
    from checks.kubeconfig import advice_for
    from rollout.console import say

    ref = resolve_stack(stack, stack_file, project_dir)
    spec = load.load_stack_file(ref.path)
    if in_cluster:  # the pod's ServiceAccount: the stack's cluster is the one the pod runs in
        return Live(ref, spec, kube_module.connect(kubeconfig, context, settings, advice=advice_for(spec.cluster),
                                                   notify=say, in_cluster=True))
    cluster = resolve_cluster(spec, kubeconfig, context)
    # Errors say what to do for this stack's cloud; retries and notes are one line each on stderr.
    return Live(ref, spec, kube_module.connect(cluster.kubeconfig, cluster.context, settings,
                                               advice=advice_for(spec.cluster), notify=say))
