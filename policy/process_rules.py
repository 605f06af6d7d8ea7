"""Rules for the change process around an upgrade: every change names its approved change ticket (a canary's
too: the canary is a change to a production cluster), and the
pack judging it reads the facts the program wrote (the pack may be older than the program: the protected
base's, or a published version)."""

from __future__ import annotations

from collections.abc import Iterator

from policy.facts import StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from engine_contracts import resource_facts as rf
from fleetspec.base import Stage
from fleetspec.guard import has_digest
from vocabulary.policy_ids import PolicyId


@stack_policy(
    PolicyId.CHANGE_TICKET,
    "Checks that the stack names a change ticket, in every stage: the canary is a change to a production cluster "
    "too (the runbook's change ticket).",
    severity=Severity.MEDIUM, topics=("process",),
    remediation="Set changeTicket in the stack to the approved change.",
    config_keys=("changeTicket",),
)
def change_ticket(stack: StackFacts) -> Iterator[Finding]:
    """Every stage names a change ticket."""
    if not stack.stage_stated:
        yield advice("the stack's stage is not visible on its resources; cannot check the change ticket")
    elif not stack.change_ticket:
        who = f"the {stack.stage.value} stage" if stack.stage is not None else "this stack"
        yield Finding(f"{who} must name a change ticket (changeTicket): "
                      + ("the canary is a change to a production cluster too" if stack.stage is Stage.CANARY
                         else "the approved change this deployment is"))


@stack_policy(
    PolicyId.FACTS_READABLE,
    "Checks that the pack reads the version of the resource facts the program wrote.",
    severity=Severity.CRITICAL, topics=("process",),
    remediation="Enforce a pack that reads the program's facts version: merge (or publish and enable) the pack "
    "that reads it first, then deploy the program that writes it (docs/policies.md, facts-readable).",
    config_keys=(),
)
def facts_readable(stack: StackFacts) -> Iterator[Finding]:
    """The program's facts are no newer than this pack reads (an unstamped record is version 1)."""
    for record in stack.identities:
        stated = rf.prop(record.resource.props, "data", "factsVersion")
        version = record.facts.facts_version
        if stated is not None and version is None:
            yield Finding(f"the cluster-identity record {record.resource.name} states facts version {stated!r}, "
                          f"not a version this pack reads (it reads up to {rf.READABLE_FACTS_VERSION})",
                          record.resource)
        elif version is not None and version > rf.READABLE_FACTS_VERSION:
            yield Finding(f"the program wrote resource facts version {version} (cluster-identity record "
                          f"{record.resource.name}); this pack reads facts up to version "
                          f"{rf.READABLE_FACTS_VERSION}: it is older than the program, and would misread them",
                          record.resource)


@stack_policy(
    PolicyId.GUARD_IMAGE_DIGEST,
    "Checks that a prod stack's in-cluster guard runs an image pinned by digest, so what watches and pauses the "
    "rollout is the image that was built and reviewed, not whatever a tag points at today.",
    severity=Severity.HIGH, topics=("process", "supply-chain"),
    remediation="Set guard.image to the digest .github/workflows/guard-image.yml pushed "
    "(registry/name@sha256:<64 hex>), or switch the guard off with guard.enabled: false.",
    config_keys=("guard.image", "guard.enabled"),
)
def guard_image_digest(stack: StackFacts) -> Iterator[Finding]:
    """Prod runs the guard (on by default) from an image pinned by digest: a tag can be moved under it."""
    if stack.stage is not Stage.PROD:
        return
    namespaces = [r for r in stack.resources if rf.is_guard_namespace(r.type, r.props)]
    deployments = [(r, images) for r in stack.resources
                   if (images := rf.read_guard_images(r.type, r.props)) is not None]
    if not namespaces and not deployments:
        yield advice("prod declares no in-cluster guard (guard.enabled: false): nothing watches a rollout or the "
                     "fleet between rollouts unless someone runs `gpu-rollout watch`")
        return
    if not deployments:
        yield Finding("prod runs the in-cluster guard (guard.enabled defaults to true in prod) but guard.image is not "
                      "set: give the image pinned by digest, or set guard.enabled: false", namespaces[0])
    for resource, images in deployments:
        for image in images:
            if not has_digest(image):
                yield Finding(f"guard image '{image}' carries no digest (@sha256:<64 hex>): a tag can be moved to "
                              "another image under a running prod guard; pin guard.image by digest", resource)
