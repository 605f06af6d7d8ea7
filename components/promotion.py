"""CanaryGate: what a prod stack's promotion relies on, stated where the policy pack sees it.

A prod stack with a ``promotion`` block reads two things the pack cannot: the attestation files its canary's
`gpu-rollout verify` wrote (``attestations/<canary-stack>/<driver>.json`` in the project folder, where the
engine runs the program) and the canary stack's outputs (through a StackReference to ``promotion.canaryStack``). It writes
both, unjudged, on one ConfigMap record in the cluster (``engine_contracts.resource_facts.promotion``); the policy
``canary-attested`` judges them. So `pulumi preview`/`up` with the pack and `gpu-rollout plan` refuse the same
attestations, and the cluster keeps a record of what each prod deployment was promoted on.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.args import ComponentArgs
from components.options import child_options
from components.previous import read_referenced
from engine_contracts import attestation
from engine_contracts import resource_facts as rf
from renderers.manifests import RECORD_NAMESPACE
from fleetspec.model import PROJECT, Promotion, Stage
from gpu_knowledge.versions import parse_driver

# The canary stack's outputs the gate reads (their names: engine_contracts.resource_facts.outputs).
CANARY_OUTPUTS = (rf.DRIVER_VERSION, rf.POOLS)
CANARY_IDENTITY_OUTPUTS = (rf.IDENTITY,)  # which stack and cluster the canary is: compared with the attestation


class CanaryGateArgs(ComponentArgs):
    stage: Stage = Field(description="The stack's stage, written on the record.")
    promotion: Promotion = Field(description="The stack's promotion block: the canary stack, soak and waivers.")
    drivers: frozenset[str] = Field(
        description="The drivers the stack's pools move to or are pinned to, and the stack's driver: each may need "
        "the canary's attestation (a released pool's always, a held pool's when its pin changes; the pack tells "
        "which from the last deployment).")
    install: str = Field(
        "", description="The stack's install factors (rf.InstallFacts.as_data): compared with the attested canary's.")
    attestation_dir: Path = Field(
        Path(attestation.ATTESTATION_DIR),
        description="Where the attestations are. Relative paths are the project folder's: the engine runs the "
        "program there (so does `gpu-rollout plan`).")


def record_name() -> str:
    return f"{PROJECT}-promotion"


def canary_stack_name(canary_stack: str) -> str:
    """A stack name as a StackReference takes it: ``org/project/stack``; a bare name is this project's."""
    if "/" in canary_stack:
        return canary_stack
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{canary_stack}"


def own_stack_name() -> str:
    """This stack as the engine names it: ``org/project/stack``."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def attested_drivers(directory: Path, canary_stack: str) -> set[str]:
    """The drivers the canary stack's attestation folder holds a file for (judged by the pack, not here)."""
    try:
        folder = attestation.folder_for(directory, canary_stack)
    except attestation.AttestationError:
        return set()
    if not folder.is_dir():
        return set()
    return {path.stem for path in folder.glob("*.json") if path.is_file() and parse_driver(path.stem) is not None}


def attestation_texts(directory: Path, canary_stack: str, drivers: set[str]) -> dict[str, str]:
    """The text of each driver's attestation file of the canary stack, as found; a file that cannot be read is
    left out (the pack then reports it missing, with the folder's other drivers)."""
    texts = {}
    for driver in sorted(drivers):
        try:
            texts[driver] = attestation.read_text(attestation.path_for(directory, canary_stack, driver))
        except attestation.AttestationError:
            continue
    return texts


class CanaryGate(pulumi.ComponentResource):
    """The promotion record of a prod stack: the canary's drivers and the attestations of its own targets."""

    def __init__(self, name: str, args: CanaryGateArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-driver-upgrade:promotion:CanaryGate", name, None, opts)
        promotion = args.promotion
        canary = pulumi.StackReference(
            "canary-stack", stack_name=canary_stack_name(promotion.canaryStack), opts=child_options(self, opts),
        )
        running = read_referenced(canary, CANARY_OUTPUTS, rf.canary_runs)
        identity = read_referenced(canary, CANARY_IDENTITY_OUTPUTS, lambda outputs: rf.identity_text(outputs.identity))
        self.record = k8s.core.v1.ConfigMap(
            record_name(),
            metadata={
                "name": record_name(),
                "namespace": RECORD_NAMESPACE,
                "labels": rf.promotion_labels(),
                "annotations": rf.promotion_annotations(args.stage),
            },
            data=rf.promotion_data(
                promotion.canaryStack,
                promotion.minSoakHours,
                running,
                attested_drivers(args.attestation_dir, promotion.canaryStack),
                attestation_texts(args.attestation_dir, promotion.canaryStack, set(args.drivers)),
                {pool: rf.WaiverFacts(frozenset(w.accept), w.reason, w.driver, w.ticket, w.expires.isoformat() if w.expires else None)
                 for pool, w in promotion.waivers.items()},
                running_today=rf.RunningTodayFacts(promotion.runningToday.driver, promotion.runningToday.reason)
                if promotion.runningToday is not None else None,
                stack=own_stack_name(),
                canary_identity=identity,
                max_attestation_age_days=promotion.maxAttestationAgeDays,
                min_judged_fraction=promotion.minJudgedFraction,
                min_requests=promotion.minRequests,
                min_soak_reason=promotion.minSoakReason,
                install=rf.read_install(args.install),
            ),
            opts=child_options(self, opts),
        )
        self.register_outputs({"canaryStack": promotion.canaryStack})
