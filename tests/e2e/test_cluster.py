"""The control plane itself: the release it reports, the fleet on it, and the operator CRDs' schemas enforced
by the API server (what `pulumi up` meets on a real cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e import fleet
from tests.e2e.conftest import ready
from tests.e2e.controlplane import Rest

CHECKOUT = Path(__file__).resolve().parents[2]


def test_api_server_reports_its_release(cluster: Rest) -> None:
    version = cluster.get("/version")
    assert (version["gitVersion"], version["major"], version["minor"]) == ("v1.36.3", "1", "36")


def _config(stack: str) -> dict:
    document = yaml.safe_load((CHECKOUT / f"Pulumi.{stack}.yaml").read_text())
    return {key.split(":", 1)[1]: value for key, value in document["config"].items()
            if key.startswith("gpu-driver-upgrade:")}


@pytest.mark.parametrize("stack", ["existing-canary", "existing-prod"])
def test_fleet_covers_the_example_stack(cluster: Rest, stack: str) -> None:
    """Each pool's declared nodeSelector finds nodeCount GPU nodes of the declared product; each model runs
    its declared replicas, Ready, on its pool's nodes."""
    config = _config(stack)
    nodes = cluster.items("/api/v1/nodes")
    for pool in config["nodePools"]:
        selector = pool["existing"]["nodeSelector"]
        selected = [n for n in nodes if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())]
        assert len(selected) == pool["nodeCount"], pool["name"]
        assert {n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in selected} == {pool["gpuProduct"]}
        assert {n["status"]["allocatable"]["nvidia.com/gpu"] for n in selected} == {str(pool["gpusPerNode"])}
    pods = cluster.items(f"/api/v1/namespaces/{fleet.MODEL_NAMESPACE}/pods")
    pool_nodes = {p["name"]: set() for p in config["nodePools"]}
    for pool in config["nodePools"]:
        selector = pool["existing"]["nodeSelector"]
        pool_nodes[pool["name"]] = {n["metadata"]["name"] for n in nodes
                                    if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())}
    for model in config["models"]:
        mine = [p for p in pods if all(p["metadata"]["labels"].get(k) == v for k, v in model["matchLabels"].items())]
        assert len(mine) == model["replicas"] and all(map(ready, mine)), model["name"]
        allowed = set().union(*(pool_nodes[name] for name in model["nodePools"]))
        assert {p["spec"]["nodeName"] for p in mine} <= allowed, model["name"]


def test_cluster_policy_is_the_charts(cluster: Rest) -> None:
    policy = cluster.get("/apis/nvidia.com/v1/clusterpolicies/cluster-policy")
    assert policy["spec"]["driver"]["useNvidiaDriverCRD"] is True
    assert policy["status"]["state"] == "ready"
    assert {m["manager"] for m in policy["metadata"]["managedFields"]} >= {"helm"}


def _nvidia_driver(**spec: object) -> dict:
    base = {"driverType": "gpu", "default": False, "image": "driver", "repository": "nvcr.io/nvidia",
            "version": "580.173.02", "nodeSelector": {fleet.POOL_LABEL: "l40s-canary"}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "schema-probe"},
            "spec": {**base, **spec}}


DRY_RUN = "/apis/nvidia.com/v1alpha1/nvidiadrivers?dryRun=All"


def test_crd_schema_accepts_a_valid_nvidia_driver(cluster: Rest) -> None:
    status, answer = cluster.request("POST", DRY_RUN, _nvidia_driver(upgradePolicy={}))
    assert status == 201, answer
    # Defaults from the v26.7.0 schema are applied by the API server.
    assert answer["spec"]["upgradePolicy"]["autoUpgrade"] is True
    assert answer["spec"]["upgradePolicy"]["maxParallelUpgrades"] == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"default": True}, "default NVIDIADriver must not use nodeSelector"),  # the CRD's CEL rule
        ({"driverType": "cuda"}, "spec.driverType"),  # an enum
        ({"upgradePolicy": {"maxParallelUpgrades": "one"}}, "spec.upgradePolicy.maxParallelUpgrades"),
        ({"upgradePolicy": {"maxParallelUpgrades": -1}}, "spec.upgradePolicy.maxParallelUpgrades"),
    ],
)
def test_crd_schema_refuses_an_invalid_nvidia_driver(cluster: Rest, spec: dict, message: str) -> None:
    status, answer = cluster.request("POST", DRY_RUN, _nvidia_driver(**spec))
    assert status == 422, answer
    assert message in answer["message"]


def test_a_pools_own_upgrade_policy_is_what_the_api_server_stores(cluster: Rest) -> None:
    """nodePools[].upgradePolicy (issue 39): the pool's NVIDIADriver, rendered as `pulumi up` sends it, stored by the
    API server (v26.7.0 CRD, dry run) with the pool's keys and the stack's others; the other pool keeps the stack's."""
    from fleetspec.load import spec_from_config
    from renderers import manifests
    from tests.conftest import edited

    own = {"maxParallelUpgrades": 2, "maxUnavailable": 2, "podDeletion": {"timeoutSeconds": 1200}}
    spec = spec_from_config(edited("existing-prod", "nodePools",
                                   lambda pools: pools[1].update(upgradePolicy=own)))
    stored = {}
    for pool in spec.nodePools:
        body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
                "metadata": {"name": f"policy-probe-{pool.name}"}, "spec": manifests.nvidia_driver_spec(spec, pool)}
        status, answer = cluster.request("POST", DRY_RUN, body)
        assert status == 201, answer
        stored[pool.name] = answer["spec"]["upgradePolicy"]
    stack = spec.gpuOperator.upgradePolicy
    h100 = stored["h100-serving"]
    assert (h100["maxParallelUpgrades"], h100["maxUnavailable"], h100["podDeletion"]["timeoutSeconds"]) == (2, 2, 1200)
    assert h100["waitForCompletion"] == {"podSelector": stack.waitForCompletion.podSelector,
                                         "timeoutSeconds": stack.waitForCompletion.timeoutSeconds}
    assert h100["drain"]["timeoutSeconds"] == stack.drain.timeoutSeconds and h100["autoUpgrade"] is True
    l40s = stored["l40s-serving"]
    assert (l40s["maxParallelUpgrades"], l40s["maxUnavailable"], l40s["podDeletion"]["timeoutSeconds"]) == (
        stack.maxParallelUpgrades, stack.maxUnavailable, stack.podDeletion.timeoutSeconds)
