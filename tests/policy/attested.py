"""A prod stack whose canary attested its driver: the existing-cluster example rendered in a project folder of
its own, beside an attestation sealed here with ``engine_contracts.attestation.seal`` (standing in for the canary's
`gpu-rollout verify`, and signed with the example key as verify signs; nothing is written by hand) and with the
canary stack's rendered outputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from preview.run import PROGRAM_FILE, ProgramRun, run_program
from engine_contracts import attestation as att
from engine_contracts import resource_facts as rf
from engine_contracts.attestation import AttestedCheck, AttestedPool
from tests.conftest import PROJECT_DIR, example_signing_key, stack_config

PROD, CANARY = "existing-prod", "existing-canary"  # prod releases l40s-serving (ada); the canary runs L40S
DRIVER = "580.173.02"
# The stacks as the engine names them (the offline preview's organization is the file backend's).
QUALIFIED_PROD, QUALIFIED_CANARY = (f"organization/gpu-driver-upgrade/{s}" for s in (PROD, CANARY))
KUBE_SYSTEM_UID = "0b7c3f5e-2d4a-4f1e-9a8b-6c5d4e3f2a1b"  # the test cluster's kube-system namespace


def canary_attestation(**overrides: Any) -> att.Attestation:
    """What a passing verify of the existing canary writes: 200 hours of soak, ended an hour ago."""
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "stack": QUALIFIED_CANARY,
        "stage": "canary",
        "cluster": "lab-gpu-1",
        "identity": att.ClusterIdentity(kubeSystemUid=KUBE_SYSTEM_UID),  # cloud: existing, no cloud resource ID
        "driver": DRIVER,
        "operator_chart": "v26.7.0",
        "driver_mode": "nvidiadriver",
        # The example canary's L40S pool as the cluster shows it: one GPU per node, the canary model's traffic.
        "pools": [AttestedPool.of("l40s-canary", "NVIDIA-L40S", gpus_per_node=1, served_traffic=True,
                                  traffic="llm-chat-canary: 5400 requests on 2 pod(s) during the soak",
                                  kernel="6.8.0-1020-generic", os_image="Ubuntu 22.04.5 LTS",
                                  kernel_module_type="open")],
        "checks": [
            AttestedCheck(id="driver-version", status="pass", subject="node l40s-0", message="580.173.02 on 1/1",
                          evidence={"target": DRIVER}),
            AttestedCheck(id="validation-job", status="pass", subject="pool l40s-canary", message="1 node passed"),
        ],
        "soak_start": now - timedelta(hours=201),
        "soak_end": now - timedelta(hours=1),
        "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "signing_key": example_signing_key(),
    }
    fields.update(overrides)
    if "coverage" not in overrides:  # what verify judged of the 200-hour soak on each pool, as its traffic says
        fields["coverage"] = {p.name: served_coverage(p.servedTraffic) for p in fields["pools"]}
    return att.seal(**fields)


def deployed_canary_outputs(stack: str = CANARY, kube_system_uid: str = KUBE_SYSTEM_UID) -> dict[str, Any]:
    """The canary's outputs as the engine records them on a deployment: the program rendered with its cluster
    answering the kube-system Namespace read (offline no cluster answers, and the UID is not read)."""
    namespace = {"metadata": {"name": "kube-system", "uid": kube_system_uid}}
    return run_program(stack_config(stack), stack, cluster_objects={(rf.NAMESPACE, "kube-system"): namespace}).outputs


def served_coverage(served: bool) -> att.PoolCoverage:
    """A pool's coverage over the 200-hour soak: 97 % judged and 5400 requests where it served traffic (above the
    example prod stacks' floors, 0.9 and 1000), nothing where it served none."""
    return att.PoolCoverage(judgedFraction=0.97 if served else 0.0, requests=5400 if served else 0, buckets=200)


def project_folder(folder: Path) -> Path:
    """A project folder: the checkout's program linked; attestations/ is the caller's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROGRAM_FILE).symlink_to(PROJECT_DIR / PROGRAM_FILE)
    return folder


def attested_prod(folder: Path) -> ProgramRun:
    """existing-prod rendered from ``folder`` with a passing attestation and its canary's outputs."""
    project = project_folder(folder)
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    canary = deployed_canary_outputs()
    return run_program(stack_config(PROD), PROD, project / PROGRAM_FILE, None, {CANARY: canary})
