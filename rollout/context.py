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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rollout.project import default_project_dir
from spec import load
from spec.model import FleetSpec

if TYPE_CHECKING:  # the Kubernetes client costs 0.2 s to import; the offline verbs never need it
    from checks import kube as kube_module



@dataclass(frozen=True)
class StackRef:
    name: str  # the stack's name: --stack, or Pulumi.<name>.yaml of --stack-file
    path: Path  # its stack file
    project_dir: Path  # the Pulumi project (Pulumi.yaml, __main__.py)


def resolve_stack(stack: str | None, stack_file: Path | None, project_dir: Path | None) -> StackRef:
    """The stack from ``--stack`` or ``--stack-file`` (not both) and the project from ``--project-dir``;
    a conflict or a missing stack is a usage error (exit 2)."""
    project = project_dir if project_dir is not None else default_project_dir()
    if stack and stack_file:
        raise typer.BadParameter("give --stack or --stack-file, not both", param_hint="--stack")
    if stack_file is not None:
        name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
        return StackRef(name, stack_file, project)
    if not stack:
        raise typer.BadParameter("a stack is required", param_hint="--stack")
    return StackRef(stack, load.stack_file(project, stack), project)


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
              context: str | None, settings: kube_module.ClientSettings | None = None) -> Live:
    """Resolve the stack, load its file and connect to its cluster. A bad stack file raises
    :class:`spec.load.SpecError`, an unusable kubeconfig or context :class:`checks.errors.ConfigError`
    (both exit 2); nothing has reached the cluster yet."""
    from checks import kube as kube_module

    ref = resolve_stack(stack, stack_file, project_dir)
    spec = load.load_stack_file(ref.path)
    cluster = resolve_cluster(spec, kubeconfig, context)
    return Live(ref, spec, kube_module.connect(cluster.kubeconfig, cluster.context, settings))
