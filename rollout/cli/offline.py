"""The verbs that reach no cluster: plan and diff (the program rendered offline), deploy-plan and stacks (the
project's stacks), rollback (the Pulumi backend), init and keygen (files). Each checks its flags, makes one call
into a package and returns the exit code; :func:`rollout.cli.command` gives it its option group's options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from refusals.exits import Exit
from rollout.cli.running import command
from rollout.cli.options import (AtOption, BackendStack, CanaryOutputsOption, ContextOption, Debugging, FromBackendOption,
                                 KubeconfigOption,
                                 MarkdownOption, PreviousOutputsOption, ProjectSetup, ProjectTarget, StackTarget,
                                 in_words, moment, not_both, stage_of)


@command(StackTarget)
def plan(
    target: StackTarget,
    previous_outputs: PreviousOutputsOption = None,
    canary_outputs: CanaryOutputsOption = None,
    at: AtOption = None,
    from_backend: FromBackendOption = False,
    show_data: Annotated[
        bool, typer.Option("--show-data", help="Also print large ConfigMap data (the validation program) whole, after "
                           "the report (the table shows its size and sha256; --json always holds it whole).")
    ] = False,
    from_cluster: Annotated[
        bool, typer.Option("--from-cluster", help="Also read the stack's cluster (read-only) and judge the policies' "
                           "questions preflight can answer live (spare capacity, compatibility) on what it runs; a "
                           "failed one refuses. Without it no cluster is reached.")
    ] = False,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also list the resources the same as the last deployment (folded into a "
                           "count by default).")
    ] = False,
) -> Exit:
    """Offline preview of a stack: what `pulumi up` would send, with no cloud and no Pulumi CLI, and the policy
    pack's verdicts. The first lines say the stack file read, the project folder, and what the verdicts rest on:
    the last deployment and the canary's outputs (given, --from-backend, or the offline assumption); the last line
    the verdict and the next command."""
    from rollout import plan as verb

    if (kubeconfig or context) and not from_cluster:
        raise typer.BadParameter("they choose a cluster to read: give them with --from-cluster (without it no "
                                 "cluster is reached)", param_hint="--kubeconfig/--context")
    stack = target.resolve()
    live = None
    if from_cluster:
        def live() -> tuple[list, str]:
            from rollout import context as contexts

            opened = contexts.open_live(target.stack, target.stack_file, target.project_dir, kubeconfig, context)
            where = contexts.resolve_cluster(opened.spec, kubeconfig, context)
            return (verb.live_checks(opened.kube, opened.spec, stack.project_dir),
                    f"read live (--from-cluster): context {where.context or 'current'} of kubeconfig "
                    f"{where.kubeconfig or 'default'}")
    previous = verb.read_previous_outputs(previous_outputs) if previous_outputs is not None else None
    canary = verb.read_previous_outputs(canary_outputs, "--canary-outputs") if canary_outputs is not None else None
    return verb.execute(stack.name, stack.path, as_json=target.as_json, project_dir=stack.project_dir,
                        previous_outputs=previous, canary_outputs=canary, previous_file=previous_outputs,
                        canary_path=canary_outputs, from_backend=from_backend, show_data=show_data,
                        shown_path=stack.shown_path, project_found=stack.project_found, now=moment(at), live=live,
                        show_all=show_all)


@command(ProjectSetup)
def runbook(
    target: ProjectSetup,
    stack: Annotated[str, typer.Option("--stack", envvar="GPU_ROLLOUT_STACK", help="Your prod stack.")],
) -> Exit:
    """docs/runbook.md with your stack names: the prod stack given and the canary its promotion.canaryStack names
    stand in every command and file name where the runbook names the examples' stacks. Markdown on stdout."""
    from rollout import context
    from rollout import team_runbook as verb

    ref = context.resolve_stack(stack, None, target.project_dir)
    return verb.execute(ref.name, ref.path)


@command(ProjectTarget)
def diff(
    target: ProjectTarget,
    base: Annotated[
        str | None, typer.Option("--base", help="Git revision of the old side (default: the merge base of HEAD with "
                                 "the default branch: origin/HEAD, else main, else master).")
    ] = None,
    head: Annotated[
        str | None, typer.Option("--head", help="Git revision of the new side (default: the work tree).")
    ] = None,
    stacks: Annotated[
        list[str] | None, typer.Option("--stack", help="Only this stack (repeatable; default: every stack whose "
                                       "config differs).")
    ] = None,
    as_markdown: MarkdownOption = False,
    previous_outputs: Annotated[
        Path | None, typer.Option("--previous-outputs", help="With one --stack: its last deployment, as `pulumi "
                                  "stack output --json` prints it (default: the stack file at --base, rendered).")
    ] = None,
    canary_outputs: Annotated[
        Path | None, typer.Option("--canary-outputs", help="With one --stack: its canary's outputs, as `pulumi stack "
                                  "output --json --stack <canary>` prints them (default: the canary's stack file on "
                                  "the same side, rendered).")
    ] = None,
    from_backend: FromBackendOption = False,
) -> Exit:
    """Driver, operator, pool, image and policy changes per stack between two git revisions (offline). Head is
    judged against base as its last deployment and its canary's stack file, as `plan` assumes, unless given or
    --from-backend; each stack says what it was judged against."""
    from rollout import basis
    from rollout import diff as verb
    from rollout import plan as plan_verb

    not_both(("--markdown", as_markdown), ("--json", target.as_json))
    files = [flag for flag, given in (("--previous-outputs", previous_outputs), ("--canary-outputs", canary_outputs))
             if given is not None]
    if files and len(stacks or []) != 1:
        raise typer.BadParameter("they are one stack's outputs: give exactly one --stack with them",
                                 param_hint="/".join(files))
    previous = canary = None
    if previous_outputs is not None:
        previous = (plan_verb.read_previous_outputs(previous_outputs),
                    basis.given_outputs(previous_outputs, "last deployment", "--previous-outputs"))
    if canary_outputs is not None:
        canary = (plan_verb.read_previous_outputs(canary_outputs, "--canary-outputs"),
                  basis.given_outputs(canary_outputs, "canary", "--canary-outputs"))
    return verb.execute(target.project(), base, head, stacks, as_markdown=as_markdown, as_json=target.as_json,
                        given=verb.Given(previous, canary, from_backend))


@command(ProjectTarget, speaker="deploy-plan")
def deploy_plan(
    target: ProjectTarget,
    stacks: Annotated[
        list[str] | None, typer.Option("--stack", help="Only this stack (repeatable; default: every stack file).")
    ] = None,
    head: Annotated[
        str | None, typer.Option("--head", help="The commit to deploy (default: HEAD), on the default branch.")
    ] = None,
    at: AtOption = None,
) -> Exit:
    """Which stacks differ from what they last deployed (pulumi stack history) and deploy, canary stages first,
    with the commit whose policy pack each `up` enforces; why each other stack is left alone (a stack outside its
    maintenance window among them)."""
    from rollout import deploy as verb

    return verb.execute(target.project(), stacks, head, target.as_json, moment(at))


@command(ProjectTarget)
def stacks(
    target: ProjectTarget,
    stage: Annotated[
        str | None, typer.Option("--stage", help="Only the stacks of this stage (canary or prod).")
    ] = None,
    names: Annotated[list[str] | None, typer.Option("--stack", help="Only this stack (repeatable).")] = None,
) -> Exit:
    """The project's stacks as their stack files declare them: stage, cloud, credentials, promotion (offline)."""
    from fleetspec.base import Stage
    from rollout import deploy as verb

    chosen = stage_of(stage)
    return verb.list_stacks(target.project(), names, Stage(chosen) if chosen else None, target.as_json)


@command(ProjectTarget)
def review(target: ProjectTarget, at: AtOption = None) -> Exit:
    """Every pinned version of every stack (driver, operator chart, DCGM Exporter, node images, Fabric Manager, each
    model's CUDA) against the compatibility data: supported, end of support, newer in the same branch (offline),
    as Markdown (one table per stack) or --json. Exit 1 when a pin is unsupported or past its end of support, or
    a stack file does not load. The quarterly workflow keeps one issue with it."""
    from rollout import review as verb

    return verb.execute(target.project(), target.as_json, moment(at))


@command(BackendStack)
def rollback(
    target: BackendStack,
    to_version: Annotated[
        int | None, typer.Option("--to-version", min=1, help="Go back to this update of `pulumi stack history` "
                                 "(default: the newest succeeded one on another driver, node image or generation).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan and the commands; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Set the config (of the first step) and run `pulumi up`.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Roll back to a driver the canary stack (promotion.canaryStack) never ran.")
    ] = False,
    all_config: Annotated[
        bool, typer.Option("--all-config", help="Restore the target update's whole config, not only what decides "
                           "what runs on the GPU nodes (driver, operator chart and driver mode, pool generations, "
                           "images and holds).")
    ] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why --yes runs although the stack file differs from the default "
                                 "branch's (or cannot be compared with it).")
    ] = None,
    policy_pack: Annotated[
        str | None, typer.Option("--policy-pack", help="Policy pack for `up` (default: the project's policy/).")
    ] = None,
    policy_pack_config: Annotated[
        str | None, typer.Option("--policy-pack-config", help="Its config (default: policy/<stage>.json).")
    ] = None,
) -> Exit:
    """Go back to an earlier good update from `pulumi stack history`: restore what decides what runs on the GPU
    nodes (every other difference is listed as left alone; --all-config restores it too), show the config that
    changes and the commands; with --yes set it in the stack file and run `up` with the policy pack, then open a
    pull request with the stack file. Refuses (exit 1, or 2 for bad input) and changes nothing when there is no
    history or earlier good update, an update is in progress, secrets cannot be decrypted, the canary never ran
    the target driver (unless --force), or, with --yes, the stack file is not the default branch's (unless
    --reason)."""
    from rollout import rollback as verb

    if reason is not None:
        in_words(reason, "--reason")
    return verb.execute(target.stack, target.project(), to_version=to_version, dry_run=dry_run, yes=yes, force=force,
                        all_config=all_config, reason=reason, as_json=target.as_json, policy_pack=policy_pack,
                        policy_pack_config=policy_pack_config)


@command(ProjectSetup)
def init(
    target: ProjectSetup,
    cloud: Annotated[str, typer.Option("--cloud", help="aks, eks or existing: which example to start from.")],
    name: Annotated[
        str | None, typer.Option("--name", help="The stacks' name: writes Pulumi.<NAME>-canary.yaml and "
                                 "Pulumi.<NAME>-prod.yaml (or give --canary and --prod).")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="cluster.name: the cluster's name, recorded on it and checked by "
                                 "the live verbs (default: --aks-cluster/--eks-cluster/--context).")
    ] = None,
    canary: Annotated[str | None, typer.Option("--canary", help="The canary stack's name.")] = None,
    prod: Annotated[str | None, typer.Option("--prod", help="The prod stack's name.")] = None,
    resource_group: Annotated[str | None, typer.Option("--resource-group", help="AKS: the cluster's resource group.")] = None,
    aks_cluster: Annotated[str | None, typer.Option("--aks-cluster", help="AKS: the managed cluster's name.")] = None,
    location: Annotated[str | None, typer.Option("--location", help="AKS: the Azure region (westeurope).")] = None,
    eks_cluster: Annotated[str | None, typer.Option("--eks-cluster", help="EKS: the cluster's name.")] = None,
    region: Annotated[str | None, typer.Option("--region", help="EKS: the AWS region (us-east-1).")] = None,
    node_role_arn: Annotated[str | None, typer.Option("--node-role-arn", help="EKS: the GPU nodes' IAM role.")] = None,
    subnets: Annotated[list[str] | None, typer.Option("--subnet", help="EKS: a subnet of the GPU node groups "
                                                      "(repeatable).")] = None,
    kube_context: Annotated[str | None, typer.Option("--context", help="existing: the cluster's kubeconfig "
                                                     "context.")] = None,
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig", help="existing: its kubeconfig file (default: "
                                                   "$KUBECONFIG, else ~/.kube/config).")] = None,
    change_ticket: Annotated[str | None, typer.Option("--change-ticket", help="changeTicket of both stacks "
                                                      "(default: none; prod's plan asks for one).")] = None,
    trust_key: Annotated[
        Path | None, typer.Option("--trust-key", help="The *.pub.json `gpu-rollout keygen` wrote: list it in "
                                  "policy/prod.json's trustedKeys and remove the example key (default: leave "
                                  "policy/prod.json alone and print the step).")
    ] = None,
    from_cluster: Annotated[
        bool, typer.Option("--from-cluster", help="AKS/EKS: read the cluster's GPU pools through the cloud's API "
                           "(Azure Resource Manager, EKS; read-only, your credentials) and write them, each adopted by "
                           "its ID, instead of the example's (docs/adopt.md).")
    ] = False,
    canary_pools: Annotated[
        list[str] | None, typer.Option("--canary-pool", help="With --from-cluster: a pool the canary stack takes "
                                       "(repeatable); the others go to the prod stack.")
    ] = None,
    subscription: Annotated[
        str | None, typer.Option("--subscription", help="AKS with --from-cluster: the cluster's subscription ID.")
    ] = None,
    api_endpoint: Annotated[
        str | None, typer.Option("--api-endpoint", help="With --from-cluster: the cloud API's base URL (default: "
                                 "https://management.azure.com, or https://eks.<region>.amazonaws.com); for a "
                                 "sovereign cloud or a private endpoint.")
    ] = None,
) -> Exit:
    """Write a team's first canary and prod stack files from the example of --cloud: the team's cluster, the
    prod stack promoted from the new canary (no example attestation, no example waivers), and, with
    --trust-key, the team's key trusted instead of the example key. Never replaces a file; prints the next steps."""
    from rollout import starter as verb

    if cloud not in verb.EXAMPLES:
        raise typer.BadParameter(f"{cloud!r} is not one of {', '.join(verb.EXAMPLES)}", param_hint="--cloud")
    if name is None and (canary is None or prod is None):
        raise typer.BadParameter("give --name (or both --canary and --prod)", param_hint="--name")
    identity = cluster or {"aks": aks_cluster, "eks": eks_cluster, "existing": kube_context}[cloud]
    if not identity:
        raise typer.BadParameter("give the cluster's name", param_hint="--cluster")
    chosen = verb.Cluster(cloud, identity, resource_group, aks_cluster, location, region, eks_cluster,
                          node_role_arn, tuple(subnets or ()), kube_context, kubeconfig)
    reader = None
    if from_cluster:
        from rollout import adopted_pools

        if cloud == "existing":
            raise typer.BadParameter("an existing cluster's pools are found by label, never created: nothing to adopt",
                                     param_hint="--from-cluster")
        if not canary_pools:
            raise typer.BadParameter("name the pool(s) the canary stack takes", param_hint="--canary-pool")
        if cloud == "aks" and not subscription:
            raise typer.BadParameter("needed to read an AKS cluster", param_hint="--subscription")

        def reader(driver: str) -> adopted_pools.Pools:
            return adopted_pools.read(cloud, tuple(canary_pools or ()), driver, subscription=subscription,
                                      group=resource_group, cluster={"aks": aks_cluster, "eks": eks_cluster}[cloud]
                                      or identity, region=region, endpoint=api_endpoint)
    elif canary_pools or subscription or api_endpoint:
        raise typer.BadParameter("they say how to read the cluster: give them with --from-cluster",
                                 param_hint="--canary-pool/--subscription/--api-endpoint")
    return verb.execute(target.project(), chosen, canary or f"{name}-canary", prod or f"{name}-prod", change_ticket,
                        trust_key, reader)


@command(Debugging)
def keygen(
    target: Debugging,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the key pair into (created if missing).")],
    comment: Annotated[str, typer.Option("--comment", help="What the key is: who holds it, since when.")] = "",
) -> Exit:
    """Make an Ed25519 key pair for signing canary attestations; print the trustedKeys entry for policy/prod.json."""
    from rollout import keygen as verb

    return verb.execute(out, comment)
