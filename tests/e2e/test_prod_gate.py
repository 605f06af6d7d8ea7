"""The prod gate in the real engine: `pulumi preview` of the existing-cluster prod stack with the policy pack,
its canary stack deployed in the same file backend, refuses every attestation the gate must refuse.

The attestations are sealed by the test through engine_contracts.attestation (tests/policy/attested.py), standing in
for the canary's `gpu-rollout verify`; a tampered one is a sealed one changed afterwards. Each case leaves
the project's attestations/<canary>/ as it found it (the session's passing attestation, which prod `up` relies on).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine_contracts import attestation as att
from engine_contracts.attestation import AttestedPool
from tests.e2e.conftest import policy_args
from tests.e2e.controlplane import ControlPlane
from tests.e2e.pulumi_cli import Pulumi, Result
from tests.e2e.test_engine import variant_stack
from tests.policy.attested import CANARY, DRIVER, canary_attestation

PROD = "existing-prod"
GATE = "canary-attested"


@pytest.fixture
def attestations(canary_attested: Path) -> Iterator[Path]:
    """The project's attestations/ for one case, emptied of the canary's folder (attestations/<canary>/), which
    is put back after it with the session's passing attestation."""
    folder = canary_attested.parent
    root = folder.parent
    kept = root.parent / "attestations.kept"
    shutil.copytree(folder, kept)
    shutil.rmtree(folder)
    try:
        yield root
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        kept.rename(folder)


@pytest.fixture(scope="module")
def promoted(pulumi: Pulumi, control_plane: ControlPlane, canary_up: Result) -> str:
    """A prod stack with the shipped prod config that has not been deployed yet: 580.173.02 would be a
    promotion for it (the shipped prod stack may already run it in this session, and a driver the fleet ran
    is no promotion)."""
    return variant_stack(pulumi, control_plane, PROD, "gate-prod", lambda config: None)


def preview(pulumi: Pulumi, pack: Path, stack: str) -> Result:
    return pulumi.run("preview", "--stack", stack, "--non-interactive", *policy_args(pack, "prod"), program=True,
                      check=False)


def assert_refused(result: Result, reason: str) -> None:
    assert result.returncode != 0, result.describe()
    assert re.search(rf"\[mandatory\](?: \[severity: \w+\])?\s+{GATE}\s", result.stdout), result.describe()
    assert reason in result.stdout, result.describe()


def test_the_attested_driver_passes(pulumi: Pulumi, policy_pack: Path, attestations: Path, promoted: str) -> None:
    att.write(attestations, canary_attestation())
    result = preview(pulumi, policy_pack, promoted)
    assert result.returncode == 0, result.describe()
    assert "mandatory" not in result.stdout.lower(), result.describe()


def _tampered(folder: Path) -> None:
    """A passing attestation whose pool was renamed after verify sealed it."""
    path = att.write(folder, canary_attestation())
    path.write_text(path.read_text().replace('"l40s-canary"', '"l40s-serving"'))


def _v2(folder: Path) -> None:
    """A passing attestation relabelled as the retired v2 format (which bound no identity)."""
    path = att.write(folder, canary_attestation())
    path.write_text(path.read_text().replace(att.API_VERSION, "gpu-driver-upgrade.io/attestation/v2"))


def _renamed(folder: Path) -> None:
    att.write(folder, canary_attestation(driver="580.159.04")).rename(att.path_for(folder, CANARY, DRIVER))


CASES: dict[str, tuple[Callable[[Path], object], str]] = {
    "missing": (lambda folder: att.write(folder, canary_attestation(driver="570.195.03")),
                f"no attestation attestations/{CANARY}/{DRIVER}.json (the folder holds: 570.195.03)"),
    "tampered": (_tampered, f"attestations/{CANARY}/{DRIVER}.json: digest mismatch"),
    "too young": (lambda folder: att.write(folder, canary_attestation(soak_start=datetime.now(UTC) - timedelta(hours=25))),
                  "less than promotion.minSoakHours (168 h)"),
    "another version": (_renamed, f"it attests driver 580.159.04, not {DRIVER}"),
    "another architecture": (
        lambda folder: att.write(folder, canary_attestation(pools=[AttestedPool.of("h100", "NVIDIA-H100-80GB-HBM3")])),
        "it covers hopper GPUs, not ada",
    ),
    # Issue 30: trust bound to the canary's identity, the format, the age and every install factor.
    "another fleet's canary": (
        lambda folder: att.write(folder, canary_attestation(
            stack=f"otherorg/otherproject/{CANARY}", cluster="other-fleet-cluster-eus",
            identity=att.ClusterIdentity(kubeSystemUid="other", cloudId="arn:aws:eks:us-east-2:1:cluster/other"))),
        f"was made on stack 'otherorg/otherproject/{CANARY}', not on the canary stack "
        f"'organization/gpu-driver-upgrade/{CANARY}'",
    ),
    "a cluster that names itself like the canary's": (
        lambda folder: att.write(folder, canary_attestation(
            identity=att.ClusterIdentity(kubeSystemUid="00000000-0000-4000-8000-000000000000"))),
        "was made on the cluster whose kube-system namespace has UID 00000000-0000-4000-8000-000000000000; the "
        "canary stack's cluster has ",
    ),
    "made on a prod stack": (lambda folder: att.write(folder, canary_attestation(stage="prod")),
                             "was made on a prod stack: only a canary stack's verify attests"),
    "v2 format": (_v2, f"re-attest with `gpu-rollout verify --stack {CANARY}`"),
    "too old": (lambda folder: att.write(folder, canary_attestation(
        soak_start=datetime.now(UTC) - timedelta(days=110), soak_end=datetime.now(UTC) - timedelta(days=100))),
                "more than promotion.maxAttestationAgeDays (90)"),
    "proprietary modules": (
        lambda folder: att.write(folder, canary_attestation(pools=[AttestedPool.of(
            "l40s-canary", "NVIDIA-L40S", served_traffic=True, kernel_module_type="proprietary")])),
        "differs in kernel-module-type: proprietary kernel modules on the canary, open in prod",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_engine_refuses(pulumi: Pulumi, policy_pack: Path, attestations: Path, promoted: str, case: str) -> None:
    prepare, reason = CASES[case]
    prepare(attestations)
    assert_refused(preview(pulumi, policy_pack, promoted), reason)


def test_the_deployed_canary_exports_the_uid_its_api_server_gave(pulumi: Pulumi, canary_up: Result,
                                                                 kube_system_uid: str) -> None:
    """The engine read kube-system through the canary's provider: its identity output carries the cluster's UID."""
    outputs = json.loads(pulumi.run("stack", "output", "--json", "--stack", CANARY).stdout)
    assert outputs["identity"]["kubeSystemUid"] == kube_system_uid
    assert outputs["identity"]["clusterRead"] is True


def test_a_canary_stack_that_was_never_deployed_is_refused(pulumi: Pulumi, policy_pack: Path, canary_attested: Path,
                                                           control_plane: ControlPlane) -> None:
    pulumi.run("stack", "init", "gate-undeployed-canary", "--non-interactive")
    stack = variant_stack(pulumi, control_plane, PROD, "gate-undeployed",
                          lambda config: config["promotion"].update(canaryStack="gate-undeployed-canary"))
    result = preview(pulumi, policy_pack, stack)
    assert_refused(result, "the canary stack 'gate-undeployed-canary' shows no driver")


def test_a_canary_stack_that_does_not_exist_fails_the_preview_naming_it(
    pulumi: Pulumi, policy_pack: Path, canary_attested: Path, control_plane: ControlPlane,
) -> None:
    stack = variant_stack(pulumi, control_plane, PROD, "gate-no-canary",
                          lambda config: config["promotion"].update(canaryStack="no-such-canary"))
    result = preview(pulumi, policy_pack, stack)
    assert result.returncode != 0, result.describe()
    assert "no-such-canary" in result.output, result.describe()


def test_a_driver_prod_already_runs_is_not_blocked(pulumi: Pulumi, policy_pack: Path, prod_up: Result,
                                                   attestations: Path) -> None:
    """Once prod runs 580.173.02, a preview without its attestation (a redeployment, a rollback) passes; the
    gate's finding is advice, under policy-advice."""
    result = preview(pulumi, policy_pack, PROD)
    assert result.returncode == 0, result.describe()
    assert f"[{GATE}] driver {DRIVER} (pools l40s-serving; ada): no attestation" in result.stdout, result.describe()
    assert "not a promotion, not blocked" in result.stdout, result.describe()


def test_a_stack_that_is_its_own_canary_is_refused_by_the_engine(pulumi: Pulumi, policy_pack: Path,
                                                                 canary_attested: Path,
                                                                 control_plane: ControlPlane) -> None:
    """Issue 30: the CLI refuses a prod stack naming itself as its canary; the pack the engine runs does too."""
    stack = variant_stack(pulumi, control_plane, PROD, "gate-self",
                          lambda config: config["promotion"].update(canaryStack="gate-self"))
    assert_refused(preview(pulumi, policy_pack, stack), "is this stack (organization/gpu-driver-upgrade/gate-self): a "
                                                        "stack is never its own canary")


def test_the_example_key_is_trusted_by_no_config_a_team_deploys_with(pulumi: Pulumi, policy_pack: Path,
                                                                     attestations: Path, promoted: str) -> None:
    """Issue 30: an attestation signed with the example key (its private half is in this repository), for a
    stack on a cluster named like the example fleet: refused by the shipped policy/prod.json (it trusts no key),
    and by the examples' own config (scoped to the example prod stacks) for any other stack."""
    att.write(attestations, canary_attestation())
    for config, reason in (("policy/prod.json", "which the gate does not trust"),
                           ("policy/examples/prod.json", "is outside the example key's scope")):
        result = pulumi.run("preview", "--stack", promoted, "--non-interactive", "--policy-pack", str(policy_pack),
                            "--policy-pack-config", config, program=True, check=False)
        assert_refused(result, reason)
