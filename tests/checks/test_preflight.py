"""Each preflight id passes on the steady-state cluster and fails (or warns) on its fixture; read-only."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from checks import compatibility, disruption, preflight
from checks import kube as k
from checks.attested import read_attested
from engine_contracts import attestation as att
from checks.inventory import read_inventory
from checks.preflight import run_preflight
from checks.results import Status
from gpu_knowledge import labels
from fleetspec.load import spec_from_config
from fleetspec.model import DriverOwner, FleetSpec
from rollout.documents import dumps
from rollout.schemas import CheckResult, PreflightDocument
from tests.conftest import PROJECT_DIR, edited
from tests.fakekube.fixtures import gpu_node, pod, pods_of, seed, set_pod_ready
from tests import arm_server
from tests.fakekube.server import FakeKube

A100 = "aks-gpua100-12345678-vmss000000"

# Every preflight id, in the order preflight reports them, with its runbook section (the table it is in).
PREFLIGHT = {
    "cluster-identity": "The stack's cluster",
    "pool-membership": "The stack's cluster",
    "pool-adopted": "The stack's cluster",
    "pool-hardware": "The stack's cluster",
    "cluster-policy": "Who owns the driver",
    "driver-owner": "Who owns the driver",
    "per-pool-mode": "Who owns the driver",
    "two-driver-owners": "Who owns the driver",
    "driver-versions": "Who owns the driver",
    "running-today": "Who owns the driver",
    "node-image": "Who owns the driver",
    "node-os-channel": "Who owns the driver",
    "gpu-supported-by-driver": "1. Compatibility checks",
    "serving-images-cuda": "1. Compatibility checks",
    "operator-supports-driver": "1. Compatibility checks",
    "kernel-precompiled": "1. Compatibility checks",
    "attested-kernel": "1. Compatibility checks",
    "fabric-manager": "1. Compatibility checks",
    "mig-timeslicing": "1. Compatibility checks",
    "dcgm-exporter": "1. Compatibility checks",
    "change-ticket": "1. Compatibility checks",
    "spare-capacity": "2. Capacity and disruption controls",
    "surge-quota": "2. Capacity and disruption controls",
    "model-replicas": "2. Capacity and disruption controls",
    "model-pdb": "2. Capacity and disruption controls",
    "pdb-blocks-drain": "2. Capacity and disruption controls",
    "readiness-probe": "2. Capacity and disruption controls",
    "weights-cache": "2. Capacity and disruption controls",
    "batch-jobs": "2. Capacity and disruption controls",
    "model-metrics": "2. Capacity and disruption controls",
}


def by_id(results: list, check_id: str) -> set[Status]:
    return {r.status for r in results if r.id == check_id}


def test_steady_state_passes_every_id_and_never_writes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                       tmp_path: Path) -> None:
    with arm_server.serve(tmp_path, "None") as arm:  # the cluster's node OS upgrade channel, read from ARM
        results = run_preflight(kube, prod_spec, read_attested(PROJECT_DIR, prod_spec),
                                management=arm_server.reader(arm))
    assert {r.id for r in results} == set(PREFLIGHT)
    bad = [r for r in results if r.status != Status.PASS]
    assert bad == []
    assert prod.writes == 0 and prod.counts["get"] == 0  # LISTs only, no per-node GETs


def test_results_come_in_the_runbook_order(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    results = run_preflight(kube, prod_spec, read_attested(PROJECT_DIR, prod_spec))
    assert list(dict.fromkeys(r.id for r in results)) == list(PREFLIGHT)
    assert {r.id: preflight.section_of(r).title for r in results} == PREFLIGHT


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


def _first_up_over_a_pool_it_did_not_make(fake: FakeKube) -> None:
    """No identity record of the stack (it never ran `up` here) and an A100 node without the project's label: the
    cluster runs agent pool gpua100 already, and the stack does not adopt it."""
    for record in [c for c in fake.objects("configmaps") if c["metadata"]["name"].startswith("gpu-driver-upgrade-")]:
        fake.remove("configmaps", record["metadata"]["name"], record["metadata"]["namespace"])
    node = fake.obj("nodes", A100)
    fake.remove("nodes", A100)
    del node["metadata"]["labels"][labels.POOL]
    fake.add(node)


BREAKS: dict[str, tuple[Callable[[FakeKube], None], Status]] = {
    # Issue 32: a first deployment would create gpua100 again (warned here; `plan --from-cluster` refuses it).
    "pool-adopted": (_first_up_over_a_pool_it_did_not_make, Status.WARN),
    # Issue 30: GFD sees another GPU than the pool declares.
    "pool-hardware": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {labels.GPU_PRODUCT:
                                                                                   "NVIDIA-A100-SXM4-80GB"}}}), Status.FAIL),
    "driver-owner": (_drop_a100_driver, Status.FAIL),
    "two-driver-owners": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {labels.DEPLOY_DRIVER:
                                                                                       "pre-installed"}}}), Status.FAIL),
    "driver-versions": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {
        "nvidia.com/cuda.driver-version.full": "575.57.08"}}}), Status.FAIL),
    "running-today": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {
        "nvidia.com/cuda.driver-version.full": "575.57.08"}}}), Status.FAIL),
    "serving-images-cuda": (lambda f: f.add(pod("new-vllm", "inference", A100, {"app": "new"}, [
        {"name": "s", "image": "vllm/vllm-openai:v0.13.0-cuda13.1"}])), Status.FAIL),
    "operator-supports-driver": (lambda f: f.update("deployments", "gpu-operator", {"spec": {"template": {"spec": {
        "containers": [{"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v24.9.2"}]}}}},
        "gpu-operator"), Status.FAIL),
    # NVIDIADriver mode: each CR's own usePrecompiled decides for the pools it selects.
    # Precompiled with no registry to ask: no pass (tests/checks/test_precompiled_registry.py asks one).
    "kernel-precompiled": (lambda f: f.update("nvidiadrivers", "gpu-gpua100", {"spec": {"usePrecompiled": True}}),
                           Status.WARN),
    # A MIG layout in use (mig-manager applied one); the strategy label alone is on every node anyway.
    "mig-timeslicing": (lambda f: f.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/mig.config":
                                                                                     "all-1g.10gb"}}}), Status.WARN),
    "spare-capacity": (_extra_gpu_pod, Status.FAIL),
    "model-replicas": (lambda f: f.update("deployments", "code-tgi", {"spec": {"replicas": 1}}, "inference"),
                       Status.FAIL),
    "model-pdb": (lambda f: f.remove("poddisruptionbudgets", "rerank-sglang-pdb", "inference"), Status.FAIL),
    "pdb-blocks-drain": (lambda f: f.update("poddisruptionbudgets", "llm-chat-pdb", {"spec": {"minAvailable": 3}},
                                            "inference"), Status.FAIL),
    "readiness-probe": (_no_probe, Status.FAIL),
    "weights-cache": (_no_cache, Status.WARN),
    # Issue 36: a DCGM Exporter other than the one the stack declares (24.9's, DCGM 3.3.9, older than R580 needs).
    "dcgm-exporter": (lambda f: f.update("daemonsets", "nvidia-dcgm-exporter",
                                         _dcgm_exporter("3.3.9-3.6.1-ubuntu22.04"), "gpu-operator"), Status.FAIL),
}


def _dcgm_exporter(tag: str) -> dict:
    labels_ = {"app": "nvidia-dcgm-exporter"}
    return {"kind": "DaemonSet", "metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator",
                                              "labels": labels_},
            "spec": {"selector": {"matchLabels": labels_}, "template": {"metadata": {"labels": labels_}, "spec": {
                "containers": [{"name": "nvidia-dcgm-exporter", "image": f"nvcr.io/nvidia/k8s/dcgm-exporter:{tag}"}]}}}}


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


def test_a_held_pool_on_another_driver_than_declared_fails(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    """Issue 30: the gate admits a held pool's pin on promotion.runningToday alone, so preflight compares the
    declaration with the nodes' GFD driver labels and names the nodes, the declared and the seen driver."""
    assert prod_spec.promotion is not None and prod_spec.promotion.runningToday is not None
    results = [r for r in run_preflight(kube, prod_spec) if r.id == "running-today"]
    assert {r.subject for r in results} == {"gpua100", "gpuh100"}  # the held pools; gput4 is released
    assert {r.status for r in results} == {Status.PASS}
    prod.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": "595.91.07"}}})
    [result] = [r for r in run_preflight(kube, prod_spec) if r.id == "running-today" and r.subject == "gpua100"]
    assert result.status == Status.FAIL
    assert result.message.startswith(f"promotion.runningToday declares 570.195.03, but 1 node(s) run another driver: "
                                     f"{A100} (595.91.07)")


def test_without_a_declaration_there_is_nothing_to_compare(prod: FakeKube, kube: k.Kube,
                                                            prod_spec: FleetSpec) -> None:
    assert prod_spec.promotion is not None
    undeclared = prod_spec.model_copy(update={"promotion": prod_spec.promotion.model_copy(
        update={"runningToday": None})})
    prod.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": "595.91.07"}}})
    [result] = [r for r in run_preflight(kube, undeclared) if r.id == "running-today"]
    assert result.status == Status.PASS and result.subject == "stack"


def test_a_node_without_gfd_labels_cannot_confirm_the_declaration(prod: FakeKube, kube: k.Kube,
                                                                   prod_spec: FleetSpec) -> None:
    node = prod.obj("nodes", A100)
    gone = {key: None for key in node["metadata"]["labels"] if key.startswith("nvidia.com/cuda.driver")}
    prod.update("nodes", A100, {"metadata": {"labels": gone}})
    [result] = [r for r in run_preflight(kube, prod_spec) if r.id == "running-today" and r.subject == "gpua100"]
    assert result.status == Status.WARN and A100 in result.message


def test_deprecated_driver_labels_are_read(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": None}}})
    [result] = [r for r in run_preflight(kube, prod_spec) if r.id == "driver-versions" and r.subject == "gpua100"]
    assert result.status == Status.PASS and "570.195.03 x8" in result.message


@pytest.mark.parametrize("page_size", [10_000, 7])
def test_api_calls_do_not_grow_with_nodes(page_size: int) -> None:
    """LIST queries stay at 8 whatever the fleet (one of every node, classified in memory, and one of the
    identity records, where there used to be two node LISTs); with small pages only continuation pages grow."""
    counts, pages = [], []
    for nodes in (2, 6):
        spec = _config_change("nodePools", lambda pools, n=nodes: [p.update(nodeCount=n) for p in pools])
        with FakeKube() as server, tempfile.TemporaryDirectory() as tmp:
            seed(server, spec, filler_pods_per_node=1)
            server.reset_counts()
            adapter = k.connect(str(server.write_kubeconfig(Path(tmp) / "kubeconfig")),
                                settings=k.ClientSettings(page_size=page_size))
            run_preflight(adapter, spec)
            counts.append({verb: n - (server.pages if verb == "list" else 0) for verb, n in server.counts.items()})
            pages.append(server.pages)
    assert counts[0] == counts[1] == {"list": 8}
    if page_size == 7:
        assert 0 < pages[0] < pages[1]  # the big lists really were paged, more so on the bigger fleet
    else:
        assert pages == [0, 0]


def test_json_shape(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    checks = [CheckResult.of(r) for r in run_preflight(kube, prod_spec)]
    doc = json.loads(dumps(PreflightDocument(stack="prod", checks=checks)))["checks"]  # as `preflight --json` prints
    assert set(doc[0]) == {"id", "status", "subject", "message"}


def _result(results: list, check_id: str, subject: str):
    [found] = [r for r in results if r.id == check_id and r.subject == subject]
    return found


def test_pdb_max_unavailable_percent_rounds_up(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    # llm-chat has 3 replicas: 10% of 3 rounds UP to 1 pod, so one eviction is allowed.
    prod.update("poddisruptionbudgets", "llm-chat-pdb", {"spec": {"minAvailable": None, "maxUnavailable": "10%"}},
                "inference")
    assert prod.obj("poddisruptionbudgets", "llm-chat-pdb", "inference")["status"]["disruptionsAllowed"] == 1
    result = _result(run_preflight(kube, prod_spec), "pdb-blocks-drain", "inference/llm-chat-pdb")
    assert result.status == Status.PASS and "keeps 2 of 3" in result.message
    prod.update("poddisruptionbudgets", "llm-chat-pdb", {"spec": {"maxUnavailable": 0}}, "inference")
    result = _result(run_preflight(kube, prod_spec), "pdb-blocks-drain", "inference/llm-chat-pdb")
    assert result.status == Status.FAIL and "maxUnavailable 0 keeps all 3" in result.message


def test_pdb_with_no_disruption_allowed_now_blocks(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    # minAvailable 2 of 3 is fine on paper; with one pod unready, 0 disruptions are allowed now.
    [first, *_] = pods_of(prod, "inference", {"app": "llm-chat"})
    set_pod_ready(prod, "inference", first, False)
    result = _result(run_preflight(kube, prod_spec), "pdb-blocks-drain", "inference/llm-chat-pdb")
    assert result.status == Status.FAIL and "0 disruptions allowed now" in result.message
    assert "keeps all" not in result.message


def test_spare_capacity_reads_max_unavailable_pdbs(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    # gpua100: 8 x 1 GPU, embed-triton 4 + code-tgi 3 = 7 requested; one more pod leaves no spare node.
    prod.add(pod("batch-job", "batch", A100, {"app": "batch"},
                 [{"name": "job", "image": "busybox:1", "resources": {"requests": {labels.GPU_RESOURCE: "1"}}}]))
    assert _result(run_preflight(kube, prod_spec), "spare-capacity", "gpua100").status == Status.WARN
    # A maxUnavailable PDB that allows nothing must count as "every replica stays", not be ignored.
    prod.update("poddisruptionbudgets", "embed-triton-pdb", {"spec": {"minAvailable": None, "maxUnavailable": 0}},
                "inference")
    result = _result(run_preflight(kube, prod_spec), "spare-capacity", "gpua100")
    assert result.status == Status.FAIL and "inference/embed-triton" in result.message
    prod.update("poddisruptionbudgets", "embed-triton-pdb", {"spec": {"maxUnavailable": "50%"}}, "inference")
    assert _result(run_preflight(kube, prod_spec), "spare-capacity", "gpua100").status == Status.WARN


def test_pdb_min_available_helper() -> None:
    pdb = lambda **spec: {"spec": spec}  # noqa: E731
    assert disruption.pdb_min_available(pdb(maxUnavailable="10%"), 3) == 2
    assert disruption.pdb_min_available(pdb(maxUnavailable="50%"), 3) == 1
    assert disruption.pdb_min_available(pdb(minAvailable="50%"), 3) == 2
    assert disruption.pdb_min_available(pdb(minAvailable=2), 3) == 2
    assert disruption.pdb_min_available(pdb(maxUnavailable=5), 3) == 0
    assert disruption.pdb_min_available(pdb(), 3) == 0


def test_an_empty_pdb_selector_covers_every_pod_of_its_namespace(prod: FakeKube, kube: k.Kube,
                                                                 prod_spec: FleetSpec) -> None:
    prod.remove("poddisruptionbudgets", "rerank-sglang-pdb", "inference")
    assert _result(run_preflight(kube, prod_spec), "model-pdb", "inference/rerank-sglang").status == Status.FAIL
    prod.add({"kind": "PodDisruptionBudget", "metadata": {"name": "everything", "namespace": "inference"},
              "spec": {"selector": {}, "maxUnavailable": 1}})
    assert _result(run_preflight(kube, prod_spec), "model-pdb", "inference/rerank-sglang").status == Status.PASS


def test_ephemeral_volumes_are_not_a_weights_cache(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    ephemeral = [{"name": "weights", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "200Gi"}}}}}}]
    for name in pods_of(prod, "inference", {"app": "code-tgi"}):
        prod.update("pods", name, {"spec": {"volumes": ephemeral}}, "inference")
    assert _result(run_preflight(kube, prod_spec), "weights-cache", "inference/code-tgi").status == Status.WARN


def test_forward_compat_images(fake: FakeKube, kube: k.Kube) -> None:
    def with_cuda(forward: bool) -> FleetSpec:
        return spec_from_config(edited("prod", "models", lambda models: models[0].update(
            cudaVersion="13.1", cudaForwardCompat=forward)))

    spec = with_cuda(True)
    seed(fake, spec)
    image = spec.models[0].image
    result = _result(run_preflight(kube, spec), "serving-images-cuda", image)
    assert result.status == Status.PASS and "through cuda-compat" in result.message
    result = _result(run_preflight(kube, with_cuda(False)), "serving-images-cuda", image)
    assert result.status == Status.FAIL and "13.1" in result.message


def test_model_servers_are_matched_by_image_name(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.add(pod("contiguous", "tools", A100, {"app": "c"}, [{"name": "c", "image": "example.com/contiguous:1"}]))
    prod.add(pod("tgi", "tools", A100, {"app": "t"}, [{"name": "t", "image": "example.com/ml/tgi-gaudi:2.0"}]))
    subjects = {r.subject for r in run_preflight(kube, prod_spec) if r.id == "serving-images-cuda"}
    assert "example.com/ml/tgi-gaudi:2.0" in subjects and "example.com/contiguous:1" not in subjects


def test_driver_versions_lists_unlabelled_nodes_even_when_failing(prod: FakeKube, kube: k.Kube,
                                                                  prod_spec: FleetSpec) -> None:
    other = "aks-gpua100-12345678-vmss000001"
    prod.update("nodes", A100, {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": "575.57.08"}}})
    gone = {key: None for key in prod.obj("nodes", other)["metadata"]["labels"] if key.startswith("nvidia.com/cuda.driver")}
    prod.update("nodes", other, {"metadata": {"labels": gone}})
    result = _result(run_preflight(kube, prod_spec), "driver-versions", "gpua100")
    assert result.status == Status.FAIL and "575.57.08" in result.message and other in result.message


def _host_fm(version: str | None) -> FleetSpec:
    """The prod stack with image-owned drivers and a host Fabric Manager on the H100 pool."""
    def edit(pools: list) -> None:
        pools[2].update(fabricManager="host", **({"fabricManagerVersion": version} if version else {}))
    config = edited("prod", "nodePools", edit)
    return spec_from_config(config)


def test_fabric_manager_on_the_host_must_match_the_driver(fake: FakeKube, kube: k.Kube) -> None:
    spec = _host_fm(None)
    seed(fake, spec)
    h100 = [r for r in run_preflight(kube, spec) if r.id == "fabric-manager" and r.subject == "gpuh100"]
    assert [r.status for r in h100] == [Status.FAIL]  # operator-owned driver: host FM never follows it
    image_owned = spec.model_copy(update={"driver": spec.driver.model_copy(update={"owner": DriverOwner.IMAGE})})
    target = image_owned.pool_target(image_owned.pool("gpuh100")).driver
    for version, expected in ((target, Status.PASS), ("570.124.06", Status.FAIL), (None, Status.FAIL)):
        pool = image_owned.pool("gpuh100").model_copy(update={"fabricManagerVersion": version})
        pools = [pool if p.name == "gpuh100" else p for p in image_owned.nodePools]
        variant = image_owned.model_copy(update={"nodePools": pools})
        [result] = [r for r in compatibility.check_fabric_manager(read_inventory(kube, variant)) if r.subject == "gpuh100"]
        assert result.status == expected, (version, result)


def test_fabric_manager_reads_nvswitch_from_the_nodes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    assert [r.subject for r in run_preflight(kube, prod_spec) if r.id == "fabric-manager"] == ["gpuh100"]
    prod.update("nodes", A100, {"metadata": {"labels": {labels.GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB",
                                                        "nvidia.com/gpu.count": "8"}}})
    assert _result(run_preflight(kube, prod_spec), "fabric-manager", "gpua100").status == Status.WARN
    prod.update("nodes", A100, {"metadata": {"labels": {labels.POOL_NVSWITCH: "true"}}})
    assert _result(run_preflight(kube, prod_spec), "fabric-manager", "gpua100").status == Status.FAIL


def test_precompiled_follows_each_nvidia_driver(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.update("nvidiadrivers", "gpu-gput4", {"spec": {"usePrecompiled": True}})
    statuses = {r.subject: r.status for r in run_preflight(kube, prod_spec) if r.id == "kernel-precompiled"}
    # gput4 precompiled, its image not confirmed (no registry asked here); the others build the driver.
    assert statuses == {"gput4": Status.WARN, "gpua100": Status.PASS, "gpuh100": Status.PASS}


def _gpu_deployment(fake: FakeKube, name: str, namespace: str, node: str) -> None:
    """A GPU workload the stack does not declare, with one pod on ``node`` and no PodDisruptionBudget."""
    app_labels = {"app": name}
    gpu = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    container = {"name": "trainer", "image": "registry.example.com/trainer:1.0", "resources": gpu}
    fake.add({"kind": "Deployment", "metadata": {"name": name, "namespace": namespace, "labels": app_labels},
              "spec": {"replicas": 1, "selector": {"matchLabels": app_labels},
                       "template": {"metadata": {"labels": app_labels}, "spec": {"containers": [container]}}}})
    fake.add(pod(f"{name}-5c7d9-000", namespace, node, app_labels, [container], owner=("ReplicaSet", f"{name}-5c7d9")))


def test_a_gpu_workload_counts_where_this_stacks_upgrade_reaches_it(prod: FakeKube, kube: k.Kube,
                                                                   prod_spec: FleetSpec) -> None:
    # Another team's trainer on a GPU node outside this stack's pools: not this upgrade's to protect (a
    # canary preflight must not fail on prod's model servers).
    _gpu_deployment(prod, "trainer-elsewhere", "research", "aks-otherpool-12345678-vmss000000")
    results = run_preflight(kube, prod_spec)
    assert not [r for r in results if r.id == "model-pdb" and r.subject == "research/trainer-elsewhere"]
    # The same kind of workload on a node of one of the stack's pools is evicted by its upgrade: no PDB fails.
    (node, *_) = [n["metadata"]["name"] for n in prod.objects("nodes")
                  if n["metadata"]["labels"].get("gpu-driver-upgrade.io/pool") == "gput4"]
    _gpu_deployment(prod, "trainer-on-t4", "research", node)
    on_pool = _result(run_preflight(kube, prod_spec), "model-pdb", "research/trainer-on-t4")
    assert on_pool.status == Status.FAIL and "no PodDisruptionBudget" in on_pool.message


# ---------------------------------------------------------------- attested-kernel: prod's kernels against the canary's


T4 = "aks-gput4-12345678-vmss000000"  # gput4 is the example prod stack's released pool (580.173.02, attested)


def _kernel_of(results: list, pool: str):
    return _result(results, "attested-kernel", pool)


def test_attested_kernel_compares_the_released_pool_by_release_series(prod: FakeKube, kube: k.Kube,
                                                                       prod_spec: FleetSpec) -> None:
    attested = read_attested(PROJECT_DIR, prod_spec)
    assert set(attested.by_driver) == {"580.173.02"}
    passing = _kernel_of(run_preflight(kube, prod_spec, attested), "gput4")
    assert passing.status == Status.PASS and "by release series" in passing.message
    # Another build of the same series (5.15.0-*-azure) still passes; another series fails, naming both.
    prod.update("nodes", T4, {"status": {"nodeInfo": {"kernelVersion": "5.15.0-1080-azure"}}})
    assert _kernel_of(run_preflight(kube, prod_spec, attested), "gput4").status == Status.PASS
    prod.update("nodes", T4, {"status": {"nodeInfo": {"kernelVersion": "6.8.0-1020-azure"}}})
    failing = _kernel_of(run_preflight(kube, prod_spec, attested), "gput4")
    assert failing.status == Status.FAIL
    assert failing.message.startswith(f"the nodes run kernel 6.8.0-1020-azure on {T4}; the canary attested "
                                      "580.173.02 on 5.15.0-1079-azure (canary pool canaryt4)")
    assert "promotion.waivers.gput4 that accepts kernel" in failing.message
    # Held pools take no driver in this change: nothing to compare.
    assert _kernel_of(run_preflight(kube, prod_spec, attested), "gpua100").status == Status.PASS


def test_attested_kernel_is_exact_where_modules_are_precompiled(prod: FakeKube, kube: k.Kube, tmp_path: Path) -> None:
    """Precompiled drivers are pinned by branch (580): the canary's attestation of the branch, re-sealed here from
    the shipped one, and a node of another build of the same series fails: one image per exact kernel."""
    spec = spec_from_config(edited("prod", "gpuOperator", lambda o: o.update(usePrecompiled=True))
                            | {"gpu-driver-upgrade:driver": json.dumps({"owner": "operator", "version": "580",
                                                                        "previousVersion": "570"})})
    shipped = att.load(PROJECT_DIR / "attestations" / "canary" / "580.173.02.json")
    fields = {"stack": shipped.stack, "stage": shipped.stage, "cluster": shipped.cluster,
              "identity": shipped.identity, "operator_chart": shipped.operatorChart,
              "driver_mode": shipped.driverMode, "pools": shipped.pools, "checks": shipped.checks,
              "soak_start": shipped.soakStart, "soak_end": shipped.soakEnd, "git_commit": shipped.gitCommit}
    att.write(tmp_path / att.ATTESTATION_DIR, att.seal(driver="580", signing_key=None, **fields))
    attested = read_attested(tmp_path, spec)
    assert _kernel_of(run_preflight(kube, spec, attested), "gput4").status == Status.PASS
    prod.update("nodes", T4, {"status": {"nodeInfo": {"kernelVersion": "5.15.0-1080-azure"}}})
    exact = _kernel_of(run_preflight(kube, spec, attested), "gput4")
    assert exact.status == Status.FAIL and "exactly (precompiled modules are built per kernel)" in exact.message


def test_attested_kernel_takes_a_waiver_only_for_its_driver_and_until_it_expires(prod: FakeKube, kube: k.Kube) -> None:
    def waived(**waiver: object) -> FleetSpec:
        return spec_from_config(edited("prod", "promotion", lambda p: p["waivers"]["gput4"].update(
            accept=[*p["waivers"]["gput4"]["accept"], "kernel"], **waiver)))

    prod.update("nodes", T4, {"status": {"nodeInfo": {"kernelVersion": "6.8.0-1020-azure"}}})
    bound = waived()
    accepted = _kernel_of(run_preflight(kube, bound, read_attested(PROJECT_DIR, bound)), "gput4")
    assert accepted.status == Status.PASS and "accepted by promotion.waivers.gput4 (ticket CHG-" in accepted.message
    for foreign in (waived(driver="595"), waived(expires="2026-01-31")):
        assert _kernel_of(run_preflight(kube, foreign, read_attested(PROJECT_DIR, foreign)), "gput4").status \
            == Status.FAIL


def test_attested_kernel_without_an_attestation_is_never_a_pass(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                               tmp_path: Path) -> None:
    # No project folder given: not compared, and said so.
    (unread,) = [r for r in run_preflight(kube, prod_spec) if r.id == "attested-kernel"]
    assert unread.status != Status.PASS and "no project folder" in unread.message
    # A project without the attestation: inconclusive, naming the file it looked for.
    missing = _kernel_of(run_preflight(kube, prod_spec, read_attested(tmp_path, prod_spec)), "gput4")
    assert missing.status != Status.PASS and "attestations/canary/580.173.02.json: no such attestation" in \
        missing.message
    # An attestation whose file was edited after it was sealed: unreadable, never compared.
    folder = tmp_path / "attestations" / "canary"
    folder.mkdir(parents=True)
    text = (PROJECT_DIR / "attestations" / "canary" / "580.173.02.json").read_text()
    (folder / "580.173.02.json").write_text(text.replace("5.15.0-1079-azure", "6.8.0-1020-azure"))
    edited_file = _kernel_of(run_preflight(kube, prod_spec, read_attested(tmp_path, prod_spec)), "gput4")
    assert edited_file.status != Status.PASS and "digest mismatch" in edited_file.message


def test_attested_kernel_gates_the_train(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    from checks.fleet import GATING_CHECKS, preflight_failures

    assert "attested-kernel" in GATING_CHECKS
    prod.update("nodes", T4, {"status": {"nodeInfo": {"kernelVersion": "6.8.0-1020-azure"}}})
    failed = preflight_failures(kube, prod_spec, read_attested(PROJECT_DIR, prod_spec))
    assert [(r.id, r.subject) for r in failed] == [("attested-kernel", "gput4")]


# ---------------------------------------------------------------- batch-jobs: the jobs nobody declared, seen on the nodes


def _training_pod(fake: FakeKube, name: str, node: str, pod_labels: dict[str, str],
                  owner: tuple[str, str] | None = ("Job", "finetune-7")) -> None:
    gpu = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    fake.add(pod(name, "research", node, pod_labels, [{"name": "train", "image": "registry.example.com/ft:1",
                                                        "resources": gpu}], owner=owner))


def test_batch_jobs_the_upgrade_would_evict_fail_in_prod_naming_them(prod: FakeKube, kube: k.Kube,
                                                                     prod_spec: FleetSpec) -> None:
    assert _result(run_preflight(kube, prod_spec), "batch-jobs", "gput4").status == Status.PASS
    # A fine-tuning Job's GPU pod on the released pool, without the label the policy's podSelector waits for.
    _training_pod(prod, "finetune-7-abcde", T4, {"team": "research"})
    found = _result(run_preflight(kube, prod_spec), "batch-jobs", "gput4")
    assert found.status == Status.FAIL
    assert found.message.startswith("1 batch GPU pod(s) the upgrade would evict mid-run: research/finetune-7-abcde "
                                    "(Job finetune-7); waitForCompletion.podSelector 'workload-class=batch' does not "
                                    "match them")
    # The same pod labelled as the podSelector waits for: the upgrade waits for it.
    prod.update("pods", "finetune-7-abcde", {"metadata": {"labels": {"workload-class": "batch"}}}, "research")
    waited = _result(run_preflight(kube, prod_spec), "batch-jobs", "gput4")
    assert waited.status == Status.PASS and "the upgrade waits for them" in waited.message


def test_batch_jobs_also_finds_pods_of_the_declared_selectors_and_skips_held_pools(prod: FakeKube, kube: k.Kube,
                                                                                  prod_spec: FleetSpec) -> None:
    # A pod no Job owns but that gpuOperator.batchJobSelectors matches, under a policy that waits for another label.
    spec = prod_spec.model_copy(update={"gpuOperator": prod_spec.gpuOperator.model_copy(update={
        "upgradePolicy": prod_spec.gpuOperator.upgradePolicy.model_copy(update={
            "waitForCompletion": prod_spec.gpuOperator.upgradePolicy.waitForCompletion.model_copy(
                update={"podSelector": "queue=nightly"})})})})
    _training_pod(prod, "etl-0", T4, {"workload-class": "batch"}, owner=None)
    found = _result(run_preflight(kube, spec), "batch-jobs", "gput4")
    assert found.status == Status.FAIL and "research/etl-0 (batchJobSelectors 'workload-class=batch')" in found.message
    # A held pool's nodes are not upgraded by this change: a Job there is not at risk now.
    _training_pod(prod, "finetune-8-abcde", A100, {"team": "research"})
    assert _result(run_preflight(kube, spec), "batch-jobs", "gpua100").status == Status.PASS


def test_batch_jobs_warn_where_the_selector_cannot_be_judged(prod: FakeKube, kube: k.Kube,
                                                                            prod_spec: FleetSpec) -> None:
    _training_pod(prod, "finetune-7-abcde", T4, {"team": "research"})
    policy = prod_spec.gpuOperator.upgradePolicy
    set_based = prod_spec.model_copy(update={"gpuOperator": prod_spec.gpuOperator.model_copy(update={
        "upgradePolicy": policy.model_copy(update={"waitForCompletion": policy.waitForCompletion.model_copy(
            update={"podSelector": "team in (research)"})})})})
    unjudged = _result(run_preflight(kube, set_based), "batch-jobs", "gput4")
    assert unjudged.status == Status.WARN and "uses set syntax" in unjudged.message
