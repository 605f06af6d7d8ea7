"""Waves in order in the real engine (issue 23): the prod update records when it released wave 1 (the stack
output ``timeline``), a second update carries that record forward and changes nothing, and once the last
deployment held every pool, a preview releasing waves 1 and 2 at once is refused by the pack, naming
``waves-in-order``. The shipped prod stack is put back as ``prod_up`` left it, so the tests after these see
the cluster they expect."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from spec import resource_facts as rf
from tests.e2e.conftest import policy_args
from tests.e2e.controlplane import Rest
from tests.e2e.pulumi_cli import Pulumi, Result

PROD = "existing-prod"
POOLS_KEY = "gpu-driver-upgrade:nodePools"
NO_CHANGE = {"same", "read"}


def _timeline(pulumi: Pulumi) -> rf.Timeline:
    return rf.read_timeline(pulumi.json("stack", "output", "--json", "--stack", PROD).get(rf.TIMELINE))


def _up(pulumi: Pulumi, pack: Path) -> dict:
    pulumi.run("up", "--stack", PROD, "--yes", "--non-interactive", "--skip-preview", *policy_args(pack, "prod"),
               program=True)
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


@pytest.fixture
def shipped_waves_restored(prod_up: Result, pulumi: Pulumi, policy_pack: Path, project: Path) -> Iterator[None]:
    """After the test, the shipped stack file (wave 1 released) and an `up` of it: the objects as prod_up left them."""
    shipped = (project / f"Pulumi.{PROD}.yaml").read_text()
    try:
        yield
    finally:
        (project / f"Pulumi.{PROD}.yaml").write_text(shipped)
        _up(pulumi, policy_pack)


def test_the_update_records_when_it_released_wave_1_and_the_next_carries_it(
        prod_up: Result, pulumi: Pulumi, policy_pack: Path) -> None:
    recorded = _timeline(pulumi).waves_released
    assert set(recorded) == {1}  # l40s-serving; wave 2 (h100-serving) is held
    assert datetime.now(UTC) - timedelta(hours=1) < recorded[1] <= datetime.now(UTC)
    changes = _up(pulumi, policy_pack)
    assert set(changes) <= NO_CHANGE, changes
    assert _timeline(pulumi).waves_released == recorded  # unchanged: the time the wave was released, not now


@pytest.mark.usefixtures("shipped_waves_restored")
def test_releasing_waves_1_and_2_at_once_is_refused_by_the_engine(pulumi: Pulumi, policy_pack: Path, project: Path,
                                                                  cluster: Rest) -> None:
    _release(project)  # every pool held: the last deployment released no wave
    _up(pulumi, policy_pack)
    assert _timeline(pulumi).waves_released == {}
    assert cluster.get("/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-l40s-serving")["spec"]["version"] == "570.195.03"

    _release(project, "l40s-serving", "h100-serving")
    result = pulumi.run("preview", "--stack", PROD, "--non-interactive", *policy_args(policy_pack, "prod"),
                        program=True, check=False)
    assert result.returncode != 0, result.describe()
    assert re.search(r"\[mandatory\](?: \[severity: \w+\])?\s+waves-in-order\s", result.stdout), result.describe()
    assert "this deployment releases 2 waves at once (1, 2)" in result.stdout, result.describe()
