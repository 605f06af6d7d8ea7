"""The options verbs share, declared once: each option group is a frozen dataclass whose fields are typer options
(``Annotated[type, typer.Option(...)]``). A verb's first parameter names its group, and :func:`rollout.cli.command`
gives the verb's command the group's options, then the verb's own, then ``--json`` and ``--debug``; the verb gets
one value of the group.

| group | options | verbs |
|---|---|---|
| :class:`LiveTarget` | the stack, the project, the cluster | the live verbs |
| :class:`GuardTarget` | the stack, the project, the cluster (no ``--json``) | guard |
| :class:`StackTarget` | the stack, the project | plan |
| :class:`ProjectTarget` | the project | diff, deploy-plan, stacks, fleet plan |
| :class:`BackendStack` | a stack in the backend, the project | rollback |
| :class:`rollout.cli.fleet.FleetTarget` | the project, one kubeconfig per stack | fleet status, advance, halt, resume |
| :class:`ProjectSetup` | the project (no ``--json``) | init, runbook |
| :class:`GitHubRepository` | a GitHub repository and its API | doctor github |
| :class:`Debugging` | ``--debug`` only | keygen |

Nothing here loads more than typer: ``--help`` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar

import typer

from rollout.project import chosen_project_dir

if TYPE_CHECKING:
    from rollout.context import Live, StackRef

StackOption = Annotated[
    str | None, typer.Option("--stack", envvar="GPU_ROLLOUT_STACK", help="Stack name: reads Pulumi.<NAME>.yaml.")
]
StackFileOption = Annotated[
    Path | None, typer.Option("--stack-file", envvar="GPU_ROLLOUT_STACK_FILE", help="Path of a stack file.")
]
ProjectDirOption = Annotated[
    Path | None,
    typer.Option("--project-dir", envvar="GPU_ROLLOUT_PROJECT_DIR",
                 help="The Pulumi project: Pulumi.yaml, __main__.py and Pulumi.<stack>.yaml (default: the current "
                 "folder if it holds Pulumi.yaml, else the checkout gpu-rollout runs from)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
DebugOption = Annotated[
    bool, typer.Option("--debug", envvar="GPU_ROLLOUT_DEBUG",
                       help="On an internal error, print the traceback on stderr (it is always written to a file).")
]

# Live verbs only. No envvar on these two: an ambient KUBECONFIG or context must never beat what the stack
# declares (cluster.existing.kubeconfig/context). KUBECONFIG is still read, below the stack's file, by
# checks.kube.connect (rollout.context has the whole precedence).
KubeconfigOption = Annotated[
    str | None,
    typer.Option("--kubeconfig", help="kubeconfig file (else the stack's cluster.existing.kubeconfig, else "
                 "$KUBECONFIG, else ~/.kube/config)."),
]
ContextOption = Annotated[
    str | None,
    typer.Option("--context", help="kubeconfig context (else the stack's cluster.existing.context, else the "
                 "kubeconfig's current context)."),
]
REPORT = ("as_json", "debug")  # how to report: every group lists these last, after the verb's own options


@dataclass(frozen=True)
class StackTarget:
    """One stack of the project, offline: which stack, how to report."""

    NOUN: ClassVar[str] = "stack verb"

    stack: StackOption = None
    stack_file: StackFileOption = None
    project_dir: ProjectDirOption = None
    as_json: JsonOption = False
    debug: DebugOption = False

    def resolve(self) -> StackRef:
        """The stack alone, for a verb that reaches no cluster (this time: simulate without --from-cluster)."""
        from rollout import context

        return context.resolve_stack(self.stack, self.stack_file, self.project_dir)


@dataclass(frozen=True)
class LiveTarget(StackTarget):
    """What every live verb is told by the options they share: which stack, which cluster, how to report (the
    report options still come last: :func:`rollout.cli.running.command` orders them)."""

    NOUN: ClassVar[str] = "live verb"

    kubeconfig: KubeconfigOption = None
    context: ContextOption = None

    def open(self) -> Live:
        """The stack's spec and an adapter to its cluster (:func:`rollout.context.open_live`)."""
        from rollout import context

        return context.open_live(self.stack, self.stack_file, self.project_dir, self.kubeconfig, self.context)


@dataclass(frozen=True)
class GuardTarget:
    """`gpu-rollout guard`: a live verb that runs until stopped and writes no document (no ``--json``): which stack,
    which cluster (or, with ``--in-cluster``, the pod's ServiceAccount)."""

    NOUN: ClassVar[str] = "guard verb"

    stack: StackOption = None
    stack_file: StackFileOption = None
    project_dir: ProjectDirOption = None
    kubeconfig: KubeconfigOption = None
    context: ContextOption = None
    debug: DebugOption = False

    def open(self, in_cluster: bool = False) -> Live:
        """The stack's spec and an adapter to its cluster (:func:`rollout.context.open_live`)."""
        from rollout import context

        return context.open_live(self.stack, self.stack_file, self.project_dir, self.kubeconfig, self.context,
                                 in_cluster=in_cluster)


@dataclass(frozen=True)
class ProjectTarget:
    """The project's stacks, offline: which project, how to report."""

    NOUN: ClassVar[str] = "project verb"

    project_dir: ProjectDirOption = None
    as_json: JsonOption = False
    debug: DebugOption = False

    def project(self) -> Path:
        return chosen_project_dir(self.project_dir)


@dataclass(frozen=True)
class BackendStack:
    """A stack as the Pulumi backend holds it (its history): which stack, which project, how to report."""

    NOUN: ClassVar[str] = "backend verb"

    stack: Annotated[str, typer.Option("--stack", envvar="GPU_ROLLOUT_STACK", help="Stack name in the backend.")]
    project_dir: ProjectDirOption = None
    as_json: JsonOption = False
    debug: DebugOption = False

    def project(self) -> Path:
        return chosen_project_dir(self.project_dir)


@dataclass(frozen=True)
class ProjectSetup:
    """A project to write into (no report on stdout but the next steps)."""

    NOUN: ClassVar[str] = "setup verb"

    project_dir: ProjectDirOption = None
    debug: DebugOption = False

    def project(self) -> Path:
        return chosen_project_dir(self.project_dir)


@dataclass(frozen=True)
class GitHubRepository:
    """A GitHub repository read through the REST API (the token from $GH_TOKEN or $GITHUB_TOKEN, never a flag: a
    command line is seen by every process), and how to report."""

    NOUN: ClassVar[str] = "settings verb"

    repo: Annotated[
        str | None, typer.Option("--repo", envvar="GITHUB_REPOSITORY",
                                 help="OWNER/NAME (default: $GITHUB_REPOSITORY, the repository a workflow runs in).")
    ] = None
    api_url: Annotated[
        str, typer.Option("--api-url", envvar="GITHUB_API_URL",
                          help="The REST API (default: $GITHUB_API_URL, else https://api.github.com).")
    ] = "https://api.github.com"
    as_json: JsonOption = False
    debug: DebugOption = False


@dataclass(frozen=True)
class Debugging:
    """A verb with no stack and no project: only how to report a defect."""

    NOUN: ClassVar[str] = "verb"

    debug: DebugOption = False

    as_json: ClassVar[bool] = False  # no --json: its refusals are one line on stderr


# ---------------------------------------------------------------- options more than one verb has, and their values

PreviousOutputsOption = Annotated[
    Path | None,
    typer.Option(
        "--previous-outputs",
        help="The stack's last deployment, as `pulumi stack output --json` prints it (default: the stack file at "
        "the merge base with the default branch, as diff assumes; none there: a first deployment); what is a "
        "promotion and what the cloud cannot change in place are judged against it.",
    ),
]
CanaryOutputsOption = Annotated[
    Path | None,
    typer.Option(
        "--canary-outputs",
        help="A prod stack's canary (promotion.canaryStack), as `pulumi stack output --json --stack <canary>` "
        "prints it (default: the canary's stack file beside this one or in the project, rendered offline); the "
        "prod gate checks that the canary runs the attested driver.",
    ),
]
FromBackendOption = Annotated[
    bool,
    typer.Option("--from-backend", help="Read the last deployment and the canary's outputs from the Pulumi backend "
                 "(`pulumi stack output --json`, through the pulumi CLI on PATH) instead of assuming them offline."),
]
AtOption = Annotated[
    str | None,
    typer.Option(
        "--at", callback=lambda value: moment(value) and value,  # checked with the flags: a usage error, no document
        help="Judge as of this moment, ISO 8601 with a zone (2026-12-09T10:00:00Z): the dwell between waves, a "
        "generation's age and the maintenance window (default: now).",
    ),
]
MarkdownOption = Annotated[bool, typer.Option("--markdown", help="Print the Markdown of one PR comment.")]
PrometheusOption = Annotated[
    str | None,
    typer.Option("--prometheus", envvar="GPU_ROLLOUT_PROMETHEUS",
                 help="Prometheus base URL (http://prometheus:9090), instead of the stack's validation.prometheus "
                 "(a URL, or a Service reached through the API server's service proxy)."),
]
SigningKeyOption = Annotated[
    Path | None,
    typer.Option("--signing-key", help="PEM file of the Ed25519 private key a canary's attestation is signed with "
                 "(else $GPU_ROLLOUT_SIGNING_KEY, the PEM text; `gpu-rollout keygen` makes one)."),
]


def moment(value: str | None) -> datetime | None:
    """``--at``: an aware ISO 8601 moment, or None for the clock; anything else is a usage error (exit 2)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO 8601 moment such as 2026-12-09T10:00:00Z",
                                 param_hint="--at") from None
    if parsed.tzinfo is None:
        raise typer.BadParameter(f"{value!r} names no time zone: add Z or an offset such as +01:00",
                                 param_hint="--at")
    return parsed


def prometheus_url(value: str | None) -> str | None:
    """--prometheus, refused unless it is an http(s) URL (a Service is the stack's to name)."""
    from urllib.parse import urlsplit

    if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
        raise typer.BadParameter(f"{value!r} is not an http(s) URL such as http://prometheus:9090",
                                 param_hint="--prometheus")
    return value


def not_both(first: tuple[str, object], second: tuple[str, object]) -> None:
    """Two flags that exclude each other: a usage error naming the first when both are given."""
    if first[1] and second[1]:
        raise typer.BadParameter(f"give {first[0]} or {second[0]}, not both", param_hint=first[0])


def stage_of(value: str | None) -> str | None:
    """``--stage``: canary or prod, else a usage error."""
    from fleetspec.base import Stage

    if value is not None and value not in Stage._value2member_map_:
        raise typer.BadParameter(f"{value!r} is not a stage (canary or prod)", param_hint="--stage")
    return value


def in_words(value: str, flag: str) -> str:
    """A reason: refused when it is blank."""
    if not value.strip():
        raise typer.BadParameter("say why, in words", param_hint=flag)
    return value
