"""Issue 20: the prod gate judges what each canary pool was, what ran, and who signed.

- the attestation binds each canary pool's GPU product, GPUs per node, NVSwitch, MIG layout and traffic, and the
  operator release; the gate names each difference from a promoted prod pool, and a declared waiver turns it
  into advice with its reason;
- what ran is what the last deployment applied to its pools, never ``previousDriverVersion``; a held pool whose
  pin changes is a promotion;
- an image-owned pool's newest generation is what moves.

Attestations are sealed here through ``engine_contracts.attestation.seal`` and signed with the example key, standing in for
the canary's `gpu-rollout verify` (tests/policy/attested.py).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from policy.evaluate import Violation, evaluate, from_registered, load_config
from policy.promotion_rules import differences
from preview.run import PROGRAM_FILE, run_program
from engine_contracts import attestation as att
from engine_contracts import resource_facts as rf
from engine_contracts.attestation import AttestedPool
from fleetspec.load import SpecError, spec_from_config
from tests.conftest import TEST_WAIVER, PROJECT_DIR, change, stack_config
from tests.policy.attested import CANARY, DRIVER, KUBE_SYSTEM_UID, PROD, canary_attestation, deployed_canary_outputs
from tests.policy.attested import project_folder

POLICY = "canary-attested"
NOW = datetime.now(UTC)
H100_CANARY = AttestedPool.of("h100-canary", "NVIDIA-H100-80GB-HBM3", gpus_per_node=8, nvswitch=True,
                              fabric_manager="driver-container", served_traffic=True, traffic="llm-chat on 1 pod(s)",
                              kernel_module_type="open")
L40S_CANARY = AttestedPool.of("l40s-canary", "NVIDIA-L40S", gpus_per_node=1, served_traffic=True,
                              kernel_module_type="open")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = project_folder(tmp_path / "project")
    for stack in (PROD, CANARY):
        shutil.copy2(PROJECT_DIR / f"Pulumi.{stack}.yaml", folder / f"Pulumi.{stack}.yaml")
    return folder


@pytest.fixture(scope="module")
def canary_outputs() -> dict[str, Any]:
    return deployed_canary_outputs()


def gate(project: Path, canary: dict[str, Any], config: dict[str, str], previous: dict[str, Any] | None = None,
         stack: str = PROD, canary_stack: str = CANARY) -> list[Violation]:
    run = run_program(config, stack, project / PROGRAM_FILE, previous, {canary_stack: canary})
    return [v for v in evaluate(from_registered(run.resources), load_config("prod")) if v.policy == POLICY]


def refused(violations: list[Violation]) -> list[str]:
    return [v.message for v in violations if v.enforcement.value == "mandatory"]


def advised(violations: list[Violation]) -> list[str]:
    return [v.message for v in violations if v.enforcement.value == "advisory" and "example key" not in v.message]


def released_h100(config: dict[str, str] | None = None) -> dict[str, str]:
    """existing-prod with h100-serving released too (it is held in the example)."""
    return change(config or stack_config(PROD), "nodePools",
                  lambda pools: [p["rollout"].update(released=True) for p in pools if p["name"] == "h100-serving"])


# ---------------------------------------------------------------- what differs, one fact at a time


def test_differences_name_each_fact_in_words() -> None:
    prod = rf.PoolFacts(pool="p", role="serving", wave=1, held=False, gpu_product="NVIDIA-H100-80GB-HBM3",
                        gpus_per_node=8, nvswitch=True, mig_config="all-1g.10gb")
    nvl = AttestedPool.of("c", "NVIDIA-H100-NVL", gpus_per_node=1, traffic="no model of the stack runs on the pool")
    assert differences(nvl, prod, "v26.7.0", "v26.3.1") == {
        "gpu-product": "GPU NVIDIA-H100-NVL on the canary, NVIDIA-H100-80GB-HBM3 in prod",
        "gpus-per-node": "1 GPUs per node on the canary, 8 in prod",
        "nvswitch": "NVSwitch no on the canary, yes in prod",
        "mig-config": "MIG layout all-disabled on the canary, all-1g.10gb in prod",
        "served-traffic": "the canary pool served no model traffic during the soak (no model of the stack runs on "
                          "the pool)",
        "operator-release": "GPU Operator v26.3.1 on the canary, v26.7.0 in prod",
    }
    same = AttestedPool.of("c", "NVIDIA-H100-80GB-HBM3", gpus_per_node=8, nvswitch=True, mig_config="all-1g.10gb",
                           served_traffic=True)
    assert differences(same, prod, "v26.7.0", "v26.7.0") == {}


def test_one_gpu_under_two_gfd_names_is_the_same_product() -> None:
    prod = rf.PoolFacts(pool="p", role="serving", wave=1, held=False, gpu_product="NVIDIA-A100-PCIE-80GB",
                        gpus_per_node=1, nvswitch=False)
    canary = AttestedPool.of("c", "NVIDIA-A100-80GB-PCIe", served_traffic=True)
    assert differences(canary, prod, "v26.7.0", "v26.7.0") == {}
    sxm = AttestedPool.of("c", "NVIDIA-A100-SXM4-80GB", served_traffic=True)  # the same chip, another board
    assert set(differences(sxm, prod, "v26.7.0", "v26.7.0")) == {"gpu-product"}


# ---------------------------------------------------------------- through the program and the pack


def test_an_nvswitch_pool_is_not_covered_by_a_pcie_canary_of_its_architecture(project: Path,
                                                                             canary_outputs: dict[str, Any]) -> None:
    """Issue 20: prod's HGX H100 pool 'covered' by a PCIe H100 NVL canary that never ran Fabric Manager."""
    nvl = AttestedPool.of("h100-canary", "NVIDIA-H100-NVL", gpus_per_node=1, served_traffic=True,
                          kernel_module_type="open")
    att.write(project / att.ATTESTATION_DIR, canary_attestation(pools=[L40S_CANARY, nvl]))
    (message,) = refused(gate(project, canary_outputs, released_h100()))
    assert message == (
        "driver 580.173.02 (pools h100-serving, l40s-serving; ada, hopper): attestations/existing-canary/580.173.02.json: "
        "no attested canary pool matches pool h100-serving; the nearest, h100-canary, differs in gpu-product: GPU "
        "NVIDIA-H100-NVL on the canary, NVIDIA-H100-80GB-HBM3 in prod; gpus-per-node: 1 GPUs per node on the canary, 8 "
        "in prod; nvswitch: NVSwitch no on the canary, yes in prod (accept a difference only with a reasoned "
        "promotion.waivers.h100-serving)"
    )


def test_a_waiver_turns_the_differences_it_names_into_advice_with_its_reason(project: Path,
                                                                           canary_outputs: dict[str, Any]) -> None:
    nvl = AttestedPool.of("h100-canary", "NVIDIA-H100-NVL", gpus_per_node=1, served_traffic=True,
                          kernel_module_type="open")
    att.write(project / att.ATTESTATION_DIR, canary_attestation(pools=[L40S_CANARY, nvl]))
    reason = "no HGX node to spare; Fabric Manager comes with the driver container (CHG-42)"

    def waive(accept: list[str]) -> dict[str, str]:
        return change(released_h100(), "promotion", lambda p: p["waivers"].update(
            {"h100-serving": {"accept": accept, "reason": reason, **TEST_WAIVER}}))

    found = gate(project, canary_outputs, waive(["gpu-product", "gpus-per-node", "nvswitch"]))
    assert refused(found) == []
    assert (f"driver 580.173.02: pool h100-serving is covered by canary pool h100-canary with the difference "
            "gpu-product: GPU NVIDIA-H100-NVL on the canary, NVIDIA-H100-80GB-HBM3 in prod; gpus-per-node: 1 GPUs per "
            "node on the canary, 8 in prod; nvswitch: NVSwitch no on the canary, yes in prod, accepted by "
            f"promotion.waivers.h100-serving: {reason}") in advised(found)
    # A waiver accepts what it names and nothing more.
    (message,) = refused(gate(project, canary_outputs, waive(["gpu-product", "gpus-per-node"])))
    assert "differs in nvswitch: NVSwitch no on the canary, yes in prod (accept" in message


def test_a_canary_pool_that_served_no_traffic_covers_no_prod_pool(project: Path,
                                                                   canary_outputs: dict[str, Any]) -> None:
    idle = H100_CANARY.model_copy(update={"servedTraffic": False, "traffic": "no model of the stack runs on the pool"})
    att.write(project / att.ATTESTATION_DIR, canary_attestation(pools=[L40S_CANARY, idle]))
    (message,) = refused(gate(project, canary_outputs, released_h100()))
    assert "the nearest, h100-canary, differs in served-traffic: the canary pool served no model traffic" in message
    att.write(project / att.ATTESTATION_DIR, canary_attestation(pools=[L40S_CANARY, H100_CANARY],
                                                                soak_end=canary_attestation().soakEnd))
    assert refused(gate(project, canary_outputs, released_h100())) == []


def test_served_traffic_means_the_prod_stacks_floors_of_soak_judged_and_requests_served(
        project: Path, canary_outputs: dict[str, Any]) -> None:
    """A canary pool that answered requests, but of whose soak verify judged too little, or that served fewer
    requests than the prod stack's promotion.minJudgedFraction and promotion.minRequests, covers no prod pool;
    an attestation that records no coverage covers none either. Lower floors admit the same attestation."""
    thin = {"l40s-canary": att.PoolCoverage(judgedFraction=0.5, requests=999, buckets=200)}
    att.write(project / att.ATTESTATION_DIR, canary_attestation(coverage=thin, soak_end=NOW - timedelta(hours=2)))
    (message,) = refused(gate(project, canary_outputs, stack_config(PROD)))
    assert ("served-traffic: canary pool l40s-canary: 50% of its 200 soak bucket(s) judged, less than "
            "promotion.minJudgedFraction (90%); 999 request(s) served over the soak, fewer than "
            "promotion.minRequests (1000)") in message
    lower = change(stack_config(PROD), "promotion", lambda p: p.update(minJudgedFraction=0.5, minRequests=999))
    assert refused(gate(project, canary_outputs, lower)) == []
    att.write(project / att.ATTESTATION_DIR, canary_attestation(coverage=None, soak_end=NOW - timedelta(hours=1)))
    (message,) = refused(gate(project, canary_outputs, lower))
    assert "served-traffic: the attestation records no coverage for canary pool l40s-canary" in message


def test_the_mig_layout_and_the_operator_release_are_compared(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, canary_attestation(operator_chart="v26.3.1"))
    mig = change(stack_config(PROD), "nodePools",
                 lambda pools: [p.update(migConfig="all-balanced") for p in pools if p["name"] == "l40s-serving"])
    (message,) = refused(gate(project, canary_outputs, mig))
    assert ("differs in mig-config: MIG layout all-disabled on the canary, all-balanced in prod; operator-release: GPU "
            "Operator v26.3.1 on the canary, v26.7.0 in prod") in message


def test_a_waiver_of_a_pool_that_moves_to_nothing_new_is_shown_unused(project: Path,
                                                                      canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    config = change(stack_config(PROD), "promotion", lambda p: p["waivers"].update(
        {"h100-serving": {"accept": ["nvswitch"], "reason": "later"}}))
    assert ("promotion.waivers.h100-serving (accepts nvswitch: later) is not used by this change: pool h100-serving "
            "takes no driver that is a promotion") in advised(gate(project, canary_outputs, config))


# ---------------------------------------------------------------- what ran is what ran


def test_previous_driver_version_never_counts_as_ran(project: Path, canary_outputs: dict[str, Any]) -> None:
    """Issue 20: a last deployment whose previousDriverVersion is 595.91.07 with no pool on it: moving prod to an
    unattested 595.91.07 is refused, exactly as with an honest last deployment."""
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    honest = run_program(stack_config(PROD), PROD).outputs
    claimed = {**honest, rf.PREVIOUS_DRIVER_VERSION: "595.91.07"}
    assert "595.91.07" not in rf.read_previous_deployment(claimed).drivers_ran
    moved = change(stack_config(PROD), "driver", lambda d: d.update(version="595.91.07"))
    for previous in (claimed, honest):
        first, second, waiver = refused(gate(project, canary_outputs, moved, previous))
        assert "promotion.waivers.l40s-serving (ticket CHG-20261209-0078) was given for driver 580, not 595.91.07" in waiver
        assert first.startswith("driver 595.91.07 (pools l40s-serving; ada): no attestation")
        assert second.endswith("runs 580.173.02, not 595.91.07: the canary does not run it (deploy it on the canary "
                               "first, let it soak and attest it)")  # never attested: it did not "move on" from it


def test_what_ran_is_what_the_last_deployment_released_each_pool_to() -> None:
    """driversRun, never a config field: not driverVersion or previousDriverVersion, not gpu-l40s's older live
    generation (what its nodes ran before is only declared), not the held gpu-h100's pin (previousVersion)."""
    outputs = run_program(stack_config("eks-prod"), "eks-prod").outputs
    last = rf.read_previous_deployment({**outputs, rf.DRIVER_VERSION: "999.1.1", rf.PREVIOUS_DRIVER_VERSION: "998.1.1"})
    assert dict(last.pool_drivers) == {
        "gpu-a10g": frozenset({"580.173.02"}), "gpu-l40s": frozenset({"580.173.02"}),
    }
    assert last.drivers_ran == {"580.173.02"}


def test_a_last_deployment_made_before_drivers_run_counts_only_its_released_pools() -> None:
    outputs = run_program(stack_config("eks-prod"), "eks-prod").outputs
    older = {**outputs, rf.TIMELINE: {}}  # an older release of the program recorded no driversRun
    assert dict(rf.read_previous_deployment(older).pool_drivers) == {
        "gpu-a10g": frozenset({"580.173.02"}), "gpu-l40s": frozenset({"580.173.02"}),
    }


def test_a_held_pool_whose_pin_changes_is_a_promotion(project: Path, canary_outputs: dict[str, Any]) -> None:
    """A change of previousVersion moves every held pool's NVIDIADriver: judged like a released pool's driver."""
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    last = run_program(stack_config(PROD), PROD).outputs  # h100-serving held on 570.195.03
    repinned = change(stack_config(PROD), "driver", lambda d: d.update(previousVersion="580.159.04"))
    message, _ = refused(gate(project, canary_outputs, repinned, last))  # and: the canary does not run it
    assert message.startswith("driver 580.159.04 (pools h100-serving; hopper): no attestation attestations/"
                              "existing-canary/580.159.04.json")
    # Pinned to a driver another pool ran is still a move of this pool: judged by that driver's attestation,
    # here one without an H100 canary pool.
    onto_the_target = change(stack_config(PROD), "driver", lambda d: d.update(previousVersion=DRIVER))
    (message,) = refused(gate(project, canary_outputs, onto_the_target, last))
    assert message.startswith(f"driver {DRIVER} (pools h100-serving; hopper): attestations/existing-canary/"
                              f"{DRIVER}.json: it covers ada GPUs, not hopper")
    # A held pool that stays on the driver the stack declares it runs today is admitted (advice naming it).
    assert refused(gate(project, canary_outputs, stack_config(PROD), last)) == []
    # A first deployment's pin is a promotion like any other unless promotion.runningToday declares it (issue 30):
    # here it declares 570.195.03, not the 580.159.04 held pools would be pinned to.
    message, _ = refused(gate(project, canary_outputs, repinned))
    assert message.startswith("driver 580.159.04 (pools h100-serving; hopper): no attestation")


def test_an_image_pool_s_newest_generation_is_what_the_gate_judges(tmp_path: Path) -> None:
    """eks-prod's gpu-l40s with a third generation on an unattested driver beside the attested one: refused,
    naming the newest generation's driver only."""
    folder = project_folder(tmp_path / "project")
    shipped = att.path_for(PROJECT_DIR / att.ATTESTATION_DIR, "eks-canary", DRIVER)
    target = att.path_for(folder / att.ATTESTATION_DIR, "eks-canary", DRIVER)
    target.parent.mkdir(parents=True)
    shutil.copy2(shipped, target)
    canary = run_program(stack_config("eks-canary"), "eks-canary").outputs
    newer = change(stack_config("eks-prod"), "nodePools", lambda pools: [
        p["generations"].append({"id": 3, "driverVersion": "580.159.04", "releaseVersion": "1.33.5-20251204"})
        for p in pools if p["name"] == "gpu-l40s"])
    message, _ = refused(gate(folder, canary, newer, stack="eks-prod", canary_stack="eks-canary"))
    assert message.startswith("driver 580.159.04 (pools gpu-l40s; ada): no attestation "
                              "attestations/eks-canary/580.159.04.json (the folder holds: 580.173.02)")
    assert refused(gate(folder, canary, stack_config("eks-prod"), stack="eks-prod", canary_stack="eks-canary")) == []


# ---------------------------------------------------------------- waivers and trusted keys: bad input


@pytest.mark.parametrize(
    ("waivers", "path", "reason"),
    [
        ({"gpu-x": {"accept": ["nvswitch"], "reason": "r"}}, "promotion.waivers.gpu-x", "names no pool of this stack"),
        ({"l40s-serving": {"accept": ["colour"], "reason": "r"}}, "promotion.waivers.l40s-serving.accept[0]",
         "Input should be 'gpu-product'"),
        ({"l40s-serving": {"accept": ["nvswitch"], "reason": "  "}}, "promotion.waivers.l40s-serving.reason",
         "a waiver needs its reason"),
        ({"l40s-serving": {"accept": [], "reason": "r"}}, "promotion.waivers.l40s-serving.accept", "at least 1 item"),
        ({"l40s-serving": {"accept": ["nvswitch"]}}, "promotion.waivers.l40s-serving.reason", "required key is missing"),
    ],
)
def test_a_bad_waiver_names_its_key(waivers: dict[str, Any], path: str, reason: str) -> None:
    config = change(stack_config(PROD), "promotion", lambda p: p.update(waivers=waivers))
    with pytest.raises(SpecError) as caught:
        spec_from_config(config)
    assert any(problem.path.endswith(path) and reason in problem.message for problem in caught.value.problems), (
        caught.value.problems)


def test_a_bad_trusted_key_is_refused_naming_it(tmp_path: Path) -> None:
    from policy import evaluate as ev

    (tmp_path / "prod.json").write_text('{"canary-attested": {"enforcementLevel": "mandatory", "trustedKeys": '
                                        '[{"id": "ed25519:00", "publicKey": "AAAA"}]}}')
    with pytest.raises(ValueError, match="pack config canary-attested: trustedKeys\\[0\\].publicKey: must be a "
                                         "32-byte Ed25519 public key"):
        ev.load_config("prod", tmp_path)
    (tmp_path / "prod.json").write_text('{"canary-attested": {"trustedKeys": [], "keys": []}}')
    with pytest.raises(ValueError, match="pack config canary-attested: keys: unknown setting \\(it takes: trustedKeys\\)"):
        ev.load_config("prod", tmp_path)


def test_only_the_examples_pack_config_trusts_the_example_key_scoped_to_the_example_prod_stacks() -> None:
    """Issue 30: no config a team deploys with trusts the example key; the examples' own config trusts it for the
    example prod stacks by their qualified names, and says what it is."""
    from policy.evaluate import EXAMPLES_CONFIG_DIR, POLICY_DIR
    from policy.promotion_rules import read_settings

    def keys(folder: Path) -> tuple[att.TrustedKey, ...]:
        entry = load_config("prod", folder)[POLICY]
        return read_settings({k: v for k, v in entry.items() if k != "enforcementLevel"}).trusted_keys

    assert keys(POLICY_DIR) == ()
    (key,) = keys(EXAMPLES_CONFIG_DIR)
    assert key.id == att.EXAMPLE_KEY_ID and "EXAMPLE KEY" in key.comment
    assert set(key.scope) == {f"organization/gpu-driver-upgrade/{s}" for s in ("prod", "eks-prod", "existing-prod")}
    assert {stack_config(s)["gpu-driver-upgrade:stage"] for s in ("prod", "eks-prod", "existing-prod")} == {"prod"}


# ---------------------------------------------------------------- issue 30: trust bound to an identity, not a name

SOURCE = "attestations/existing-canary/580.173.02.json"
WHERE = "driver 580.173.02 (pools l40s-serving; ada): "


def test_another_fleets_attestation_signed_by_a_trusted_key_is_refused(project: Path,
                                                                       canary_outputs: dict[str, Any]) -> None:
    """An org-wide key signs another fleet's canary (its cluster, its org and project, the same last segment):
    the gate compares the attestation's qualified stack and cluster with the canary's identity output."""
    other = canary_attestation(stack="otherorg/otherproject/existing-canary", cluster="other-fleet-cluster-eus",
                               identity=att.ClusterIdentity(kubeSystemUid="ffff", cloudId="arn:aws:eks:eastus"))
    att.write(project / att.ATTESTATION_DIR, other)
    assert refused(gate(project, canary_outputs, stack_config(PROD))) == [
        f"{WHERE}{SOURCE} was made on stack 'otherorg/otherproject/existing-canary', not on the canary stack "
        "'organization/gpu-driver-upgrade/existing-canary'",
        f"{WHERE}{SOURCE} was made on cluster other-fleet-cluster-eus (arn:aws:eks:eastus), not on the canary "
        "stack's cluster lab-gpu-1 (no cloud resource)",
        f"{WHERE}{SOURCE} was made on the cluster whose kube-system namespace has UID ffff; the canary stack's "
        f"cluster has {KUBE_SYSTEM_UID}: another cluster of the same name, or the canary's cluster was recreated "
        "since (let it soak and re-attest on it)",
    ]


def test_the_canary_cluster_is_compared_by_its_cloud_resource_not_its_name(project: Path,
                                                                             canary_outputs: dict[str, Any]) -> None:
    """Same stack and cluster name, another AKS cluster: refused."""
    declared = {**canary_outputs, rf.IDENTITY: {**canary_outputs[rf.IDENTITY], "cloudId": att.aks_resource_id(
        "rg-lab", "aks-lab-gpu-1")}}
    att.write(project / att.ATTESTATION_DIR, canary_attestation(identity=att.ClusterIdentity(
        kubeSystemUid=KUBE_SYSTEM_UID, cloudId=att.aks_resource_id("rg-other", "aks-lab-gpu-1"))))
    (message,) = refused(gate(project, declared, stack_config(PROD)))
    assert message.endswith("was made on cluster lab-gpu-1 (/resourceGroups/rg-other/providers/Microsoft."
                            "ContainerService/managedClusters/aks-lab-gpu-1), not on the canary stack's cluster "
                            "lab-gpu-1 (/resourceGroups/rg-lab/providers/Microsoft.ContainerService/managedClusters/"
                            "aks-lab-gpu-1)")


def test_the_canary_cluster_is_compared_by_the_uid_its_api_server_gave_kube_system(
        project: Path, canary_outputs: dict[str, Any]) -> None:
    """Same stack, cluster name and cloud resource (a cluster recreated under its old name, or one that names
    itself like the canary's), another kube-system UID: refused, naming both UIDs."""
    att.write(project / att.ATTESTATION_DIR, canary_attestation(identity=att.ClusterIdentity(kubeSystemUid="0ther")))
    (message,) = refused(gate(project, canary_outputs, stack_config(PROD)))
    assert message == (f"{WHERE}{SOURCE} was made on the cluster whose kube-system namespace has UID 0ther; the "
                       f"canary stack's cluster has {KUBE_SYSTEM_UID}: another cluster of the same name, or the "
                       "canary's cluster was recreated since (let it soak and re-attest on it)")


def test_a_canary_identity_without_a_kube_system_uid_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    """A canary deployed by a release that did not read its cluster's UID: the gate cannot compare it."""
    older = {k: v for k, v in canary_outputs[rf.IDENTITY].items()
             if k not in (rf.IDENTITY_KUBE_SYSTEM_UID, rf.IDENTITY_CLUSTER_READ)}
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    (message,) = refused(gate(project, {**canary_outputs, rf.IDENTITY: older}, stack_config(PROD)))
    assert message == (f"{WHERE}the canary stack 'organization/gpu-driver-upgrade/existing-canary' states no "
                       "kube-system UID in its identity output (deployed by an older release): redeploy the canary, "
                       f"so the gate can compare its cluster with the one {SOURCE} was made on")


def test_a_canary_rendered_offline_leaves_the_uid_uncompared_and_says_so(project: Path) -> None:
    """Offline the canary's outputs are rendered, not read: no cluster gave a UID. The gate admits on the rest and
    says, as advice, which UID it did not compare and what compares it."""
    rendered = run_program(stack_config(CANARY), CANARY).outputs
    assert rendered[rf.IDENTITY][rf.IDENTITY_CLUSTER_READ] is False
    assert rf.IDENTITY_KUBE_SYSTEM_UID not in rendered[rf.IDENTITY]
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    violations = gate(project, rendered, stack_config(PROD))
    assert refused(violations) == []
    (note,) = [v.message for v in violations if "is not compared" in v.message]
    assert note == (f"driver 580.173.02: {SOURCE} was made on the cluster whose kube-system namespace has UID "
                    f"{KUBE_SYSTEM_UID}; the canary stack's outputs here were rendered, not read from its cluster, "
                    "so that UID is not compared (the engine compares it with the UID the deployed canary read; "
                    "offline, --from-backend or --canary-outputs does)")


def test_the_deployed_canary_exports_the_uid_its_cluster_gave(canary_outputs: dict[str, Any]) -> None:
    """The program reads the kube-system Namespace through the stack's provider and exports its UID."""
    identity = canary_outputs[rf.IDENTITY]
    assert identity[rf.IDENTITY_KUBE_SYSTEM_UID] == KUBE_SYSTEM_UID and identity[rf.IDENTITY_CLUSTER_READ] is True
    other = deployed_canary_outputs(kube_system_uid="9f1e")[rf.IDENTITY]
    assert other[rf.IDENTITY_KUBE_SYSTEM_UID] == "9f1e"


def test_a_canary_stack_whose_stage_is_prod_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    prod_like = {**canary_outputs, rf.IDENTITY: {**canary_outputs[rf.IDENTITY], "stage": "prod"}}
    (message,) = refused(gate(project, prod_like, stack_config(PROD)))
    assert message == (f"{WHERE}promotion.canaryStack 'organization/gpu-driver-upgrade/existing-canary' is a prod "
                       "stack (its identity output), not a canary: only a canary's attestation admits a driver")
    # An attestation that says it was made on a prod stack is refused on its own.
    att.write(project / att.ATTESTATION_DIR, canary_attestation(stage="prod", soak_end=NOW - timedelta(minutes=5)))
    assert f"{WHERE}{SOURCE} was made on a prod stack: only a canary stack's verify attests" in refused(
        gate(project, canary_outputs, stack_config(PROD)))


def test_a_stack_that_is_its_own_canary_is_refused_by_the_pack(project: Path) -> None:
    """The CLI refuses it; so does the pack the engine runs (the program run directly, as the engine runs it)."""
    own = change(stack_config(PROD), "promotion", lambda p: p.update(canaryStack=PROD))
    prod_outputs = run_program(stack_config(PROD), PROD).outputs
    found = refused(gate(project, prod_outputs, own, previous=prod_outputs, canary_stack=PROD))
    assert ("promotion.canaryStack 'existing-prod' is this stack (organization/gpu-driver-upgrade/existing-prod): a "
            "stack is never its own canary; name the canary stack that runs the driver first") in found


def test_a_v2_attestation_is_refused_naming_how_to_re_attest(project: Path, canary_outputs: dict[str, Any]) -> None:
    document = {**canary_attestation().document(), "apiVersion": "gpu-driver-upgrade.io/attestation/v2"}
    folder = att.folder_for(project / att.ATTESTATION_DIR, CANARY)
    folder.mkdir(parents=True)
    (folder / f"{DRIVER}.json").write_text(json.dumps(document))
    (message,) = refused(gate(project, canary_outputs, stack_config(PROD)))
    assert message.startswith(f"{WHERE}{SOURCE}: apiVersion gpu-driver-upgrade.io/attestation/v2 is no longer read "
                              "(it binds no cluster identity")
    assert message.endswith("re-attest with `gpu-rollout verify --stack existing-canary` and a signing key "
                            "(GPU_ROLLOUT_SIGNING_KEY), which writes gpu-driver-upgrade.io/attestation/v3")


# ---------------------------------------------------------------- issue 30: keys, age and waivers bound in time


def _trusting(window: dict[str, Any]) -> dict[str, Any]:
    config = load_config("prod")
    (entry,) = config[POLICY]["trustedKeys"]
    return {**config, POLICY: {**config[POLICY], "trustedKeys": [{**entry, **window}]}}


def _judged(project: Path, canary: dict[str, Any], config: dict[str, Any]) -> list[str]:
    run = run_program(stack_config(PROD), PROD, project / PROGRAM_FILE, None, {CANARY: canary})
    return refused([v for v in evaluate(from_registered(run.resources), config) if v.policy == POLICY])


def test_a_key_outside_its_validity_window_admits_nothing(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    assert _judged(project, canary_outputs, _trusting({"notBefore": "2026-01-01T00:00:00Z"})) == []
    expired = _judged(project, canary_outputs, _trusting({"notAfter": "2026-01-01T00:00:00Z"}))
    assert expired == [f"{WHERE}{SOURCE} is signed by key {att.EXAMPLE_KEY_ID}, which expired at "
                       "2026-01-01T00:00:00Z (notAfter): re-attest with a current key"]
    future = (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (early,) = _judged(project, canary_outputs, _trusting({"notBefore": future}))
    assert f"before key {att.EXAMPLE_KEY_ID} was valid (notBefore {future})" in early


def test_an_attestation_older_than_max_attestation_age_days_is_refused(project: Path,
                                                                        canary_outputs: dict[str, Any]) -> None:
    old = canary_attestation(soak_start=NOW - timedelta(days=110), soak_end=NOW - timedelta(days=100))
    att.write(project / att.ATTESTATION_DIR, old)
    (message,) = refused(gate(project, canary_outputs, stack_config(PROD)))
    assert message.endswith("days ago (" + old.document()["soakEnd"] + "), more than promotion.maxAttestationAgeDays "
                            "(90): re-attest with `gpu-rollout verify --stack existing-canary` after a fresh soak")
    longer = change(stack_config(PROD), "promotion", lambda p: p.update(maxAttestationAgeDays=120))
    assert refused(gate(project, canary_outputs, longer)) == []


def test_an_expired_or_foreign_waiver_is_refused_naming_it(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, canary_attestation())

    def waiver(**fields: str) -> dict[str, str]:
        return change(stack_config(PROD), "promotion", lambda p: p["waivers"]["l40s-serving"].update(fields))

    expired = refused(gate(project, canary_outputs, waiver(expires="2026-01-31")))
    assert ("driver 580.173.02: promotion.waivers.l40s-serving (ticket CHG-20261209-0078, driver 580) expired on "
            "2026-01-31: renew it with a new ticket or remove it") in expired
    assert any("differs in gpus-per-node" in m for m in expired)  # and it accepts nothing
    foreign = refused(gate(project, canary_outputs, waiver(driver="570")))
    assert ("driver 580.173.02: promotion.waivers.l40s-serving (ticket CHG-20261209-0078) was given for driver 570, "
            "not 580.173.02: a foreign waiver accepts nothing; review the difference for this driver and give it "
            "anew") in foreign
    # An exact version binds that version only; the branch binds every version of it.
    assert refused(gate(project, canary_outputs, waiver(driver="580.173.02"))) == []
    assert any("was given for driver 580.159.04" in m for m in refused(gate(project, canary_outputs,
                                                                            waiver(driver="580.159.04"))))


def test_a_waiver_bound_to_no_driver_ticket_or_expiry_accepts_nothing(project: Path,
                                                                      canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, canary_attestation())
    bare = change(stack_config(PROD), "promotion", lambda p: p["waivers"]["l40s-serving"].pop("ticket"))
    found = refused(gate(project, canary_outputs, bare))
    assert ("driver 580.173.02: promotion.waivers.l40s-serving names no driver, change ticket or expiry: a waiver "
            "accepts a difference only for the driver it was given for, until it expires (set driver, ticket and "
            "expires)") in found


# ---------------------------------------------------------------- issue 30: every install factor compared


@pytest.mark.parametrize(("pool", "kind", "text"), [
    ({"kernel_module_type": "proprietary"}, "kernel-module-type",
     "proprietary kernel modules on the canary, open in prod"),
    ({"os_image": "Microsoft Azure Linux 3.0"}, "os-image",
     "OS Microsoft Azure Linux 3.0 (azurelinux) on the canary, ubuntu22.04 in prod"),
    ({"kernel": "6.8.0-1020-generic, 5.15.0-1079-azure"}, "kernel",
     "the canary's nodes ran kernels of several series (5.15.0-1079-azure, 6.8.0-1020-generic)"),
])
def test_each_install_factor_difference_is_named_and_only_a_waiver_makes_it_advice(
        project: Path, canary_outputs: dict[str, Any], pool: dict[str, Any], kind: str, text: str) -> None:
    fields = {"gpus_per_node": 1, "served_traffic": True, "kernel": "6.8.0-1020-generic",
              "os_image": "Ubuntu 22.04.5 LTS", "kernel_module_type": "open", **pool}
    att.write(project / att.ATTESTATION_DIR, canary_attestation(pools=[AttestedPool.of("l40s-canary", "NVIDIA-L40S",
                                                                                       **fields)]))
    (message,) = refused(gate(project, canary_outputs, stack_config(PROD)))
    assert f"differs in {kind}: {text} (accept" in message
    waived = change(stack_config(PROD), "promotion", lambda p: p["waivers"]["l40s-serving"]["accept"].append(kind))
    found = gate(project, canary_outputs, waived)
    assert refused(found) == [] and any(f"{kind}: {text}" in m for m in advised(found))


def test_the_driver_mode_is_compared(project: Path, canary_outputs: dict[str, Any]) -> None:
    """An attestation of image-owned drivers does not admit prod's operator-built pools."""
    att.write(project / att.ATTESTATION_DIR, canary_attestation(driver_mode="image"))
    (message,) = refused(gate(project, canary_outputs, stack_config(PROD)))
    assert "differs in driver-mode: driver installed by image on the canary, nvidiadriver in prod" in message


def test_kernel_series_and_module_type_resolution() -> None:
    assert att.kernel_series("5.15.0-1079-azure") == "5.15.0-*-azure"
    assert att.kernel_series("6.8.0-1020-generic") == "6.8.0-*-generic"
    assert att.kernel_series("6.1.148-173.267.amzn2023.x86_64") == "6.1.148-*"
    assert att.kernel_series("custom") == "custom"
    assert [att.resolved_module_type(t, d) for t, d in (("auto", "580.173.02"), ("auto", "535.309.01"),
                                                        ("proprietary", "580.173.02"), (None, None))] == [
        "open", "proprietary", "proprietary", None]
    assert att.os_family("Ubuntu 22.04.5 LTS") == "ubuntu22.04"
    assert att.os_family("Amazon Linux 2023.9.20251110") == "amazonlinux2023"
    assert att.os_family("Ubuntu 22.04.5 LTS, Ubuntu 24.04.3 LTS") is None
