"""The prod gate, canary-attested (policy/promotion_rules.py), through the real program and `gpu-rollout plan`.

Each test builds a project folder of its own (the program linked, the stack files copied) whose
``attestations/`` holds what the case needs. A passing attestation is sealed in the test, through
``engine_contracts.attestation.seal`` (tests/policy/attested.py), standing in for the canary's `gpu-rollout verify`;
none is written by hand.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from policy.evaluate import POLICY_DIR, Violation, evaluate, from_registered, load_config
from preview.run import PROGRAM_FILE, run_program
from rollout import verify
from rollout.cli import app
from renderers import manifests
from engine_contracts import attestation as att
from engine_contracts import resource_facts as rf
from engine_contracts.attestation import AttestedPool
from fleetspec.load import spec_from_config
from tests.conftest import PROJECT_DIR, change, stack_config
from tests.policy.attested import CANARY, DRIVER, KUBE_SYSTEM_UID, PROD, QUALIFIED_CANARY, QUALIFIED_PROD
from tests.policy.attested import deployed_canary_outputs
from tests.policy.attested import project_folder
from tests.policy.attested import canary_attestation as seal

POLICY = "canary-attested"
NOW = datetime.now(UTC)
runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: the checkout's program linked, the existing-cluster stack files beside it."""
    folder = project_folder(tmp_path / "project")
    for stack in (PROD, CANARY):
        shutil.copy2(PROJECT_DIR / f"Pulumi.{stack}.yaml", folder / f"Pulumi.{stack}.yaml")
    return folder


@pytest.fixture(scope="module")
def canary_outputs() -> dict[str, Any]:
    return deployed_canary_outputs()


def gate(
    project: Path, canary: dict[str, Any] | None, config: dict[str, str] | None = None,
    previous: dict[str, Any] | None = None,
) -> list[Violation]:
    """The canary-attested findings of prod, rendered from ``project`` with the canary's ``canary`` outputs."""
    run = run_program(
        config or stack_config(PROD), PROD, project / PROGRAM_FILE, previous,
        {CANARY: canary} if canary is not None else None,
    )
    return [v for v in evaluate(from_registered(run.resources), load_config("prod")) if v.policy == POLICY]


def messages(violations: list[Violation], level: str = "mandatory") -> list[str]:
    return [v.message for v in violations if v.enforcement.value == level]


# What the gate says of the shipped existing-prod stack when it admits its driver: it trusts the example key (advice
# on an example fleet), and l40s-serving is covered by l40s-canary with one difference its waiver accepts.
TRUSTS_THE_EXAMPLE_KEY = "the gate trusts the example key " + att.EXAMPLE_KEY_ID
WAIVED = ("driver 580.173.02: pool l40s-serving is covered by canary pool l40s-canary with the difference "
          "gpus-per-node: 1 GPUs per node on the canary, 4 in prod, accepted by promotion.waivers.l40s-serving: ")


# What the gate says offline, where the canary's outputs are rendered and no cluster gave its kube-system UID.
UID_NOT_COMPARED = "so that UID is not compared"

# What the gate says of a held pool pinned to the driver the example prod stacks declare (promotion.runningToday).
DECLARED = "admitted without an attestation by promotion.runningToday, which declares the fleet runs 570.195.03 today"


def admitted(violations: list[Violation] | list[dict[str, str]], rendered_canary: bool = False) -> bool:
    """No mandatory finding; the advice is the example key's and the shipped waiver's, each once, beside the
    declaration's for the held pool (and, for a canary rendered offline, the note of the UID not compared)."""
    found = [(v.enforcement.value, v.message) if isinstance(v, Violation) else (v["enforcement"], v["message"])
             for v in violations]
    uid_notes = [m for level, m in found if level == "advisory" and UID_NOT_COMPARED in m]
    if len(uid_notes) != (1 if rendered_canary else 0):
        return False
    advice = sorted(m for level, m in found if level == "advisory" and DECLARED not in m and UID_NOT_COMPARED not in m)
    return (all(level == "advisory" for level, _ in found) and len(advice) == 2
            and advice[0].startswith(WAIVED) and advice[1].startswith(TRUSTS_THE_EXAMPLE_KEY))


def test_an_attested_driver_passes(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    assert admitted(gate(project, canary_outputs))


def test_missing_attestation_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal(driver="570.195.03"))  # another version only
    assert messages(gate(project, canary_outputs)) == [
        "driver 580.173.02 (pools l40s-serving; ada): no attestation attestations/existing-canary/580.173.02.json (the folder "
        "holds: 570.195.03); run `gpu-rollout verify --stack existing-canary` on the canary once it has soaked"
    ]


def test_tampered_attestation_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    path = att.write(project / att.ATTESTATION_DIR, seal(soak_start=NOW - timedelta(hours=3)))
    document = json.loads(path.read_text())
    document["soakStart"] = "2026-01-01T00:00:00Z"  # a longer soak than verify saw
    path.write_text(json.dumps(document))
    assert messages(gate(project, canary_outputs)) == [
        "driver 580.173.02 (pools l40s-serving; ada): attestations/existing-canary/580.173.02.json: digest mismatch: the content "
        "was changed after verify sealed it"
    ]


def test_too_young_attestation_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    # The clock as the seal reads it (not NOW, taken at import: minutes may pass on a loaded machine).
    att.write(project / att.ATTESTATION_DIR, seal(soak_start=datetime.now(UTC) - timedelta(hours=50)))
    (message,) = messages(gate(project, canary_outputs))
    assert message.endswith("attestations/existing-canary/580.173.02.json: its soak lasted 49.0 h, less than "
                            "promotion.minSoakHours (168 h)")


def test_attestation_of_another_version_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    """A file named after the target but sealed for another driver (renamed by hand)."""
    other = att.write(project / att.ATTESTATION_DIR, seal(driver="580.159.04"))
    other.rename(att.path_for(project / att.ATTESTATION_DIR, CANARY, DRIVER))
    (message,) = messages(gate(project, canary_outputs))
    assert message.endswith("attestations/existing-canary/580.173.02.json: it attests driver 580.159.04, not 580.173.02")


def test_attestation_of_another_gpu_architecture_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal(pools=[AttestedPool.of("h100-canary", "NVIDIA-H100-80GB-HBM3")]))
    (message,) = messages(gate(project, canary_outputs))
    assert message.endswith("attestations/existing-canary/580.173.02.json: it covers hopper GPUs, not ada")


def test_attestation_from_another_stack_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    """Another stack's attestation of the driver, moved into the canary's folder by hand."""
    folder = project / att.ATTESTATION_DIR
    other = att.write(folder, seal(stack="organization/gpu-driver-upgrade/dev"))
    att.folder_for(folder, CANARY).mkdir()
    other.rename(att.path_for(folder, CANARY, DRIVER))
    (message,) = messages(gate(project, canary_outputs))
    assert message.endswith("attestations/existing-canary/580.173.02.json was made on stack "
                            "'organization/gpu-driver-upgrade/dev', not on the canary stack "
                            "'organization/gpu-driver-upgrade/existing-canary'")


def test_canary_running_another_driver_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    rolled_back = {**canary_outputs, "driverVersion": "570.195.03",
                   "pools": {"l40s-canary": {**canary_outputs["pools"]["l40s-canary"], "driverVersion": "570.195.03"}}}
    (message,) = messages(gate(project, rolled_back))
    assert message.endswith("the canary stack 'existing-canary' runs 570.195.03, not 580.173.02: the canary has "
                            "moved on or was rolled back since it was attested")


def test_unavailable_canary_stack_is_refused(project: Path) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    identity, drivers = messages(gate(project, None))
    assert "the canary stack 'existing-canary' shows no driver (no driverVersion or pools output" in drivers
    assert ("the canary stack 'organization/gpu-driver-upgrade/existing-canary' states no identity output"
            in identity)


def test_an_unsigned_attestation_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal(signing_key=None))
    (message,) = messages(gate(project, canary_outputs))
    assert message.endswith("attestations/existing-canary/580.173.02.json is unsigned: the gate admits only "
                            "attestations signed by a trusted key; re-attest with `gpu-rollout verify --stack "
                            "existing-canary` with GPU_ROLLOUT_SIGNING_KEY (or --signing-key) set")


def test_an_attestation_signed_by_a_key_the_gate_does_not_trust_is_refused(project: Path,
                                                                             canary_outputs: dict[str, Any]) -> None:
    own = att.generate_signing_key()
    att.write(project / att.ATTESTATION_DIR, seal(signing_key=own))
    (message,) = messages(gate(project, canary_outputs))
    assert message.endswith(f"is signed by key {att.key_id(own.public_key())}, which the gate does not trust "
                            f"(canary-attested.trustedKeys in the pack config lists: {att.EXAMPLE_KEY_ID})")


def test_a_forged_attestation_with_a_recomputed_digest_is_refused(project: Path) -> None:
    """Issue 20: the shipped attestation with another driver everywhere and its digest recomputed (the digest has
    no key), both example stacks on that driver: the signature no longer matches, and plan exits 1 naming it."""
    forged_driver = "595.91.07"
    shipped = (PROJECT_DIR / att.ATTESTATION_DIR / CANARY / f"{DRIVER}.json").read_text()
    document = json.loads(shipped.replace(DRIVER, forged_driver))
    document["digest"] = att.digest_of(att.Attestation.model_validate(document).content())
    folder = att.folder_for(project / att.ATTESTATION_DIR, CANARY)
    folder.mkdir(parents=True)
    (folder / f"{forged_driver}.json").write_text(json.dumps(document, indent=2))
    for stack in (PROD, CANARY):
        path = project / f"Pulumi.{stack}.yaml"
        path.write_text(path.read_text().replace(f'"{DRIVER}"', f'"{forged_driver}"'))
    code, violations = plan(project)
    assert code == 1
    refused = [v["message"] for v in violations if v["enforcement"] == "mandatory"]
    assert (f"driver {forged_driver} (pools l40s-serving; ada): attestations/existing-canary/{forged_driver}.json: bad "
            f"signature by key {att.EXAMPLE_KEY_ID}: changed after it was signed, or not signed by that key") in refused
    # The shipped waiver was given for branch 580: for 595 it accepts nothing, and says so.
    assert (f"driver {forged_driver}: promotion.waivers.l40s-serving (ticket CHG-20261209-0078) was given for driver "
            f"580, not {forged_driver}: a foreign waiver accepts nothing; review the difference for this driver and "
            "give it anew") in refused


def test_trusting_the_example_key_outside_the_example_fleets_is_refused(project: Path,
                                                                          canary_outputs: dict[str, Any]) -> None:
    """Issue 30: the example key is trusted by no config a team deploys with, and by the examples' own config
    only for the example prod stacks, whatever the cluster is called."""
    att.write(project / att.ATTESTATION_DIR, seal())
    # A team's stack, on a real cluster that names itself like the example fleet, judged by the examples' config.
    config = change(stack_config(PROD), "cluster", lambda cluster: cluster.update(name="lab-gpu-1"))
    run = run_program(config, "team-b-prod", project / PROGRAM_FILE, None, {CANARY: canary_outputs})
    found = [v for v in evaluate(from_registered(run.resources), load_config("prod")) if v.policy == POLICY]
    refused = messages(found)
    assert refused[0].startswith("stack 'organization/gpu-driver-upgrade/team-b-prod' is outside the example key's "
                                 "scope (organization/gpu-driver-upgrade/prod, ")
    assert TRUSTS_THE_EXAMPLE_KEY in refused[0] and "Generate a key of your own (`gpu-rollout keygen --out DIR`)" in refused[0]
    assert any("whose scope" in m and "does not take prod stack 'organization/gpu-driver-upgrade/team-b-prod'" in m
               for m in refused)
    # The config a team deploys with (policy/prod.json) trusts no key at all, the example key least of all.
    shipped = [v for v in evaluate(from_registered(run.resources), load_config("prod", POLICY_DIR))
               if v.policy == POLICY and v.enforcement.value == "mandatory"]
    assert any("which the gate does not trust (canary-attested.trustedKeys in the pack config lists: none)" in v.message
               for v in shipped)
    # Unscoped, the example key is refused on every stack, the example stacks included.
    unscoped = {**load_config("prod"), POLICY: {"trustedKeys": [
        {k: v for k, v in entry.items() if k != "scope"}
        for entry in load_config("prod")[POLICY]["trustedKeys"]]}}
    example = run_program(stack_config(PROD), PROD, project / PROGRAM_FILE, None, {CANARY: canary_outputs})
    assert any(m.startswith("the example key is trusted with no scope: ") for m in messages(
        [v for v in evaluate(from_registered(example.resources), unscoped) if v.policy == POLICY]))


def test_a_driver_the_fleet_ran_is_not_blocked(project: Path, canary_outputs: dict[str, Any]) -> None:
    """Redeploying (or rolling back to) a driver the last deployment ran is no promotion: advice only."""
    previous = run_program(stack_config(PROD), PROD).outputs  # the last deployment ran 580.173.02
    found = gate(project, canary_outputs, previous=previous)
    assert messages(found) == []
    (advice,) = [m for m in messages(found, "advisory") if "no attestation" in m]
    assert "no attestation attestations/existing-canary/580.173.02.json" in advice
    assert advice.endswith("(each of these pools ran 580.173.02 before: a rollback or a redeployment, not a promotion, not blocked)")


def test_a_held_pool_needs_no_attestation(project: Path, canary_outputs: dict[str, Any]) -> None:
    def hold_all(pools: list[dict]) -> None:
        for pool in pools:
            pool["rollout"]["released"] = False

    found = gate(project, canary_outputs, change(stack_config(PROD), "nodePools", hold_all))
    assert messages(found) == []
    declared, unused, key = sorted(messages(found, "advisory"))
    assert declared.startswith(f"driver 570.195.03 (pools h100-serving, l40s-serving): {DECLARED}")
    assert unused.startswith("promotion.waivers.l40s-serving (accepts gpus-per-node: No spare 4-GPU L40S node")
    assert unused.endswith("is not used by this change: pool l40s-serving takes no driver that is a promotion")
    assert key.startswith(TRUSTS_THE_EXAMPLE_KEY)


def test_a_prod_stack_without_promotion_is_refused(project: Path) -> None:
    config = stack_config(PROD)
    del config["gpu-driver-upgrade:promotion"]
    # Nothing declares what the held h100-serving runs either: on a first deployment its pin is a promotion too.
    assert messages(gate(project, None, config)) == [
        "driver 570.195.03 (pools h100-serving; hopper): this prod stack has no promotion record: set "
        "promotion.canaryStack and promotion.minSoakHours",
        "driver 580.173.02 (pools l40s-serving; ada): this prod stack has no promotion record: set "
        "promotion.canaryStack and promotion.minSoakHours",
    ]


def test_a_gpu_the_architecture_table_does_not_know_is_refused(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    config = change(stack_config(PROD), "nodePools", lambda pools: pools[0].update(gpuProduct="NVIDIA-X9000"))
    assert messages(gate(project, canary_outputs, config)) == [
        "pool l40s-serving: GPU product 'NVIDIA-X9000' is not in the architecture table; check its branch support "
        "by hand; no attestation can cover a GPU the architecture table does not know (add it to "
        "gpu_knowledge/compat_data.py)"
    ]


def test_the_canary_stage_is_not_gated() -> None:
    run = run_program(stack_config(CANARY), CANARY)
    assert [v for v in evaluate(from_registered(run.resources), load_config("canary")) if v.policy == POLICY] == []


def test_the_record_states_what_the_gate_reads(project: Path, canary_outputs: dict[str, Any]) -> None:
    sealed = seal()
    att.write(project / att.ATTESTATION_DIR, sealed)
    att.write(project / att.ATTESTATION_DIR, seal(driver="570.195.03"))
    run = run_program(stack_config(PROD), PROD, project / PROGRAM_FILE, None, {CANARY: canary_outputs})
    (record,) = [r for r in run.resources if r.name == "gpu-driver-upgrade-promotion"]
    assert record.inputs["metadata"]["labels"] == {"gpu-driver-upgrade.io/record": "promotion"}
    data = dict(record.inputs["data"])
    texts = json.loads(data.pop("attestations"))
    waivers = json.loads(data.pop("waivers"))
    declared = json.loads(data.pop("runningToday"))
    assert declared["driver"] == "570.195.03" and declared["reason"].startswith("Every GPU node of the fleet runs")
    canary_identity, install = json.loads(data.pop("canaryIdentity")), json.loads(data.pop("install"))
    assert data == {
        "canaryStack": CANARY, "minSoakHours": "168", "canaryDrivers": DRIVER, "attested": f"570.195.03,{DRIVER}",
        "stack": QUALIFIED_PROD, "maxAttestationAgeDays": "90", "minJudgedFraction": "0.9", "minRequests": "1000",
        "minSoakReason": "",  # the runbook's week: no reason to state
    }
    # The canary's identity output as its StackReference shows it; how this stack installs the driver.
    assert canary_identity == {"stack": QUALIFIED_CANARY, "stage": "canary", "cluster": "lab-gpu-1", "cloudId": None,
                               "kubeSystemUid": KUBE_SYSTEM_UID, "clusterRead": True}
    assert (install["driverMode"], install["kernelModuleType"], install["pools"]["l40s-serving"]["os"]) == (
        "nvidiadriver", "auto", "ubuntu22.04")
    assert list(waivers) == ["l40s-serving"] and waivers["l40s-serving"] == {
        "accept": ["gpus-per-node"], "reason": waivers["l40s-serving"]["reason"], "driver": "580",
        "ticket": "CHG-20261209-0078", "expires": "2027-06-30"}
    # Only the attestations of the drivers its pools move to or are pinned to travel (h100-serving is held on
    # 570.195.03: a change of its pin would be judged), as the files hold them; the rule judges them there.
    assert list(texts) == ["570.195.03", DRIVER]
    assert texts[DRIVER] == att.path_for(project / att.ATTESTATION_DIR, CANARY, DRIVER).read_text()
    assert att.parse(texts[DRIVER], "record") == sealed


# ---------------------------------------------------------------- `gpu-rollout plan`


def plan(project: Path, *extra: str) -> tuple[int, list[dict[str, str]]]:
    result = runner.invoke(app, ["plan", "--stack-file", str(project / f"Pulumi.{PROD}.yaml"),
                                 "--project-dir", str(project), "--json", *extra])
    document = json.loads(result.stdout)
    return result.exit_code, [v for v in document["violations"] if v["policy"] == POLICY]


def test_plan_passes_an_attested_driver(project: Path) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    code, violations = plan(project)
    assert code == 0 and admitted(violations, rendered_canary=True)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("missing", "no attestation attestations/existing-canary/580.173.02.json (the folder holds: none)"),
        ("tampered", "digest mismatch"),
        ("too young", "less than promotion.minSoakHours (168 h)"),
        ("another version", "it attests driver 580.173.03, not 580.173.02"),
        ("another architecture", "it covers ampere GPUs, not ada"),
    ],
)
def test_plan_refuses(project: Path, case: str, reason: str) -> None:
    folder = project / att.ATTESTATION_DIR
    if case == "tampered":
        path = att.write(folder, seal())
        path.write_text(path.read_text().replace('"l40s-canary"', '"l40s-serving"'))
    elif case == "too young":
        att.write(folder, seal(soak_start=NOW - timedelta(hours=10)))
    elif case == "another version":
        att.write(folder, seal(driver="580.173.03")).rename(att.path_for(folder, CANARY, DRIVER))
    elif case == "another architecture":
        att.write(folder, seal(pools=[AttestedPool.of("a100-canary", "NVIDIA-A100-80GB-PCIe")]))
    code, violations = plan(project)
    assert code == 1
    refused = [v for v in violations if v["enforcement"] == "mandatory"]
    assert len(refused) == 1
    assert reason in refused[0]["message"]


def test_plan_compares_the_uid_of_the_canary_outputs_given(project: Path, tmp_path: Path,
                                                           canary_outputs: dict[str, Any]) -> None:
    """What `pulumi stack output --json` shows of the deployed canary carries the UID its cluster gave: plan
    compares it (no note), and refuses an attestation made on a cluster whose kube-system has another."""
    att.write(project / att.ATTESTATION_DIR, seal())
    given = tmp_path / "canary.json"
    given.write_text(json.dumps(canary_outputs))
    code, violations = plan(project, "--canary-outputs", str(given))
    assert code == 0 and admitted(violations)
    att.write(project / att.ATTESTATION_DIR, seal(identity=att.ClusterIdentity(kubeSystemUid="recreated")))
    code, violations = plan(project, "--canary-outputs", str(given))
    (refused,) = [v for v in violations if v["enforcement"] == "mandatory"]
    assert code == 1 and "kube-system namespace has UID recreated" in refused["message"]


def test_plan_reads_the_canary_outputs_given(project: Path, tmp_path: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    given = tmp_path / "canary.json"
    given.write_text(json.dumps({**canary_outputs, "pools": {}, "driverVersion": "595.58.03"}))
    code, violations = plan(project, "--canary-outputs", str(given))
    assert code == 1
    (refused,) = [v for v in violations if v["enforcement"] == "mandatory"]
    assert "the canary stack 'existing-canary' runs 595.58.03, not 580.173.02" in refused["message"]
    given.write_text("[]")
    result = runner.invoke(app, ["plan", "--stack-file", str(project / f"Pulumi.{PROD}.yaml"),
                                 "--project-dir", str(project), "--canary-outputs", str(given)])
    assert result.exit_code == 2
    assert "--canary-outputs" in result.output and "must hold a JSON object of stack outputs" in result.output


def test_plan_without_the_canary_stack_file_cannot_confirm_the_canary(project: Path) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())
    (project / f"Pulumi.{CANARY}.yaml").unlink()
    code, violations = plan(project)
    assert code == 1
    identity, drivers = [v["message"] for v in violations if v["enforcement"] == "mandatory"]
    assert "shows no driver" in drivers and "states no identity output" in identity


def test_examples_state_their_canary() -> None:
    """The shipped prod stacks name canaries whose stack files sit beside them (plan reads them offline)."""
    for stack in ("prod", "eks-prod", PROD):
        document = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())
        canary = document["config"]["gpu-driver-upgrade:promotion"]["canaryStack"]
        assert (PROJECT_DIR / f"Pulumi.{canary}.yaml").is_file()


# ---------------------------------------------------------------- the shipped examples


EXAMPLE_PAIRS = {"prod": "canary", "eks-prod": "eks-canary", "existing-prod": "existing-canary"}


@pytest.mark.parametrize("stack", sorted(EXAMPLE_PAIRS))
def test_the_examples_plan_clean_on_the_attestations_they_ship(stack: str) -> None:
    """Each example prod stack ships its canary's attestation (scripts/attest_examples.py, verify on the test
    cluster): `gpu-rollout plan` passes the gate and every other mandatory policy."""
    result = runner.invoke(app, ["plan", "--stack", stack, "--json"])
    violations = json.loads(result.stdout)["violations"]
    assert [v for v in violations if v["enforcement"] == "mandatory"] == []
    # The gate's advice: the example key (trusted on the example fleets only) and each applied waiver, by name.
    waivers = spec_from_config(stack_config(stack)).promotion.waivers
    said = sorted(v["message"] for v in violations if v["policy"] == POLICY and DECLARED not in v["message"]
                  and UID_NOT_COMPARED not in v["message"])
    assert said[-1].startswith(TRUSTS_THE_EXAMPLE_KEY) and len(said) == 1 + len(waivers)
    # Offline the canary's outputs are rendered: the attestation's kube-system UID is named as not compared.
    (uid_note,) = [v for v in violations if UID_NOT_COMPARED in v["message"]]
    assert uid_note["enforcement"] == "advisory" and "--from-backend" in uid_note["message"]
    # The held pools stay on the driver the stack declares the fleet runs today: admitted as advice naming it.
    (declared,) = [v["message"] for v in violations if v["policy"] == POLICY and DECLARED in v["message"]]
    assert declared.startswith("driver 570.195.03 (pools ")
    assert all(f"accepted by promotion.waivers.{pool}: {waivers[pool].reason}" in m for pool, m in zip(
        sorted(waivers), said[:-1], strict=True))
    assert result.exit_code == 0


@pytest.mark.parametrize("stack", sorted(EXAMPLE_PAIRS))
def test_the_examples_canary_pools_cover_every_released_prod_architecture(tmp_path: Path, stack: str) -> None:
    """An attestation of exactly the example canary's own pools admits its prod stack's released pools: the canary
    has a pool of every GPU architecture prod releases (without the shipped files: a project folder of its own)."""
    canary = EXAMPLE_PAIRS[stack]
    folder = project_folder(tmp_path / "project")
    for name in (stack, canary):
        shutil.copy2(PROJECT_DIR / f"Pulumi.{name}.yaml", folder / f"Pulumi.{name}.yaml")
    spec = spec_from_config(stack_config(canary))
    served = {pool for model in spec.models for pool in model.nodePools}
    modules = verify.kernel_module_type(spec, spec.driver.version)
    pools = [AttestedPool.of(p.name, p.gpuProduct, gpus_per_node=p.gpusPerNode, nvswitch=p.nvswitch,
                             served_traffic=p.name in served, kernel_module_type=modules)
             for p in spec.nodePools if not spec.pool_held(p)]
    # What verify of that canary records of its stack and cluster (checks/test_verify.py reads them live).
    bound = {"stack": manifests.qualified_stack(canary), "cluster": spec.cluster.name,
             "identity": att.ClusterIdentity(kubeSystemUid="uid", cloudId=manifests.cluster_cloud_id(spec)),
             "driver_mode": verify.driver_mode(spec)}
    att.write(folder / att.ATTESTATION_DIR, seal(**bound, pools=pools))
    result = runner.invoke(app, ["plan", "--stack-file", str(folder / f"Pulumi.{stack}.yaml"), "--project-dir",
                                 str(folder), "--json"])
    assert [v["message"] for v in json.loads(result.stdout)["violations"]
            if v["policy"] == POLICY and v["enforcement"] == "mandatory"] == []
    assert result.exit_code == 0
    prod = spec_from_config(stack_config(stack))
    released = next(p for p in prod.nodePools if not prod.pool_held(p))
    lacking = [p for p in pools if p.architecture != AttestedPool.of(released.name, released.gpuProduct).architecture]
    # The same canary without its pool of the first released prod pool's architecture: refused.
    att.write(folder / att.ATTESTATION_DIR, seal(**bound, pools=lacking, soak_end=NOW - timedelta(minutes=30)))
    result = runner.invoke(app, ["plan", "--stack-file", str(folder / f"Pulumi.{stack}.yaml"), "--project-dir",
                                 str(folder), "--json"])
    found = [v["message"] for v in json.loads(result.stdout)["violations"]
             if v["policy"] == POLICY and v["enforcement"] == "mandatory"]
    assert result.exit_code == 1 and len(found) == 1 and ": it covers " in found[0]


def test_a_fully_qualified_canary_stack_matches_the_attested_one(project: Path, canary_outputs: dict[str, Any]) -> None:
    att.write(project / att.ATTESTATION_DIR, seal())  # verify records the qualified stack name
    config = change(stack_config(PROD), "promotion", lambda p: p.update(canaryStack=f"organization/gpu-driver-upgrade/{CANARY}"))
    assert admitted(gate(project, canary_outputs, config))


@pytest.mark.parametrize("text", ["{broken", "[1]", '{"580.173.02": 7}'])
def test_a_record_whose_attestations_cannot_be_read_holds_none(text: str) -> None:
    facts = rf.read_promotion({"data": {"canaryStack": CANARY, "minSoakHours": "x", "attestations": text}})
    assert (facts.attestations, facts.min_soak_hours, facts.canary_drivers) == ({}, None, None)
