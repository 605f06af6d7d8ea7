"""The live verbs: each acts on the stack's own cluster (:class:`rollout.cli.options.LiveTarget` opens it), makes one
call into its module of :mod:`rollout` and returns the exit code. None of them loads the Pulumi SDK or preview (an
import contract in pyproject.toml)."""

from __future__ import annotations

from typing import Annotated

import typer

from refusals.exits import Exit
from rollout.cli.running import command
from rollout.cli.options import GuardTarget, LiveTarget, PrometheusOption, SigningKeyOption, prometheus_url

live_verb = command(LiveTarget)


@live_verb
def preflight(target: LiveTarget) -> Exit:
    """Read-only live checks before a rollout: driver owner, versions, compatibility, capacity, PDBs."""
    from rollout import preflight as verb

    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, target.as_json, live.stack.project_dir)


@live_verb
def watch(
    target: LiveTarget,
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=1.0, help="Seconds between polls.")] = 30.0,
    stuck_after: Annotated[
        float, typer.Option("--stuck-after", min=1.0, help="Minutes in one upgrade state before a node counts as stuck "
                            "(on an image-owned stack: minutes NotReady).")
    ] = 60.0,
    no_auto_pause: Annotated[
        bool, typer.Option("--no-auto-pause", help="Report triggers but do not pause nor evict anything.")
    ] = False,
    max_failed_polls: Annotated[
        int, typer.Option("--max-failed-polls", min=1,
                          help="Give up after this many polls in a row fail (throttling, 5xx, timeouts).")
    ] = 5,
    prometheus: PrometheusOption = None,
) -> Exit:
    """Follow the rollout per pool; on upgrade-failed, a failed validation, a model below minAvailable, a model's
    SLO breached or a stuck node, pause and exit 1.

    A node held by a failed validation also has its model pods evicted (PDBs respected) where the stack says
    so. On an image-owned stack it follows the generations instead, and reports a trigger without pausing.
    """
    from rollout import watch as verb

    url = prometheus_url(prometheus)
    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, once=once, interval=interval,
                        stuck_after=stuck_after * 60, auto_pause=not no_auto_pause, as_json=target.as_json,
                        max_failed_polls=max_failed_polls, prometheus_url=url)


@live_verb
def pause(
    target: LiveTarget,
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded on each node.")] = "paused by gpu-rollout",
) -> Exit:
    """Hold back every node of the stack's pools not yet upgraded (skip label, recorded as ours).

    Refused on an image-owned stack: there is no operator upgrade to hold.
    """
    from rollout import pause as verb

    live = target.open()
    return verb.execute("pause", live.stack.name, live.spec, live.kube, target.as_json, reason)


@live_verb
def resume(target: LiveTarget) -> Exit:
    """Remove exactly the skip labels `pause` set for this stack; never one someone else set."""
    from rollout import pause as verb

    live = target.open()
    return verb.execute("resume", live.stack.name, live.spec, live.kube, target.as_json, "")


@live_verb
def simulate(
    target: LiveTarget,
    from_cluster: Annotated[
        bool, typer.Option("--from-cluster", help="Read nodes, pods, PDBs and the operator's policy from the live "
                           "cluster (read-only) instead of the stack; without it no cluster is reached.")
    ] = False,
    parallel: Annotated[
        int | None, typer.Option("--parallel", min=0, help="Simulate with this maxParallelUpgrades instead of the "
                                 "configured one (0: unlimited).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulated durations' spread and, from the stack, of the replicas' placement.")] = 0,
) -> Exit:
    """Predict the rollout before it starts: time per wave and pool, models below minAvailable, stalls, and the
    safest fast parallelism. Exit 1 when the configured policy would stall or drop a model below its minimum."""
    from rollout import simulate as verb

    if from_cluster:
        live = target.open()
        return verb.execute(live.stack.name, lambda: verb.cluster_fleet(live.kube, live.spec), parallel=parallel,
                            seed=seed, as_json=target.as_json)
    if target.kubeconfig or target.context:
        raise typer.BadParameter("they choose a cluster to read: give them with --from-cluster (without it no "
                                 "cluster is reached)", param_hint="--kubeconfig/--context")
    ref = target.resolve()
    return verb.execute(ref.name, lambda: verb.stack_fleet(ref.path), parallel=parallel, seed=seed,
                        as_json=target.as_json)


@live_verb
def release_node(
    target: LiveTarget,
    node: Annotated[str, typer.Argument(help="The node held by a failed validation.", show_default=False)],
    accept_failed: Annotated[
        bool, typer.Option("--accept-failed", help="Release it even though its latest validation failed on the "
                           "driver it still runs.")
    ] = False,
    keep_cordoned: Annotated[
        bool, typer.Option("--keep-cordoned", help="Remove the hold record only; leave the node cordoned.")
    ] = False,
) -> Exit:
    """Put a node the validation job holds (cordoned after a failed validation) back into service.

    Removes the job's hold record and uncordons the node; refused for a node that is not held, and for one
    still failing on the driver it runs unless --accept-failed. resume never uncordons a held node.
    """
    from rollout import release as verb

    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, node, accept_failed=accept_failed,
                        keep_cordoned=keep_cordoned, as_json=target.as_json)


@live_verb
def verify(
    target: LiveTarget,
    prometheus: PrometheusOption = None,
    signing_key: SigningKeyOption = None,
    smoke: Annotated[
        bool, typer.Option("--smoke", help="Right after a rollout: attest nothing, and exit 1 only on a failed "
                           "check (an inconclusive one, such as the soak's metrics, is left to the verify at the "
                           "end of the soak).")
    ] = False,
) -> Exit:
    """Validate the upgraded nodes (runbook section 5); a passing canary writes attestations/<stack>/<driver>.json,
    signed with its key.

    Exit 0 only when every check passes; a failed or inconclusive check exits 1 with its reason. With --smoke
    nothing is attested and only a failed check exits 1.
    """
    from engine_contracts.attestation import AttestationError
    from refusals.errors import InvalidInput
    from rollout import verify as verb

    url = prometheus_url(prometheus)
    try:
        key = verb.signing_key(signing_key)
    except AttestationError as error:  # the key's own words; no --json document, as ever (see refusals.errors)
        raise InvalidInput(str(error), documented=False) from None
    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, project_dir=live.stack.project_dir,
                        prometheus_url=url, as_json=target.as_json, smoke=smoke, key=key)


@live_verb
def soak(target: LiveTarget) -> Exit:
    """Is this canary ready to attest, and when will it be: its soak (from the last upgraded node's finished
    upgrade) against the longest promotion.minSoakHours of the prod stacks promoted from it.

    Exit 0 whenever it answered (JSON: ready, readyAt, reason); 2 for a stack that is not a canary.
    """
    from rollout import soak as verb

    live = target.open()
    return verb.execute(live.stack.name, live.spec, live.kube, project_dir=live.stack.project_dir,
                        as_json=target.as_json)


@command(GuardTarget)
def guard(
    target: GuardTarget,
    in_cluster: Annotated[
        bool, typer.Option("--in-cluster", help="Reach the cluster as the pod's ServiceAccount (the guard's "
                           "Deployment), not through a kubeconfig.")
    ] = False,
    listen: Annotated[str, typer.Option("--listen", help="HOST:PORT of /metrics and /healthz.")] = "0.0.0.0:9400",
    lease_namespace: Annotated[
        str, typer.Option("--lease-namespace", help="Namespace of the leader election's Lease (guard.namespace).")
    ] = "gpu-rollout-guard",
    lease_name: Annotated[str, typer.Option("--lease-name", help="The leader election's Lease.")] = "gpu-rollout-guard",
    validation_deadline_minutes: Annotated[
        float | None, typer.Option("--validation-deadline-minutes", min=1.0,
                                   help="Minutes after its upgrade a node must have a validation result (default: "
                                   "the stack's guard.validationDeadlineMinutes, else 30).")
    ] = None,
    stuck_after: Annotated[
        float, typer.Option("--stuck-after", min=1.0, help="Minutes in one upgrade state before a node counts as "
                            "stuck.")
    ] = 60.0,
    prometheus: PrometheusOption = None,
) -> Exit:
    """Watch the stack's cluster without a person (the watch API): pause on the watch's triggers, alert on drift
    between rollouts, serve /metrics and /healthz; of several replicas one leads (docs/guard.md).

    Runs until stopped (SIGTERM); exit 2 before anything runs on another cluster or a bad flag.
    """
    from checks.guard import GuardSettings
    from rollout import guard as verb

    url = prometheus_url(prometheus)
    live = target.open(in_cluster)
    deadline = validation_deadline_minutes or verb.declared_deadline_minutes(live.spec)
    settings = GuardSettings(stuck_after=stuck_after * 60, validation_deadline=deadline * 60)
    return verb.execute(live.stack.name, live.spec, live.kube, listen=listen, lease_namespace=lease_namespace,
                        lease_name=lease_name, settings=settings, prometheus_url=url)
