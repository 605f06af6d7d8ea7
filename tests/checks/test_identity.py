"""Issue 7 point 2 (live part): the live verbs refuse a cluster that is not the stack's, before any write,
and the stack's declared kubeconfig and context beat the ambient ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from checks.identity import Verdict, identify_cluster
from preview.run import SOURCE_DIR
from rollout.cli import app
from fleetspec.load import load_stack_file
from tests.fakekube.fixtures import move_node
from tests.fakekube.real_cluster import (
    aks_gpu_node,
    eks_gpu_node,
    identity_configmap,
    unlabelled_aks_prod,
)
from tests.fakekube.server import FakeKube

runner = CliRunner()
VERBS = ("preflight", "watch", "pause", "resume")
OTHER_RG = "MC_rg-inference-weu-2_aks-inference-weu-2_westeurope"


def invoke(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env)


def live(verb: str, stack: str, kubeconfig: Path, *extra: str):
    args = [verb, "--stack", stack, "--kubeconfig", str(kubeconfig), *extra]
    if verb == "watch":
        args.append("--once")
    return invoke(*args)


def t4_nodes(fake: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects("nodes") if "gput4" in n["metadata"]["name"])


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("verb", VERBS)
def test_a_record_naming_another_cluster_is_refused(prod, kubeconfig: Path, verb: str) -> None:
    prod.remove("configmaps", "gpu-driver-upgrade-prod", "kube-system")
    prod.add(identity_configmap("prod", {"cluster": "inference-weu-2", "cloud": "aks", "stage": "prod",
                                         "aksResourceGroup": "rg-inference-weu-2",
                                         "aksClusterName": "aks-inference-weu-2"}))
    move_node(prod, t4_nodes(prod)[0], "upgrade-failed")  # watch would auto-pause on the wrong cluster
    prod.reset_counts()
    result = live(verb, "prod", kubeconfig)
    assert result.exit_code == 2, result.output
    assert "wrong cluster: refusing to act on http://127.0.0.1" in result.output
    assert "the stack's cluster 'inference-weu-1' (AKS rg-inference-weu-1/aks-inference-weu-1)" in result.output
    assert "names cluster 'inference-weu-2'" in result.output and "aksClusterName 'aks-inference-weu-2'" in result.output
    assert prod.writes == 0 and result.stdout == ""


@pytest.mark.parametrize("verb", VERBS)
def test_nodes_of_another_aks_cluster_are_refused(fake: FakeKube, kubeconfig: Path, verb: str) -> None:
    unlabelled_aks_prod(fake, node_rg=OTHER_RG)  # no record yet; the node resource group says whose they are
    result = live(verb, "prod", kubeconfig)
    assert result.exit_code == 2, result.output
    assert f"kubernetes.azure.com/cluster={OTHER_RG}, the default node resource group of another cluster" in result.output
    assert "the stack's would start MC_rg-inference-weu-1_aks-inference-weu-1_" in result.output
    assert fake.writes == 0


@pytest.mark.parametrize("verb", ["preflight", "watch"])  # pause/resume refuse image-owned stacks before any call
def test_eks_nodes_in_another_region_are_refused(fake: FakeKube, kubeconfig: Path, verb: str) -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.eks-prod.yaml")  # cluster.eks.region us-east-1
    assert spec.cluster.eks.region == "us-east-1"
    for index in range(4):  # old nodes: no region label, only the provider ID tells
        fake.add(eks_gpu_node("gpu-l40s-g2", index, instance_type="g6e.12xlarge", product="NVIDIA-L40S", gpus=4,
                              driver="580.173.02", zone="eu-west-1b", region=None))
    result = live(verb, "eks-prod", kubeconfig)
    assert result.exit_code == 2, result.output
    assert "are in eu-west-1 (spec.providerID), not us-east-1" in result.output
    assert "'inference-use1-1' (EKS eks-inference-use1-1 in us-east-1)" in result.output
    assert fake.writes == 0


# ---------------------------------------------------------------- nothing to compare: proceed and say so


def test_first_run_on_a_custom_node_resource_group_proceeds_and_says_so(fake: FakeKube, kubeconfig: Path) -> None:
    nodes = unlabelled_aks_prod(fake, node_rg="rg-inference-weu-1-nodes")  # a custom node resource group
    result = live("preflight", "prod", kubeconfig, "--json")
    assert result.exit_code == 0, result.output
    [identity] = [c for c in json.loads(result.stdout)["checks"] if c["id"] == "cluster-identity"]
    assert identity["status"] == "warn"
    assert identity["message"].startswith("cannot confirm that this is the stack's cluster 'inference-weu-1'")
    assert "writes the identity record kube-system/gpu-driver-upgrade-prod" in identity["message"]
    paused = live("pause", "prod", kubeconfig)
    assert paused.exit_code == 0 and "note: cannot confirm that this is the stack's cluster" in paused.output
    assert all(f"labelled {n}" in paused.stdout for n in nodes["gput4"])


def test_a_record_of_ours_confirms_a_custom_node_group_that_looks_like_another(fake: FakeKube,
                                                                             kubeconfig: Path) -> None:
    unlabelled_aks_prod(fake, node_rg="MC_platform_shared-nodes_westeurope")  # custom, but default-shaped
    assert live("preflight", "prod", kubeconfig).exit_code == 2  # nothing says otherwise: refused
    fake.add(identity_configmap("canary", {"cluster": "inference-weu-1", "cloud": "aks", "stage": "canary",
                                           "aksResourceGroup": "RG-Inference-WEU-1",  # Azure ignores the case
                                           "aksClusterName": "aks-inference-weu-1"}))
    result = live("preflight", "prod", kubeconfig, "--json")
    assert result.exit_code == 0, result.output
    [identity] = [c for c in json.loads(result.stdout)["checks"] if c["id"] == "cluster-identity"]
    assert identity["status"] == "pass"
    assert "identity record kube-system/gpu-driver-upgrade-canary (written by the canary stack) names cluster " \
           "'inference-weu-1'" in identity["message"]


def test_the_steady_state_cluster_is_confirmed(prod, kubeconfig: Path) -> None:
    result = live("preflight", "prod", kubeconfig, "--json")
    [identity] = [c for c in json.loads(result.stdout)["checks"] if c["id"] == "cluster-identity"]
    assert identity["status"] == "pass" and "16 node(s) carry kubernetes.azure.com/cluster=MC_rg-inference-weu-1_" \
                                              "aks-inference-weu-1_westeurope" in identity["message"]
    watched = live("watch", "prod", kubeconfig)
    # No identity note (the fake API is plain http, which the adapter notes once: not about identity).
    notes = [line for line in watched.output.splitlines() if line.startswith("note:") and "without TLS" not in line]
    assert watched.exit_code == 0 and notes == []


# ---------------------------------------------------------------- the judgement itself (pure)


def _eks_node(zone: str, region_label: str | None) -> dict:
    return eks_gpu_node("ng", 0, instance_type="p5.48xlarge", product="NVIDIA-H100-80GB-HBM3", gpus=8,
                        driver="580.173.02", zone=zone, region=region_label)


@pytest.mark.parametrize(("zone", "region_label", "verdict"), [
    ("us-east-1a", None, Verdict.UNCONFIRMED),  # in the region: many clusters share it, so no proof
    ("us-east-1-bos-1a", None, Verdict.UNCONFIRMED),  # a Local Zone of us-east-1
    ("us-east-1-wl1-bos-wlz-1", None, Verdict.UNCONFIRMED),  # a Wavelength Zone of us-east-1
    ("us-east-2a", None, Verdict.REFUTED),
    ("us-east-10a", None, Verdict.REFUTED),  # not a zone of us-east-1 just because it starts alike
    ("us-east-1a", "eu-west-1", Verdict.REFUTED),  # the region label wins where present
])
def test_eks_regions(zone: str, region_label: str | None, verdict: Verdict) -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.eks-prod.yaml")
    assert identify_cluster(spec, [], [_eks_node(zone, region_label)]).verdict == verdict


def test_aks_nodes_with_a_custom_node_resource_group_are_no_evidence() -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.prod.yaml")
    node = aks_gpu_node("gput4", 0, vm_size="Standard_NC64as_T4_v3", product="Tesla-T4", gpus=4, driver="570.195.03",
                        node_rg="my-custom-nodes")
    identity = identify_cluster(spec, [], [node])
    assert identity.verdict == Verdict.UNCONFIRMED and identity.refutes == ()


def test_existing_clusters_are_judged_by_their_records_only() -> None:
    spec = load_stack_file(SOURCE_DIR / "Pulumi.existing-prod.yaml")
    ours = identity_configmap("canary", {"cluster": "lab-gpu-1", "cloud": "existing", "stage": "canary"})
    theirs = identity_configmap("prod", {"cluster": "lab-gpu-2", "cloud": "existing", "stage": "prod"})
    assert identify_cluster(spec, [], []).verdict == Verdict.UNCONFIRMED
    assert identify_cluster(spec, [ours], []).verdict == Verdict.CONFIRMED
    refuted = identify_cluster(spec, [ours, theirs], [])  # any record naming another cluster refutes
    assert refuted.verdict == Verdict.REFUTED and "names cluster 'lab-gpu-2'" in refuted.message
