"""The attestations the example prod stacks ship (attestations/<canary>/<driver>.json), made by
scripts/attest_examples.py (`make attest-examples`): `gpu-rollout verify` of each example canary stack on the
test cluster. Each one is intact, was made on the example canary stack for what that stack declares now, and
admits its prod stack's released pools; making it again gives an equivalent one (times and commit aside).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scripts import attest_examples
from engine_contracts import attestation as att
from renderers import manifests
from gpu_knowledge import compat
from fleetspec.load import load_stack_file
from fleetspec.model import FleetSpec
from tests.conftest import PROJECT_DIR
from tests.prometheus.server import MISSING, binary

PAIRS = {"canary": "prod", "eks-canary": "eks-prod", "existing-canary": "existing-prod"}
SHIPPED = PROJECT_DIR / att.ATTESTATION_DIR


def spec_of(stack: str) -> FleetSpec:
    return load_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml")


def shipped(canary: str) -> att.Attestation:
    return att.load(att.path_for(SHIPPED, canary, spec_of(canary).driver.version))


def test_the_script_attests_every_example_canary() -> None:
    assert set(attest_examples.EXAMPLE_CANARIES) == set(PAIRS)
    for canary, prod in PAIRS.items():
        promotion = spec_of(prod).promotion
        assert promotion is not None and promotion.canaryStack == canary


@pytest.mark.parametrize("canary", sorted(PAIRS))
def test_the_shipped_attestation_is_the_example_canarys(canary: str) -> None:
    spec, prod = spec_of(canary), spec_of(PAIRS[canary])
    sealed = shipped(canary)  # loads only when the digest matches the content
    assert (sealed.stack, sealed.stage, sealed.cluster, sealed.driver, sealed.operatorChart) == (
        f"organization/gpu-driver-upgrade/{canary}", "canary", spec.cluster.name, spec.driver.version,
        spec.gpuOperator.chartVersion)
    # The cluster's identity: the test cluster's kube-system uid, and the cloud resource the canary declares.
    assert sealed.identity.kubeSystemUid and sealed.identity.cloudId == manifests.cluster_cloud_id(spec)
    assert sorted((p.name, p.gpuProduct) for p in sealed.pools) == sorted(
        (p.name, p.gpuProduct) for p in spec.nodePools if not spec.pool_held(p))
    assert {c.status for c in sealed.checks} == {"pass"}
    assert {c.id for c in sealed.checks} >= {"driver-version", "gpu-count", "model-answers", "validation-job"}
    released = {compat.architecture(p.gpuProduct).value for p in prod.nodePools if not prod.pool_held(p)}
    assert prod.promotion is not None
    assert att.admission_problems(sealed, driver=prod.driver.version, architectures=sorted(released),
                     min_soak_hours=prod.promotion.minSoakHours) == []


@pytest.mark.parametrize("canary", sorted(PAIRS))
def test_the_shipped_attestation_names_a_commit_of_this_project(canary: str) -> None:
    commit = shipped(canary).gitCommit
    probe = subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "--is-inside-work-tree"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip("not a git checkout: the recorded commit cannot be looked up")
    found = subprocess.run(["git", "-C", str(PROJECT_DIR), "cat-file", "-e", f"{commit}^{{commit}}"],
                           capture_output=True, check=False)
    assert found.returncode == 0, f"{canary}: gitCommit {commit} is not a commit of this repository"


@pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)
def test_making_them_again_gives_equivalent_attestations(tmp_path: Path) -> None:
    """The script, run into another folder, attests the same checks on the same subjects and the same pools:
    the shipped files are what the example canaries' verify gives today."""
    done = subprocess.run([sys.executable, "-m", "scripts.attest_examples", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=PROJECT_DIR, check=False)
    assert done.returncode == 0, done.stderr
    for canary in PAIRS:
        driver = spec_of(canary).driver.version
        again, before = att.load(att.path_for(tmp_path / att.ATTESTATION_DIR, canary, driver)), shipped(canary)
        assert [(c.id, c.subject, c.status) for c in again.checks] == [(c.id, c.subject, c.status)
                                                                      for c in before.checks]
        assert again.pools == before.pools
        assert (again.stack, again.stage, again.cluster, again.identity.cloudId, again.driver, again.operatorChart) == (
            before.stack, before.stage, before.cluster, before.identity.cloudId, before.driver, before.operatorChart)
        assert again.soak_hours == pytest.approx(before.soak_hours, abs=0.01)


@pytest.mark.parametrize("canary", sorted(PAIRS))
def test_the_shipped_attestation_is_signed_by_a_key_the_examples_pack_trusts_for_its_prod_stack(canary: str) -> None:
    """The examples' own pack config (policy/examples/prod.json) trusts the example key for the example prod
    stacks only; the config a team deploys with (policy/prod.json) trusts it for none."""
    from policy.evaluate import EXAMPLES_CONFIG_DIR, POLICY_DIR, load_config, settings_entry
    from policy.promotion_rules import read_settings

    def trusted(folder: Path) -> tuple[att.TrustedKey, ...]:
        return read_settings(settings_entry("canary-attested", load_config("prod", folder))).trusted_keys

    sealed = shipped(canary)
    prod = f"organization/gpu-driver-upgrade/{PAIRS[canary]}"
    assert sealed.signature is not None and sealed.signature.keyId == att.EXAMPLE_KEY_ID
    assert att.trust_problems(sealed, trusted(EXAMPLES_CONFIG_DIR), canary, canary, prod) == []
    (problem,) = att.trust_problems(sealed, trusted(EXAMPLES_CONFIG_DIR), canary, canary, "acme/gpu-driver-upgrade/prod")
    assert "whose scope" in problem and "does not take prod stack 'acme/gpu-driver-upgrade/prod'" in problem
    assert "which the gate does not trust" in att.trust_problems(sealed, trusted(POLICY_DIR), canary, canary, prod)[0]
