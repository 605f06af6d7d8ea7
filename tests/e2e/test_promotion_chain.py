"""What ran is what ran (issue 20 point 2), in the real engine with the policy pack: a canary and a prod stack of
their own go up on driver A; B is promoted with its attestation; prod rolls back to A; a change of prod's
``previousVersion`` to an unattested C is refused (it would move the held pool); re-promoting B is judged by B's
attestation again: the rollback left B, and a driver a pool was rolled back from no longer counts as run.

The two stacks are the existing-cluster examples with their pools renamed (``chain-...``, selecting the same
nodes), models of their own whose PDBs select no pod, without the validation job: their own NVIDIADrivers, pool
records and PDBs, so the session's stacks keep theirs. The records every stack of a stage writes (kube-system/gpu-driver-upgrade-<stage>, the promotion record)
are shared with the session's stacks; these stacks' `up` takes their fields over (the provider's patch force,
PULUMI_K8S_ENABLE_PATCH_FORCE). Attestations are sealed by
the test through engine_contracts.attestation and signed with the example key (tests/policy/attested.py), standing in for the
canary's `gpu-rollout verify`. Stacks of their own as tests/e2e/variants.py makes them.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from engine_contracts import attestation as att
from engine_contracts.attestation import AttestedPool
from tests.e2e import variants
from tests.e2e.controlplane import ControlPlane, Rest
from tests.e2e.pulumi_cli import Pulumi, Result
from tests.e2e.test_engine import variant_stack
from tests.policy.attested import canary_attestation

CANARY, PROD = "chain-canary", "chain-prod"
A, B, C = "580.173.02", "595.91.07", "580.159.04"  # operator v26.7.0 lists A and B; C only by its branch
GATE = "canary-attested"
KEY = "gpu-driver-upgrade:"
NVIDIADRIVERS = "/apis/nvidia.com/v1alpha1/nvidiadrivers"
RENAMED = {"l40s-canary": "chain-l40s", "h100-canary": "chain-h100", "l40s-serving": "chain-l40s-serving",
           "h100-serving": "chain-h100-serving"}


def _own_pools(config: dict) -> None:
    variants.own_pools(config, RENAMED, "chain")


def _canary_config(config: dict) -> None:
    _own_pools(config)
    config["nodePools"] = [p for p in config["nodePools"] if p["name"] == "chain-l40s"]


def _prod_config(config: dict) -> None:
    _own_pools(config)
    config["driver"]["previousVersion"] = A  # the held pool stays on A throughout
    config["promotion"]["canaryStack"] = CANARY
    # A first deployment's pin is a promotion unless declared (issue 30): the fleet is taken to run A already.
    config["promotion"]["runningToday"] = {"driver": A, "reason": "e2e: the chain starts with its fleet on A"}


@pytest.fixture(scope="module")
def chain(pulumi: Pulumi, control_plane: ControlPlane) -> Pulumi:
    """The e2e project's `pulumi`, with the provider's patch force for these stacks' shared records."""
    forced = copy.copy(pulumi)
    forced.env = {**pulumi.env, "PULUMI_K8S_ENABLE_PATCH_FORCE": "true"}
    variant_stack(pulumi, control_plane, "existing-canary", CANARY, _canary_config)
    variant_stack(pulumi, control_plane, "existing-prod", PROD, _prod_config)
    return forced


def _set(pulumi: Pulumi, stack: str, **driver: str) -> None:
    for key, value in driver.items():
        pulumi.run("config", "set", "--path", "--stack", stack, f"{KEY}driver.{key}", value)


def _waive_for(pulumi: Pulumi, driver: str) -> None:
    """Prod's waiver (one GPU per canary node against four in prod) given anew for ``driver``'s branch, as a team
    renews it per promotion: a waiver given for another driver accepts nothing (issue 30)."""
    pulumi.run("config", "set", "--path", "--stack", PROD,
               f"{KEY}promotion.waivers.chain-l40s-serving.driver", driver.split(".")[0])


def _up(pulumi: Pulumi, pack: Path, stack: str, stage: str, check: bool = True) -> Result:
    return pulumi.run("up", "--stack", stack, "--yes", "--non-interactive", "--skip-preview",
                      *variants.policy(pulumi, pack, stage), program=True, check=check)


def _preview(pulumi: Pulumi, pack: Path) -> Result:
    return pulumi.run("preview", "--stack", PROD, "--non-interactive", *variants.policy(pulumi, pack, "prod"), program=True,
                      check=False)


def _attest(project: Path, driver: str) -> Path:
    """The canary's attestation of ``driver``: its one pool, an L40S node with one GPU that served traffic; made on the
    canary stack as the file backend qualifies it (organization/<project>/<stack>)."""
    pool = AttestedPool.of("chain-l40s", "NVIDIA-L40S", gpus_per_node=1, served_traffic=True,
                           traffic="llm-chat-canary on 2 pod(s): requests served during the soak",
                           kernel="6.8.0-1020-generic", os_image="Ubuntu 22.04.5 LTS", kernel_module_type="open")
    return att.write(project / att.ATTESTATION_DIR, canary_attestation(stack=f"organization/gpu-driver-upgrade/{CANARY}", driver=driver,
                                                                          pools=[pool]))


def _driver(cluster: Rest, pool: str) -> str:
    return cluster.get(f"{NVIDIADRIVERS}/gpu-{pool}")["spec"]["version"]


def _refused(result: Result, reason: str) -> None:
    assert result.returncode != 0, result.describe()
    assert re.search(rf"\[mandatory\](?: \[severity: \w+\])?\s+{GATE}\s", result.stdout), result.describe()
    assert reason in result.stdout, result.describe()


@pytest.fixture(scope="module")
def steps(chain: Pulumi, policy_pack: Path, cluster: Rest, kube_system_uid: str) -> dict:
    """Each step of the chain, in order, with what the cluster showed after it."""
    project, seen = chain.project, {}
    # 1. Canary and prod up on A (prod's held pool pinned to A too, which promotion.runningToday declares).
    _up(chain, policy_pack, CANARY, "canary")
    _attest(project, A)
    seen["prod on A"] = _up(chain, policy_pack, PROD, "prod")
    seen["drivers on A"] = (_driver(cluster, "chain-l40s-serving"), _driver(cluster, "chain-h100-serving"))
    # 2. The canary moves to B and attests it; prod's released pool follows, on B's attestation.
    _set(chain, CANARY, version=B, previousVersion=A)
    _up(chain, policy_pack, CANARY, "canary")
    b_attestation = _attest(project, B)
    _set(chain, PROD, version=B)
    _waive_for(chain, B)
    seen["prod on B"] = _up(chain, policy_pack, PROD, "prod")
    seen["drivers on B"] = (_driver(cluster, "chain-l40s-serving"), _driver(cluster, "chain-h100-serving"))
    # 3. Roll back to A: the released pool ran A before B, so going back is no promotion (the held pool stays on the
    # declared A).
    _set(chain, PROD, version=A)
    _waive_for(chain, A)
    seen["rolled back"] = _up(chain, policy_pack, PROD, "prod")
    seen["drivers rolled back"] = (_driver(cluster, "chain-l40s-serving"), _driver(cluster, "chain-h100-serving"))
    # 4. previousVersion to C, which no canary attested: it would move the held pool.
    _set(chain, PROD, previousVersion=C)
    seen["onto C"] = _preview(chain, policy_pack)
    _set(chain, PROD, previousVersion=A)
    # 5. Re-promote B: the last deployment ran A everywhere, so B is judged by its attestation again.
    _set(chain, PROD, version=B)
    _waive_for(chain, B)
    text = b_attestation.read_text()
    b_attestation.write_text(text.replace('"chain-l40s"', '"chain-l40s-serving"'))  # changed after it was sealed
    seen["B tampered"] = _preview(chain, policy_pack)
    b_attestation.write_text(text)
    seen["B again"] = _up(chain, policy_pack, PROD, "prod", check=False)
    seen["drivers on B again"] = (_driver(cluster, "chain-l40s-serving"), _driver(cluster, "chain-h100-serving"))
    return seen


def test_canary_and_prod_go_up_on_a(steps: dict) -> None:
    assert steps["prod on A"].returncode == 0, steps["prod on A"].describe()
    assert steps["drivers on A"] == (A, A)


def test_b_is_promoted_with_its_attestation(steps: dict) -> None:
    assert steps["prod on B"].returncode == 0, steps["prod on B"].describe()
    assert steps["drivers on B"] == (B, A)  # the held pool stays pinned to A


def test_rolling_back_to_a_driver_a_pool_ran_is_not_blocked(steps: dict) -> None:
    result = steps["rolled back"]
    assert result.returncode == 0, result.describe()
    assert steps["drivers rolled back"] == (A, A)


def test_a_previous_version_no_canary_attested_is_refused(steps: dict) -> None:
    _refused(steps["onto C"], f"driver {C} (pools chain-h100-serving; hopper): no attestation "
                              f"attestations/{CANARY}/{C}.json")


def test_re_promoting_b_is_judged_by_b_s_attestation(steps: dict) -> None:
    _refused(steps["B tampered"], f"attestations/{CANARY}/{B}.json: digest mismatch")
    result = steps["B again"]
    assert result.returncode == 0, result.describe()
    assert steps["drivers on B again"] == (B, A)
