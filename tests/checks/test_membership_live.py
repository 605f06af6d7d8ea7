"""Issue 7 point 1: every live verb finds a pool's nodes without the project's labels.

The fleets here are literal (tests/fakekube/real_cluster.py): nodes carry only the cloud's, NFD's, the
operator's and GFD's labels, as before the stack's first `pulumi up` (or, on `cloud: existing`, forever).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from checks import kube as k
from checks.preflight import run_preflight
from checks.results import Status
from checks.watch import watch
from preview.run import SOURCE_DIR
from rollout.cli import app
from gpu_knowledge import labels
from fleetspec.load import load_stack_file, read_stack_file, spec_from_config
from fleetspec.model import FleetSpec
from tests.fakekube.real_cluster import (
    eks_gpu_node,
    gpu_operator,
    model_server,
    nvidia_driver,
    plain_node,
    unlabelled_aks_prod,
)
from tests.fakekube.server import FakeKube

runner = CliRunner()
SKIP = labels.SKIP_UPGRADE


def invoke(*args: str):
    return runner.invoke(app, list(args))


def skip_labelled(fake: FakeKube) -> set[str]:
    return {n["metadata"]["name"] for n in fake.objects("nodes") if n["metadata"]["labels"].get(SKIP) == "true"}


@pytest.fixture
def unlabelled(fake: FakeKube) -> dict[str, list[str]]:
    nodes = unlabelled_aks_prod(fake)
    fake.reset_counts()
    return nodes


def test_a_healthy_fleet_without_project_labels_passes_preflight(unlabelled: dict, fake: FakeKube,
                                                                 kubeconfig: Path) -> None:
    result = invoke("preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json")
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout)["checks"]
    assert [c for c in checks if c["status"] == "fail"] == []
    membership = {c["subject"]: c for c in checks if c["id"] == "pool-membership"}
    assert {s: c["status"] for s, c in membership.items()} == {"gput4": "warn", "gpua100": "warn", "gpuh100": "warn"}
    assert ("4 of 4 node(s) found by the cloud's kubernetes.azure.com/agentpool, without gpu-driver-upgrade.io/pool: "
            "the first `pulumi up` of this stack adds it through the pool's node labels") == membership["gput4"]["message"]
    assert "and the skip label that holds it" in membership["gpua100"]["message"]  # held: pulumi up adds both
    # The checks that used to fail with "no node carries gpu-driver-upgrade.io/pool=..." now see the pools.
    by_id = {(c["id"], c["subject"]): c for c in checks}
    assert by_id[("driver-owner", "gpuh100")]["status"] == "pass"
    assert by_id[("spare-capacity", "gpua100")]["status"] == "pass"
    assert by_id[("driver-versions", "gput4")]["message"] == "570.195.03 x4"
    assert by_id[("driver-versions", "(no pool)")]["message"] == "570.195.03 x2"  # the other team's gpuml pool
    assert by_id[("fabric-manager", "gpuh100")]["status"] == "pass"
    # Nothing else warns on a healthy fleet: GFD's mig.strategy=single on every node is no MIG in use.
    assert by_id[("mig-timeslicing", "cluster")]["status"] == "pass"
    assert fake.writes == 0


def test_preflight_lists_nodes_once_whatever_the_fleet(fake: FakeKube) -> None:
    """One LIST of every node (classified in memory) replaces the pool-label and gpu.present LISTs; with the
    identity records the query count stays 8, on 16 and on 64 unlabelled nodes."""
    spec = load_stack_file(SOURCE_DIR / "Pulumi.prod.yaml")
    counts = []
    for extra in (0, 48):
        with FakeKube() as server, tempfile.TemporaryDirectory() as tmp:
            unlabelled_aks_prod(server)
            for index in range(extra):
                server.add(plain_node(f"aks-system-31415926-vmss{index + 1:06x}",
                                      {"kubernetes.azure.com/agentpool": "system"}))
            server.reset_counts()
            adapter = k.connect(str(server.write_kubeconfig(Path(tmp) / "kubeconfig")),
                                settings=k.ClientSettings(page_size=100_000))
            run_preflight(adapter, spec)
            counts.append(dict(server.counts_by_resource))
    assert counts[0] == counts[1]
    assert counts[0][("list", "nodes")] == 1 and sum(counts[0].values()) == 8


def test_watch_follows_pools_found_by_the_cloud_label(unlabelled: dict, fake: FakeKube, kubeconfig: Path) -> None:
    result = invoke("watch", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--once", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {p["pool"]: (p["done"], p["total"]) for p in doc["pools"]} == {
        "gput4": (0, 4), "gpua100": (8, 8), "gpuh100": (4, 4)}  # gput4 targets 580; the held pools run 570
    assert {n["pool"] for n in doc["nodes"]} == {"gput4", "gpua100", "gpuh100"}
    assert not any("gpuml" in n["name"] or "system" in n["name"] for n in doc["nodes"])
    assert doc["triggers"] == [] and fake.writes == 0


def test_pause_and_resume_touch_exactly_the_pools_nodes(unlabelled: dict, fake: FakeKube, kubeconfig: Path) -> None:
    paused = invoke("pause", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json")
    assert paused.exit_code == 0, paused.output
    doc = json.loads(paused.stdout)
    # gput4 is released and not on its target yet: held back. The held pools run the driver they are pinned
    # to (done); the other team's pool and the system pool are no pool of the stack.
    assert doc["changed"] == sorted(unlabelled["gput4"])
    assert sorted(doc["done"]) == sorted(unlabelled["gpua100"] + unlabelled["gpuh100"])
    assert skip_labelled(fake) == set(unlabelled["gput4"])
    resumed = invoke("resume", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json")
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["changed"] == sorted(unlabelled["gput4"])
    assert skip_labelled(fake) == set()


def test_pause_on_an_unlabelled_fleet_never_touches_another_teams_pool(unlabelled: dict, fake: FakeKube,
                                                                        kubeconfig: Path) -> None:
    for node in unlabelled["gpuml"]:  # the other team's pool in the middle of its own upgrade
        fake.update("nodes", node, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-required"}}})
    assert invoke("pause", "--stack", "prod", "--kubeconfig", str(kubeconfig)).exit_code == 0
    assert skip_labelled(fake).isdisjoint(unlabelled["gpuml"])


# ---------------------------------------------------------------- cloud: existing (declared selectors)


def _existing_stack(tmp_path: Path, kubeconfig: Path) -> Path:
    """Pulumi.existing-prod.yaml with its context's kubeconfig file set to the fake's."""
    text = (SOURCE_DIR / "Pulumi.existing-prod.yaml").read_text(encoding="utf-8")
    path = tmp_path / "Pulumi.existing-prod.yaml"
    path.write_text(text.replace("    existing:\n      context: lab-gpu-1\n",
                                 f"    existing:\n      context: lab-gpu-1\n      kubeconfig: {kubeconfig}\n"),
                    encoding="utf-8")
    assert spec_from_config(read_stack_file(path)).cluster.existing.kubeconfig == str(kubeconfig)
    return path


def _lab_node(pool: str, index: int, product: str, gpus: int) -> dict:
    node = eks_gpu_node("unused", index, instance_type="bare-metal", product=product, gpus=gpus,
                        driver="570.195.03", state="upgrade-done")
    labels_ = node["metadata"]["labels"]
    for key in ("eks.amazonaws.com/nodegroup", "eks.amazonaws.com/capacityType", "topology.kubernetes.io/region",
                "topology.kubernetes.io/zone"):
        labels_.pop(key)
    labels_["gpu.example.com/pool"] = pool  # the selector the stack declares for the pool
    node["metadata"]["name"] = f"lab-{pool}-{index}"
    node["spec"].pop("providerID")
    # The lab's own machines boot Ubuntu 22.04's kernel, as the canary whose attestation the stack ships did.
    node["status"]["nodeInfo"].update(kernelVersion="6.8.0-1020-generic", osImage="Ubuntu 22.04.5 LTS")
    return node


@pytest.fixture
def lab(fake: FakeKube) -> dict[str, list[str]]:
    """The existing-prod cluster: nodes found only by gpu.example.com/pool; the operator in per-pool mode."""
    nodes = {
        "l40s-serving": [fake.add(_lab_node("l40s-serving", i, "NVIDIA-L40S", 4))["metadata"]["name"] for i in range(4)],
        "h100-serving": [fake.add(_lab_node("h100-serving", i + 10, "NVIDIA-H100-80GB-HBM3", 8))["metadata"]["name"]
                         for i in range(4)],
        "l40s-canary": [fake.add(_lab_node("l40s-canary", i + 20, "NVIDIA-L40S", 1))["metadata"]["name"]
                        for i in range(3)],
    }
    gpu_operator(fake, "v26.7.0", driver={"enabled": True, "useNvidiaDriverCRD": True, "version": "570.195.03"},
                 nvidia_drivers=[nvidia_driver("default", "570.195.03", default=True)] + [
                     nvidia_driver(f"gpu-{pool}", "570.195.03", node_selector={"gpu.example.com/pool": pool})
                     for pool in nodes],
                 driver_pods_on=[n for names in nodes.values() for n in names])
    model_server(fake, "llm-chat", "inference", {"app": "llm-chat", "track": "stable"}, nodes["h100-serving"][:3],
                 image="vllm/vllm-openai:v0.10.2", gpus=8, min_available=2)
    model_server(fake, "embed-triton", "inference", {"app": "embed-triton"},
                 [n for n in nodes["l40s-serving"][:2] for _ in range(2)],
                 image="nvcr.io/nvidia/tritonserver:25.01-py3", gpus=2, min_available=3)
    fake.reset_counts()
    return nodes


def test_existing_cluster_pools_are_found_by_the_declared_selector(lab: dict, fake: FakeKube,
                                                                    tmp_path: Path) -> None:
    stack = str(_existing_stack(tmp_path, fake.write_kubeconfig(tmp_path / "lab", context="lab-gpu-1")))
    result = invoke("preflight", "--stack-file", stack, "--json")
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout)["checks"]
    membership = {c["subject"]: c for c in checks if c["id"] == "pool-membership"}
    assert {s: c["status"] for s, c in membership.items()} == {"l40s-serving": "pass", "h100-serving": "pass"}
    assert "4 node(s) by the declared nodeSelector gpu.example.com/pool=h100-serving" in membership["h100-serving"]["message"]
    assert [c for c in checks if c["status"] == "fail"] == []
    # pause holds exactly the released pool's nodes, found by the selector (the held pool is done on 570).
    paused = invoke("pause", "--stack-file", stack, "--json")
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.stdout)["changed"] == sorted(lab["l40s-serving"])
    assert skip_labelled(fake) == set(lab["l40s-serving"])
    assert json.loads(invoke("resume", "--stack-file", stack, "--json").stdout)["changed"] == sorted(lab["l40s-serving"])
    assert skip_labelled(fake) == set()


# ---------------------------------------------------------------- EKS generations by node group name


def test_eks_generations_are_told_by_the_node_group(fake: FakeKube, kube: k.Kube) -> None:
    spec: FleetSpec = load_stack_file(SOURCE_DIR / "Pulumi.eks-prod.yaml")
    l40s = spec.pool("gpu-l40s")
    for generation in l40s.live_generations:
        for index in range(l40s.nodeCount):
            fake.add(eks_gpu_node(f"gpu-l40s-g{generation.id}", 100 * generation.id + index, instance_type="g6e.12xlarge",
                                  product="NVIDIA-L40S", gpus=4, driver=generation.driverVersion))
    outcome = watch(kube, spec, "eks-prod", once=True, auto_pause=False)
    [row] = [p for p in outcome.snapshot.pools(spec) if p["pool"] == "gpu-l40s"]
    assert [(g["generation"], g["spec"], g["nodes"], g["drivers"]) for g in row["generations"]] == [
        (str(g.id), "live", l40s.nodeCount, {g.driverVersion: l40s.nodeCount}) for g in l40s.live_generations]
    assert {n.generation for n in outcome.snapshot.nodes} == {str(g.id) for g in l40s.live_generations}


def test_preflight_on_unlabelled_nodes_reports_membership_per_result(unlabelled: dict, fake: FakeKube,
                                                                     kube: k.Kube) -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.prod.yaml")
    results = run_preflight(kube, spec)
    assert {r.status for r in results if r.id == "pool-membership"} == {Status.WARN}
    # A node the stack has labelled already counts as labelled, the rest of its pool still warns.
    fake.update("nodes", unlabelled["gput4"][0], {"metadata": {"labels": {labels.POOL: "gput4"}}})
    [t4] = [r for r in run_preflight(kube, spec) if r.id == "pool-membership" and r.subject == "gput4"]
    assert t4.status == Status.WARN and t4.message.startswith("3 of 4 node(s)")
