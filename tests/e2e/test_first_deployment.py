"""A first deployment's pin is judged like any new driver (issue 30), in the real engine with the policy pack.

A prod stack of its own (the existing-cluster prod example, pools renamed as tests/e2e/variants.py makes them, its
canary the session's existing-canary, which attested 580.173.02 only) is created with ``previousVersion: X``, a
driver no canary ran or attested:

1. without ``promotion.runningToday`` the gate refuses the held pool's pin in `pulumi preview`: nothing recorded
   says the pool runs X, so it is a promotion;
2. with ``promotion.runningToday: X`` the stack goes up: the pin is admitted as advice naming the declaration, the
   held pool's NVIDIADriver is pinned to X, and ``timeline.driversRun`` records nothing for it (a declaration is
   no run);
3. ``driver.version: X`` with the held pool released is still refused: the pool never ran X, the declaration
   admits no release onto it, and no attestation admits it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from engine_contracts import resource_facts as rf
from tests.e2e import variants
from tests.e2e.controlplane import ControlPlane, Rest
from tests.e2e.pulumi_cli import Pulumi, Result
from tests.e2e.test_engine import variant_stack

PROD = "first-prod"
X = "595.91.07"  # the operator release lists it; no canary of the session ran or attested it
GATE = "canary-attested"
KEY = "gpu-driver-upgrade:"
NVIDIADRIVERS = "/apis/nvidia.com/v1alpha1/nvidiadrivers"
RENAMED = {"l40s-serving": "first-l40s-serving", "h100-serving": "first-h100-serving"}
HELD = "first-h100-serving"


def _first_config(config: dict) -> None:
    variants.own_pools(config, RENAMED, "first")
    config["driver"]["previousVersion"] = X
    config["promotion"].pop("runningToday", None)


def _edit(project: Path, edit: Callable[[dict], None]) -> None:
    """The stack file with its project config changed by ``edit`` (the file `pulumi config` writes)."""
    path = project / f"Pulumi.{PROD}.yaml"
    document = yaml.safe_load(path.read_text())
    config = {k.removeprefix(KEY): v for k, v in document["config"].items() if k.startswith(KEY)}
    edit(config)
    document["config"] = {**{k: v for k, v in document["config"].items() if not k.startswith(KEY)},
                          **{KEY + k: v for k, v in config.items()}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def _declare(config: dict) -> None:
    config["promotion"]["runningToday"] = {"driver": X, "reason": "e2e: the fleet is taken to run 595.91.07 today"}


def _release_onto_x(config: dict) -> None:
    config["driver"]["version"] = X
    for pool in config["nodePools"]:
        if pool["name"] == HELD:
            pool["rollout"]["released"] = True


def _preview(pulumi: Pulumi, pack: Path) -> Result:
    return pulumi.run("preview", "--stack", PROD, "--non-interactive", *variants.policy(pulumi, pack, "prod"),
                      program=True, check=False)


def _refused(result: Result, reason: str) -> None:
    assert result.returncode != 0, result.describe()
    assert re.search(rf"\[mandatory\](?: \[severity: \w+\])?\s+{GATE}\s", result.stdout), result.describe()
    assert reason in result.stdout, result.describe()


@pytest.fixture(scope="module")
def steps(pulumi: Pulumi, control_plane: ControlPlane, policy_pack: Path, canary_up: Result,
          canary_attested: Path, cluster: Rest) -> dict:
    """Each step, in order, with what the engine and the cluster showed after it."""
    forced = copy.copy(pulumi)
    forced.env = {**pulumi.env, "PULUMI_K8S_ENABLE_PATCH_FORCE": "true"}  # the stage's shared records
    variant_stack(pulumi, control_plane, "existing-prod", PROD, _first_config)
    seen: dict = {"undeclared": _preview(forced, policy_pack)}
    _edit(forced.project, _declare)
    seen["declared"] = forced.run("up", "--stack", PROD, "--yes", "--non-interactive", "--skip-preview",
                                  *variants.policy(forced, policy_pack, "prod"), program=True, check=False)
    seen["held driver"] = cluster.get(f"{NVIDIADRIVERS}/gpu-{HELD}")["spec"]["version"]
    outputs = forced.json("stack", "output", "--json", "--stack", PROD)
    seen["drivers run"] = rf.read_timeline(outputs.get(rf.TIMELINE) if isinstance(outputs, dict) else None).drivers_run
    _edit(forced.project, _release_onto_x)
    seen["released onto X"] = _preview(forced, policy_pack)
    return seen


def test_a_first_deployment_s_undeclared_pin_is_refused(steps: dict) -> None:
    _refused(steps["undeclared"], f"driver {X} (pools {HELD}; hopper): no attestation "
                                  f"attestations/existing-canary/{X}.json")


def test_running_today_lets_the_first_deployment_up_and_records_no_run(steps: dict) -> None:
    result = steps["declared"]
    assert result.returncode == 0, result.describe()
    assert "admitted without an attestation by promotion.runningToday" in " ".join(result.stdout.split()), (
        result.describe())
    assert steps["held driver"] == X
    assert steps["drivers run"][HELD] == ()
    assert X not in steps["drivers run"]["first-l40s-serving"]


def test_releasing_the_pool_onto_the_declared_driver_is_still_refused(steps: dict) -> None:
    result = steps["released onto X"]
    # first-l40s-serving went to 580.173.02 on the first deployment, never held on X: a promotion as well.
    _refused(result, f"driver {X} (pools {HELD}, first-l40s-serving; ada, hopper): no attestation "
                     f"attestations/existing-canary/{X}.json")
    assert f"each of these pools ran {X} before" not in result.stdout, result.describe()
