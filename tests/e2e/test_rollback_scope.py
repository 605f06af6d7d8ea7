"""What `gpu-rollout rollback` restores, against the real engine and API server: only what decides what runs on
the GPU nodes. A pool added after the update rolled back to survives the rollback (its NVIDIADriver stays, on
the restored driver) and is listed as left alone; `--all-config` removes it. `--yes` refuses a stack file it
cannot compare with the default branch (the e2e project is no git checkout) unless `--reason` says why. And
the program finds `attestations/` in the project wherever gpu-rollout is started: a prod rollback run from an
empty folder still records the project's attestations on the promotion record."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from engine_contracts import resource_facts as rf
from tests.e2e.conftest import policy_args
from tests.e2e.controlplane import ApiError, Rest
from tests.e2e.pulumi_cli import Pulumi, Result, gpu_rollout, snapshot

CANARY, PROD = "existing-canary", "existing-prod"
A, B = "580.173.02", "595.91.07"
KEY = "gpu-driver-upgrade:"
ADDED = "h100-canary-2"  # a canary pool added after the update rolled back to
ADDED_DRIVER = f"/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-{ADDED}"
PROMOTION = "/api/v1/namespaces/kube-system/configmaps/gpu-driver-upgrade-promotion"
REASON = ("--reason", "e2e: the project is no git checkout")


def _versions(pulumi: Pulumi, stack: str) -> int:
    """The newest update's number (the file backend's updates are numbered 1 for the oldest)."""
    return len(pulumi.json("stack", "history", "--stack", stack, "--json", "--page-size", "1000"))


def _edit(pulumi: Pulumi, stack: str, change: Callable[[dict], None]) -> None:
    """Change the stack file's project keys as a person edits it (structured values as YAML)."""
    path = pulumi.project / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(path.read_text())
    config = {k.removeprefix(KEY): v for k, v in document["config"].items() if k.startswith(KEY)}
    change(config)
    document["config"].update({KEY + k: v for k, v in config.items()})
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def _up(pulumi: Pulumi, pack: Path, stack: str, stage: str) -> Result:
    return pulumi.run("up", "--stack", stack, "--yes", "--non-interactive", "--skip-preview",
                      *policy_args(pack, stage), program=True)


def _driver(cluster: Rest, path: str) -> str | None:
    try:
        return cluster.get(path)["spec"]["version"]
    except ApiError as error:
        if error.status == 404:
            return None
        raise


@pytest.fixture(scope="module")
def scoped(canary_up: Result, pulumi: Pulumi, policy_pack: Path, cluster: Rest) -> dict:
    """The canary on A (update N), then on B with a pool added (update N+1); rolled back to N, then to N with
    --all-config. What each step left, in order."""
    record: dict = {"target": _versions(pulumi, CANARY)}

    def forward(config: dict) -> None:
        config["driver"].update(version=B, previousVersion=A)
        pool = json.loads(json.dumps(next(p for p in config["nodePools"] if p["name"] == "h100-canary")))
        pool.update(name=ADDED)
        pool["existing"]["nodeSelector"] = {"gpu.example.com/pool": ADDED}
        config["nodePools"].append(pool)

    _edit(pulumi, CANARY, forward)
    _up(pulumi, policy_pack, CANARY, "canary")
    record["added_on"] = _driver(cluster, ADDED_DRIVER)
    target = str(record["target"])
    before = snapshot(pulumi, CANARY)
    record["no_reason"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--to-version", target, "--yes")
    record["unchanged"] = snapshot(pulumi, CANARY) == before
    pack = ("--policy-pack", str(policy_pack), "--policy-pack-config", "policy/canary.json")
    record["plan"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--to-version", target, "--json")
    record["rollback"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--to-version", target, "--yes",
                                     *REASON, *pack)
    record["after_rollback"] = (_driver(cluster, ADDED_DRIVER), _driver(
        cluster, "/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-l40s-canary"))
    record["file_after_rollback"] = (pulumi.project / f"Pulumi.{CANARY}.yaml").read_text()
    record["all_config"] = gpu_rollout(pulumi, "rollback", "--stack", CANARY, "--to-version", target, "--yes",
                                       "--all-config", *REASON, *pack)
    record["after_all_config"] = _driver(cluster, ADDED_DRIVER)
    return record


def test_yes_without_a_reason_is_refused_where_the_stack_file_cannot_be_compared(scoped: dict) -> None:
    refused = scoped["no_reason"]
    assert refused.returncode == 1, refused.describe()
    assert "is not a git checkout" in refused.stderr and "--reason" in refused.stderr
    assert scoped["unchanged"], "a refused rollback changed the stack's state or config"


def test_a_pool_added_after_the_target_survives_the_rollback(scoped: dict) -> None:
    assert scoped["added_on"] == B
    plan = json.loads(scoped["plan"].stdout)
    assert plan["allConfig"] is False
    assert {c["path"] for c in plan["changes"]} == {KEY + "driver.version", KEY + "driver.previousVersion"}
    assert [c["path"] for c in plan["leftAlone"]] == [KEY + "nodePools[2]"]
    result = scoped["rollback"]
    assert result.returncode == 0, result.describe()
    assert "left alone (update" in result.stdout and "nodePools[2]: stays" in result.stdout
    assert "open a pull request with it" in result.stderr
    assert scoped["after_rollback"] == (A, A)  # the added pool stays, on the restored driver
    assert ADDED in scoped["file_after_rollback"]


def test_all_config_removes_it(scoped: dict) -> None:
    result = scoped["all_config"]
    assert result.returncode == 0, result.describe()
    assert scoped["after_all_config"] is None


def test_the_program_reads_the_project_s_attestations_wherever_gpu_rollout_runs(
        prod_up: Result, pulumi: Pulumi, policy_pack: Path, cluster: Rest, tmp_path: Path) -> None:
    """Prod goes to B with every pool held on A (h100-serving's move onto A waived), then rolls back from a
    folder with no attestations/: the program, served in gpu-rollout's own process, still reads the project's."""
    target = _versions(pulumi, PROD)

    def held_on_b(config: dict) -> None:
        config["driver"].update(version=B, previousVersion=A)
        for pool in config["nodePools"]:
            pool["rollout"]["released"] = False
        # Holding every pool on A moves h100-serving from 570.195.03 onto A, a promotion of that pool: the shipped
        # attestation of A has no H100 canary pool that served traffic, which this test accepts in the open.
        config["promotion"].setdefault("waivers", {})["h100-serving"] = {
            "accept": ["served-traffic"], "reason": "e2e: the attestations-path test holds every pool on A",
            "driver": A, "ticket": "CHG-E2E-1", "expires": "2099-12-31"}

    _edit(pulumi, PROD, held_on_b)
    _up(pulumi, policy_pack, PROD, "prod")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = gpu_rollout(pulumi, "rollback", "--stack", PROD, "--to-version", str(target), "--yes", *REASON,
                         *policy_args(policy_pack, "prod"), cwd=elsewhere)
    assert result.returncode == 0, result.describe()
    facts = rf.read_promotion(cluster.get(PROMOTION))
    assert facts.attested == frozenset({A})  # attestations/existing-canary/ of the project, not of the cwd
    assert set(facts.attestations) == {A}
    assert not (elsewhere / "attestations").exists()
