"""Waves in order in the real engine (issue 23), on a prod stack of its own (tests/e2e/variants.py): its first
update holds every pool; a preview releasing waves 1 and 2 at once is refused by the pack, naming
``waves-in-order``; an update releasing wave 1 records when (the stack output ``timeline``), and a second
update carries that record forward and changes nothing."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from engine_contracts import resource_facts as rf
from tests.e2e import variants
from tests.e2e.controlplane import ControlPlane, Rest
from tests.e2e.pulumi_cli import Pulumi
from tests.e2e.test_engine import variant_stack

PROD = "waves-prod"
POOLS_KEY = "gpu-driver-upgrade:nodePools"
RENAMED = {"l40s-serving": "waves-l40s-serving", "h100-serving": "waves-h100-serving"}
NO_CHANGE = {"same", "read"}


def _every_pool_held(config: dict) -> None:
    variants.own_pools(config, RENAMED, "waves")
    for pool in config["nodePools"]:
        pool["rollout"]["released"] = False


@pytest.fixture(scope="module")
def waves(pulumi: Pulumi, control_plane: ControlPlane, canary_up, canary_attested) -> Pulumi:
    """The stack, first deployed with every pool held (the canary's attestation in place for what follows)."""
    forced = copy.copy(pulumi)
    forced.env = {**pulumi.env, "PULUMI_K8S_ENABLE_PATCH_FORCE": "true"}
    variant_stack(pulumi, control_plane, "existing-prod", PROD, _every_pool_held)
    return forced


def _timeline(pulumi: Pulumi) -> rf.Timeline:
    return rf.read_timeline(pulumi.json("stack", "output", "--json", "--stack", PROD).get(rf.TIMELINE))


def _up(pulumi: Pulumi, pack: Path) -> dict:
    pulumi.run("up", "--stack", PROD, "--yes", "--non-interactive", "--skip-preview",
               *variants.policy(pulumi, pack, "prod"), program=True)
    (latest, *_) = pulumi.json("stack", "history", "--stack", PROD, "--json")
    assert latest["result"] == "succeeded"
    return dict(latest["resourceChanges"])


def _release(project: Path, *released: str) -> None:
    """The stack file with exactly ``released`` pools released (the file `pulumi config` writes)."""
    path = project / f"Pulumi.{PROD}.yaml"
    document = yaml.safe_load(path.read_text())
    for pool in document["config"][POOLS_KEY]:
        pool["rollout"]["released"] = pool["name"] in released
    path.write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.fixture(scope="module")
def steps(waves: Pulumi, policy_pack: Path, cluster: Rest) -> dict:
    """Each step, in order, with what the stack and the cluster showed after it."""
    seen: dict = {}
    _up(waves, policy_pack)
    seen["held timeline"] = _timeline(waves)
    seen["held driver"] = cluster.get("/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-waves-l40s-serving")["spec"]["version"]
    _release(waves.project, "waves-l40s-serving", "waves-h100-serving")
    seen["both"] = waves.run("preview", "--stack", PROD, "--non-interactive",
                             *variants.policy(waves, policy_pack, "prod"), program=True, check=False)
    _release(waves.project, "waves-l40s-serving")
    _up(waves, policy_pack)
    seen["released"] = _timeline(waves)
    seen["again"] = _up(waves, policy_pack)
    seen["carried"] = _timeline(waves)
    return seen


def test_a_first_update_holding_every_pool_records_no_wave(steps: dict) -> None:
    assert steps["held timeline"].waves_released == {}
    assert steps["held driver"] == "570.195.03"


def test_releasing_waves_1_and_2_at_once_is_refused_by_the_engine(steps: dict) -> None:
    result = steps["both"]
    assert result.returncode != 0, result.describe()
    assert re.search(r"\[mandatory\](?: \[severity: \w+\])?\s+waves-in-order\s", result.stdout), result.describe()
    assert "this deployment releases 2 waves at once (1, 2)" in result.stdout, result.describe()


def test_the_update_records_when_it_released_wave_1_and_the_next_carries_it(steps: dict) -> None:
    recorded = steps["released"].waves_released
    assert set(recorded) == {1}  # waves-l40s-serving; wave 2 (waves-h100-serving) is held
    assert datetime.now(UTC) - timedelta(hours=1) < recorded[1] <= datetime.now(UTC)
    assert set(steps["again"]) <= NO_CHANGE, steps["again"]
    assert steps["carried"].waves_released == recorded  # unchanged: the time the wave was released, not now
