"""Each preflight id passes on the steady-state cluster and fails (or warns) on its fixture; read-only."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from checks import kube as k
from checks.preflight import run_preflight
from checks.results import SECTIONS, Status
from spec import labels
from spec.load import spec_from_config
from spec.model import FleetSpec
from tests.conftest import edited
from tests.fakekube.fixtures import gpu_node, pod, seed
from tests.fakekube.server import FakeKube

A100 = "aks-gpua100-12345678-vmss000000"


def by_id(results: list, check_id: str) -> set[Status]:
    return {r.status for r in results if r.id == check_id}


def test_steady_state_passes_every_id_and_never_writes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    results = run_preflight(kube, prod_spec)
    assert {r.id for r in results} == set(SECTIONS)
    bad = [r for r in results if r.status != Status.PASS and r.id != "operator-supports-driver"]
    assert bad == []
    assert prod.writes == 0 and prod.counts["get"] == 0  # LISTs only, no per-node GETs


def _drop_a100_driver(fake: FakeKube) -> None:
    fake.remove("nvidiadrivers", "gpu-gpua100")
    for p in fake.objects("pods"):
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == "nvidia-driver" and "gpua100" in p["spec"]["nodeName"]:
            fake.remove("pods", p["metadata"]["name"], p["metadata"]["namespace"])


def _extra_gpu_pod(fake: FakeKube) -> None:
    fake.update("poddisruptionbudgets", "embed-triton-pdb", {"spec": {"minAvailable": 4}}, "inference")
    fake.add(pod("batch-job", "batch", A100, {"app": "batch"},
                 [{"name": "job", "image": "busybox:1", "resources": {"requests": {labels.GPU_RESOURCE: "1"}}}]))


def _no_probe(fake: FakeKube) -> None:
    deployment = fake.obj("deployments", "llm-chat", "inference")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    containers[0].pop("readinessProbe")
    fake.update("deployments", "llm-chat", {"spec": {"template": {"spec": {"containers": containers}}}}, "inference")


def _no_cache(fake: FakeKube) -> None:
    for p in fake.objects("pods"):
        if p["metadata"]["labels"].get("app") == "code-tgi":
            fake.update("pods", p["metadata"]["name"], {"spec": {"volumes": []}}, "inference")


BREAKS: dict[str, tuple[Callable[[FakeKube], None], Status]] = {
    "driver-owner": (_drop_a100_driver, Status.FAIL),
    "two-driver-owners": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {labels.DEPLOY_DRIVER:
                                                                                       "pre-installed"}}}), Status.FAIL),
    "driver-versions": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {
        "nvidia.com/cuda.driver-version.full": "575.57.08"}}}), Status.FAIL),
    "serving-images-cuda": (lambda f: f.add(pod("new-vllm", "inference", A100, {"app": "new"}, [
        {"name": "s", "image": "vllm/vllm-openai:v0.13.0-cuda13.1"}])), Status.FAIL),
    "operator-supports-driver": (lambda f: f.update("deployments", "gpu-operator", {"spec": {"template": {"spec": {
        "containers": [{"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v24.9.2"}]}}}},
        "gpu-operator"), Status.FAIL),
    "kernel-precompiled": (lambda f: f.update("clusterpolicies", "cluster-policy", {"spec": {"driver": {
        "usePrecompiled": True}}}), Status.FAIL),
    "mig-timeslicing": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/mig.strategy":
                                                                                     "single"}}}), Status.WARN),
    "spare-capacity": (_extra_gpu_pod, Status.FAIL),
    "model-replicas": (lambda f: f.update("deployments", "code-tgi", {"spec": {"replicas": 1}}, "inference"),
                       Status.FAIL),
    "model-pdb": (lambda f: f.remove("poddisruptionbudgets", "rerank-sglang-pdb", "inference"), Status.FAIL),
    "pdb-blocks-drain": (lambda f: f.update("poddisruptionbudgets", "llm-chat-pdb", {"spec": {"minAvailable": 3}},
                                            "inference"), Status.FAIL),
    "readiness-probe": (_no_probe, Status.FAIL),
    "weights-cache": (_no_cache, Status.WARN),
}


@pytest.mark.parametrize("check_id", sorted(BREAKS))
def test_each_check_catches_its_fixture(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec, check_id: str) -> None:
    assert Status.FAIL not in by_id(run_preflight(kube, prod_spec), check_id)
    breaker, expected = BREAKS[check_id]
    breaker(prod)
    assert expected in by_id(run_preflight(kube, prod_spec), check_id)
    assert prod.writes == 0


def _config_change(key: str, edit: Callable) -> FleetSpec:
    return spec_from_config(edited("prod", key, edit))


def test_gpu_unsupported_by_target_branch(fake: FakeKube, kube: k.Kube) -> None:
    spec = _config_change("driver", lambda d: d.update(version="595.71.05"))
    seed(fake, spec)
    assert by_id(run_preflight(kube, spec), "gpu-supported-by-driver") == {Status.PASS}
    node = gpu_node(spec, spec.nodePools[0], 99)
    node["metadata"]["labels"][labels.GPU_PRODUCT] = "Tesla-V100-SXM2-16GB"
    fake.add(node)
    assert Status.FAIL in by_id(run_preflight(kube, spec), "gpu-supported-by-driver")


def test_fabric_manager_from_the_host_with_an_operator_driver_fails(fake: FakeKube, kube: k.Kube) -> None:
    spec = _config_change("nodePools", lambda pools: pools[2].update(fabricManager="host"))
    seed(fake, spec)
    assert by_id(run_preflight(kube, spec), "fabric-manager") == {Status.FAIL}


def test_change_ticket_is_required_in_prod(fake: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    seed(fake, prod_spec)
    assert by_id(run_preflight(kube, prod_spec), "change-ticket") == {Status.PASS}
    without = prod_spec.model_copy(update={"changeTicket": None})
    assert by_id(run_preflight(kube, without), "change-ticket") == {Status.FAIL}


def test_nodes_without_gfd_labels_are_reported(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    node = prod.obj("nodes", A100)
    gone = {key: None for key in node["metadata"]["labels"] if key.startswith("nvidia.com/cuda.driver")}
    prod.update("nodes", A100, {"metadata": {"labels": gone}})
    [result] = [r for r in run_preflight(kube, prod_spec) if r.id == "driver-versions" and r.subject == "gpua100"]
    assert result.status == Status.WARN and A100 in result.message


def test_deprecated_driver_labels_are_read(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": None}}})
    [result] = [r for r in run_preflight(kube, prod_spec) if r.id == "driver-versions" and r.subject == "gpua100"]
    assert result.status == Status.PASS and "570.195.03 x8" in result.message


def test_api_calls_do_not_grow_with_nodes(fake: FakeKube, kube: k.Kube) -> None:
    counts = []
    for nodes in (2, 6):
        spec = _config_change("nodePools", lambda pools, n=nodes: [p.update(nodeCount=n) for p in pools])
        with FakeKube() as server:
            seed(server, spec, filler_pods_per_node=1)
            adapter = k.Kube(kube.api.__class__(kube.api.configuration.__class__()),
                             k.ClientSettings(page_size=10_000))
            adapter.api.configuration.host = server.url
            run_preflight(adapter, spec)
            counts.append(dict(server.counts))
    assert counts[0] == counts[1] == {"list": 8}


def test_json_shape(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    doc = json.loads(json.dumps([r.as_json() for r in run_preflight(kube, prod_spec)]))
    assert set(doc[0]) == {"id", "status", "subject", "message"}
