"""Issue 7 point 7 (preflight part) and issue 13 point 2: the canary never goes first on a cluster that is
not in per-pool NVIDIADriver mode; GPU nodes outside the stacks' pools keep a driver owner; the
ClusterPolicy is read by the name the stack patches, and a missing or second one is reported.

The cluster walks NVIDIA's migration (gpu-driver-configuration.rst, "Migrating from Cluster Policy Driver
Management"): ClusterPolicy mode, then useNvidiaDriverCRD with the default NVIDIADriver as the fallback
owner, then per-pool NVIDIADrivers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from checks import kube as k
from checks.preflight import run_preflight
from checks.results import Status
from preview.run import SOURCE_DIR
from rollout.cli import app
from fleetspec.load import load_stack_file
from tests.fakekube.real_cluster import aks_gpu_node, model_server, nvidia_driver, unlabelled_aks_prod
from tests.fakekube.server import FakeKube

runner = CliRunner()
H100_NVL = {"vm_size": "Standard_NC40ads_H100_v5", "product": "NVIDIA-H100-NVL", "gpus": 1}
# The canary stack's pools of prod's other GPU architectures: one node each.
CANARY_POOLS = {"canarya100": {"vm_size": "Standard_NC24ads_A100_v4", "product": "NVIDIA-A100-80GB-PCIe", "gpus": 1},
                "canaryt4": {"vm_size": "Standard_NC4as_T4_v3", "product": "Tesla-T4", "gpus": 1}}


def preflight(stack: str, kubeconfig: Path) -> tuple[int, dict[tuple[str, str], dict]]:
    result = runner.invoke(app, ["preflight", "--stack", stack, "--kubeconfig", str(kubeconfig), "--json"])
    assert result.stdout, result.output
    return result.exit_code, {(c["id"], c["subject"]): c for c in json.loads(result.stdout)["checks"]}


@pytest.fixture
def cluster(fake: FakeKube) -> dict[str, list[str]]:
    """The AKS cluster of the canary and prod stacks before either ran: ClusterPolicy driver mode."""
    nodes = unlabelled_aks_prod(fake)
    nodes["gpucanary"] = [fake.add(aks_gpu_node("gpucanary", i, driver="570.195.03", **H100_NVL))["metadata"]["name"]
                          for i in range(3)]
    for pool, shape in CANARY_POOLS.items():
        nodes[pool] = [fake.add(aks_gpu_node(pool, 0, driver="570.195.03", **shape))["metadata"]["name"]]
    model_server(fake, "llm-chat-canary", "inference", {"app": "llm-chat", "track": "canary"},
                 nodes["gpucanary"][:2], image="vllm/vllm-openai:v0.10.2", gpus=1, min_available=1)
    return nodes


def migrate(fake: FakeKube) -> None:
    """NVIDIA's migration step: useNvidiaDriverCRD with the default NVIDIADriver at the driver the nodes run."""
    fake.update("clusterpolicies", "cluster-policy", {"spec": {"driver": {"useNvidiaDriverCRD": True}}})
    fake.add(nvidia_driver("default", "570.195.03", default=True))


def test_the_canary_fails_until_the_cluster_is_in_per_pool_mode(cluster: dict, fake: FakeKube,
                                                                kubeconfig: Path) -> None:
    # 1. ClusterPolicy mode: the canary's NVIDIADriver would be ignored.
    code, checks = preflight("canary", kubeconfig)
    mode = checks[("per-pool-mode", "cluster")]
    assert code == 1 and mode["status"] == "fail"
    assert "spec.driver.useNvidiaDriverCRD is False" in mode["message"]
    assert "this canary's NVIDIADriver would be ignored and the canary pool would get the ClusterPolicy's " \
           "driver 570.195.03, not 580.173.02" in mode["message"]
    assert "docs/runbook.md, 'Per-pool driver mode: the migration'" in mode["message"]
    assert [key for key, c in checks.items() if c["status"] == "fail"] == [("per-pool-mode", "cluster")]
    # The prod stack would switch the mode itself: a warning that points at the same step.
    _, prod_checks = preflight("prod", kubeconfig)
    assert prod_checks[("per-pool-mode", "cluster")]["status"] == "warn"
    assert "Per-pool driver mode: the migration" in prod_checks[("per-pool-mode", "cluster")]["message"]

    # 2. Migrated: the default NVIDIADriver owns every GPU node; the canary may go first now.
    migrate(fake)
    code, checks = preflight("canary", kubeconfig)
    assert checks[("per-pool-mode", "cluster")]["status"] == "pass", checks[("per-pool-mode", "cluster")]
    assert checks[("driver-owner", "gpucanary")]["status"] == "pass"
    assert checks[("per-pool-mode", "cluster")]["message"].endswith(
        "GPU nodes outside this stack's pools all have a driver owner: 18 by NVIDIADriver default (the default)")
    assert code == 0, [c for c in checks.values() if c["status"] == "fail"]

    # 3. Per-pool NVIDIADrivers (the stacks' pulumi up): the default still owns the nodes outside them.
    for pool in ("gput4", "gpua100", "gpuh100", "gpucanary", *CANARY_POOLS):
        fake.add(nvidia_driver(f"gpu-{pool}", "570.195.03", node_selector={"kubernetes.azure.com/agentpool": pool}))
    code, checks = preflight("canary", kubeconfig)
    assert code == 0 and checks[("per-pool-mode", "cluster")]["status"] == "pass"
    assert preflight("prod", kubeconfig)[1][("per-pool-mode", "cluster")]["message"].endswith(
        "all have a driver owner: 2 by NVIDIADriver default (the default), 1 by NVIDIADriver gpu-canarya100, "
        "1 by NVIDIADriver gpu-canaryt4, 3 by NVIDIADriver gpu-gpucanary")


def test_a_disabled_clusterpolicy_driver_leaves_the_canary_with_no_driver(cluster: dict, fake: FakeKube,
                                                                        kubeconfig: Path) -> None:
    fake.update("clusterpolicies", "cluster-policy", {"spec": {"driver": {"enabled": False}}})
    _, checks = preflight("canary", kubeconfig)
    assert "the canary pool would get no driver" in checks[("per-pool-mode", "cluster")]["message"]


def test_gpu_nodes_outside_the_pools_without_an_owner_warn(cluster: dict, fake: FakeKube, kube: k.Kube) -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.prod.yaml")
    fake.update("clusterpolicies", "cluster-policy", {"spec": {"driver": {"useNvidiaDriverCRD": True}}})
    for pool in ("gput4", "gpua100", "gpuh100", "gpucanary", *CANARY_POOLS):
        fake.add(nvidia_driver(f"gpu-{pool}", "570.195.03", node_selector={"kubernetes.azure.com/agentpool": pool}))
    [result] = [r for r in run_preflight(kube, spec) if r.id == "per-pool-mode"]
    assert result.status == Status.WARN
    assert result.message.startswith("2 GPU node(s) outside this stack's pools have no driver owner in per-pool mode: "
                                     "aks-gpuml-31415926-vmss000000, aks-gpuml-31415926-vmss000001")
    assert "create the default NVIDIADriver (spec.default: true" in result.message
    fake.add(nvidia_driver("default", "570.195.03", default=True))
    [result] = [r for r in run_preflight(kube, spec) if r.id == "per-pool-mode"]
    assert result.status == Status.PASS


def test_no_default_nvidiadriver_before_operator_26_7(cluster: dict, fake: FakeKube, kube: k.Kube) -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.prod.yaml")
    migrate(fake)
    fake.update("deployments", "gpu-operator", {"spec": {"template": {"spec": {"containers": [
        {"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v26.3.3"}]}}}}, "gpu-operator")
    [result] = [r for r in run_preflight(kube, spec) if r.id == "per-pool-mode"]
    assert result.status == Status.WARN and "operator v26.3.3 has no default NVIDIADriver (v26.7.0+)" in result.message


def test_two_default_nvidiadrivers_fail(cluster: dict, fake: FakeKube, kube: k.Kube) -> None:
    migrate(fake)
    fake.add(nvidia_driver("default-2", "570.195.03", default=True))
    [result] = [r for r in run_preflight(kube, load_stack_file(SOURCE_DIR / "Pulumi.canary.yaml"))
                if r.id == "per-pool-mode"]
    assert result.status == Status.FAIL and "2 default NVIDIADrivers (default, default-2)" in result.message


# ---------------------------------------------------------------- the ClusterPolicy, by name


def _cluster_policy(fake: FakeKube, name: str) -> None:
    fake.add({"kind": "ClusterPolicy", "metadata": {"name": name},
              "spec": {"driver": {"enabled": True, "version": "570.195.03", "useNvidiaDriverCRD": True}},
              "status": {"state": "ready"}})


def test_a_clusterpolicy_by_another_name_is_not_read(prod: FakeKube, kube: k.Kube, prod_spec) -> None:
    policy = prod.obj("clusterpolicies", "cluster-policy")
    prod.remove("clusterpolicies", "cluster-policy")
    prod.add({"kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"}, "spec": policy["spec"],
              "status": policy["status"]})
    results = run_preflight(kube, prod_spec)
    [found] = [r for r in results if r.id == "cluster-policy"]
    assert found.status == Status.FAIL
    assert found.message.startswith("no ClusterPolicy named cluster-policy (found gpu-cluster-policy)")
    [mode] = [r for r in results if r.id == "per-pool-mode"]
    assert mode.status == Status.WARN and "no ClusterPolicy cluster-policy" in mode.message


def test_a_second_clusterpolicy_is_reported(prod: FakeKube, kube: k.Kube, prod_spec) -> None:
    _cluster_policy(prod, "gpu-cluster-policy")
    [found] = [r for r in run_preflight(kube, prod_spec) if r.id == "cluster-policy"]
    assert found.status == Status.FAIL
    assert "2 ClusterPolicies (cluster-policy, gpu-cluster-policy): the operator reconciles only one; remove " \
           "gpu-cluster-policy" == found.message


@pytest.mark.parametrize(("stack", "expected"), [("prod", Status.FAIL), ("eks-prod", Status.WARN)])
def test_no_clusterpolicy_at_all(fake: FakeKube, kube: k.Kube, stack: str, expected: Status) -> None:
    from tests.fakekube.fixtures import seed

    spec = load_stack_file(SOURCE_DIR / f"Pulumi.{stack}.yaml")
    seed(fake, spec)
    fake.served.discard("clusterpolicies")  # the CRD is not installed
    [found] = [r for r in run_preflight(kube, spec) if r.id == "cluster-policy"]
    assert found.status == expected and found.message.startswith("the ClusterPolicy CRD is not installed")
    if stack == "eks-prod":  # clusterPolicy: helm: this stack's chart creates it
        assert "this stack installs the GPU Operator chart" in found.message
