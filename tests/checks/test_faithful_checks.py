"""The preflight checks issue 23 made faithful, on the fake prod cluster: kernel-precompiled judges the target
branch on the nodes' kernel and OS (and, building, whether a driver pod built against the kernel), readiness-probe
asks a model server's own health route, dcgm-exporter compares DCGM with the target branch, and spare-capacity
counts what the validation job holds."""

from __future__ import annotations

from checks import kube as k
from checks.precompiled import os_tag
from checks.preflight import run_preflight
from checks.results import Status
from fleetspec.model import FleetSpec
from tests.fakekube.server import FakeKube

T4_NODES = "aks-gput4-12345678-vmss"
KERNEL = "5.15.0-1079-azure"


def _results(kube: k.Kube, spec: FleetSpec, check_id: str, subject: str) -> list:
    return [r for r in run_preflight(kube, spec) if r.id == check_id and r.subject == subject]


def _only(kube: k.Kube, spec: FleetSpec, check_id: str, subject: str):
    (found,) = _results(kube, spec, check_id, subject)
    return found


def _set_probe(fake: FakeKube, model: str, probe_kind: str, probe: dict | None) -> None:
    deployment = fake.obj("deployments", model, "inference")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    containers[0].pop(probe_kind, None)
    if probe is not None:
        containers[0][probe_kind] = probe
    fake.update("deployments", model, {"spec": {"template": {"spec": {"containers": containers}}}}, "inference")


# ---------------------------------------------------------------- readiness-probe


def test_a_tcp_probe_on_a_model_server_fails(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _set_probe(prod, "llm-chat", "readinessProbe", {"tcpSocket": {"port": 8000}})
    found = _only(kube, prod_spec, "readiness-probe", "inference/llm-chat")
    assert found.status == Status.FAIL and "only a TCP probe: it passes once the port is open" in found.message


def test_another_path_warns_and_the_engines_route_passes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _set_probe(prod, "embed-triton", "readinessProbe", {"httpGet": {"path": "/health", "port": 8000}})
    found = _only(kube, prod_spec, "readiness-probe", "inference/embed-triton")
    assert found.status == Status.WARN and "probe GET /v2/health/ready" in found.message
    # A startup probe on the route gates readiness until the model is loaded; Triton also serves gRPC health.
    _set_probe(prod, "embed-triton", "startupProbe", {"httpGet": {"path": "/v2/models/embed/ready", "port": 8000}})
    assert _only(kube, prod_spec, "readiness-probe", "inference/embed-triton").status == Status.PASS
    _set_probe(prod, "embed-triton", "readinessProbe", {"grpc": {"port": 8001}})
    assert _only(kube, prod_spec, "readiness-probe", "inference/embed-triton").status == Status.PASS
    _set_probe(prod, "llm-chat", "readinessProbe", {"grpc": {"port": 8001}})  # vLLM serves no gRPC health
    assert _only(kube, prod_spec, "readiness-probe", "inference/llm-chat").status == Status.WARN


# ---------------------------------------------------------------- kernel-precompiled


def _precompiled(fake: FakeKube, tag: str | None) -> None:
    """gput4's NVIDIADriver on precompiled images; with ``tag``, the operator runs that image for its kernel."""
    fake.update("nvidiadrivers", "gpu-gput4", {"spec": {"usePrecompiled": True}})
    if tag is not None:
        labels_ = {"app": "nvidia-gpu-driver-precompiled", "nvidia.com/precompiled": "true",
                   "app.kubernetes.io/component": "nvidia-driver"}
        fake.add({"kind": "DaemonSet", "metadata": {"name": "nvidia-gpu-driver-precompiled", "namespace": "gpu-operator",
                                                   "labels": labels_},
                  "spec": {"selector": {"matchLabels": labels_}, "template": {"metadata": {"labels": labels_}, "spec": {
                      "nodeSelector": {"feature.node.kubernetes.io/kernel-version.full": KERNEL},
                      "containers": [{"name": "nvidia-driver-ctr", "image": f"nvcr.io/nvidia/driver:{tag}"}]}}}})


def _kernel_of_t4(fake: FakeKube) -> None:
    for node in fake.objects("nodes"):
        assert node["status"]["nodeInfo"]["kernelVersion"] == KERNEL  # what the fixture seeds, every node


def test_precompiled_of_another_branch_running_is_no_pass_without_the_registry(
        prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    """Preflight given no registry to ask (tests/checks/test_precompiled_registry.py asks one) cannot tell."""
    _kernel_of_t4(prod)
    _precompiled(prod, f"570-{KERNEL}-ubuntu22.04")  # what runs now: the previous branch
    found = _only(kube, prod_spec, "kernel-precompiled", "gput4")
    assert found.status == Status.WARN
    assert f"kernel {KERNEL}: nvcr.io/nvidia/driver:580-{KERNEL}-ubuntu22.04: the registry was not asked" in found.message


def test_precompiled_of_the_target_branch_running_passes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    _precompiled(prod, f"580-{KERNEL}-ubuntu22.04")
    found = _only(kube, prod_spec, "kernel-precompiled", "gput4")
    assert found.status == Status.PASS and f"580-{KERNEL}-ubuntu22.04 (running)" in found.message


def test_building_needs_headers_shown_by_a_driver_pod_that_built(prod: FakeKube, kube: k.Kube,
                                                                  prod_spec: FleetSpec) -> None:
    assert _only(kube, prod_spec, "kernel-precompiled", "gput4").status == Status.PASS
    for p in prod.objects("pods"):
        driver_pod = p["metadata"]["labels"].get("app.kubernetes.io/component") == "nvidia-driver"
        if driver_pod and T4_NODES in p["spec"]["nodeName"]:
            prod.update("pods", p["metadata"]["name"], {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                        p["metadata"]["namespace"])
    found = _only(kube, prod_spec, "kernel-precompiled", "gput4")
    assert found.status == Status.WARN and f"linux-headers-{KERNEL}" in found.message


def test_the_os_part_of_a_driver_tag() -> None:
    assert os_tag("Ubuntu 22.04.5 LTS") == "ubuntu22.04" and os_tag("Ubuntu 24.04.1 LTS") == "ubuntu24.04"
    assert os_tag("Red Hat Enterprise Linux 9.4 (Plow)") == "rhel9"
    assert os_tag("Amazon Linux 2023.6.20241010") is None


# ---------------------------------------------------------------- dcgm-exporter


def _exporter(fake: FakeKube, tag: str) -> None:
    """The operator's DCGM Exporter (the fake prod cluster runs the declared one) moved to ``tag``."""
    fake.update("daemonsets", "nvidia-dcgm-exporter", {"spec": {"template": {"spec": {"containers": [
        {"name": "exporter", "image": f"nvcr.io/nvidia/k8s/dcgm-exporter:{tag}"}]}}}}, "gpu-operator")


def _declaring(spec: FleetSpec, tag: str | None) -> FleetSpec:
    return spec.model_copy(update={"gpuOperator": spec.gpuOperator.model_copy(update={"dcgmExporterVersion": tag})})


def test_the_dcgm_exporter_is_judged_against_the_target_branch(prod: FakeKube, kube: k.Kube,
                                                               prod_spec: FleetSpec) -> None:
    image = "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"
    _exporter(prod, "4.6.0-4.8.3-distroless")
    found = _only(kube, _declaring(prod_spec, "4.6.0-4.8.3-distroless"), "dcgm-exporter", image)
    assert found.status == Status.PASS and "at least 4.3.1, which GPU Operator 25.3.3 ships with R580" in found.message


def test_a_running_dcgm_exporter_other_than_the_declared_one_fails(prod: FakeKube, kube: k.Kube,
                                                                    prod_spec: FleetSpec) -> None:
    """The pack judged the declared exporter: one that differs on the cluster is a failure naming both tags."""
    _exporter(prod, "4.6.0-4.8.3-distroless")
    found = _only(kube, _declaring(prod_spec, "4.4.1-4.6.0-ubuntu22.04"), "dcgm-exporter",
                  "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless")
    assert found.status == Status.FAIL
    assert "'4.6.0-4.8.3-distroless'" in found.message and "gpuOperator.dcgmExporterVersion '4.4.1-4.6.0-ubuntu22.04'" \
        in found.message


def test_a_declared_dcgm_exporter_that_does_not_run_warns(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod.remove("daemonsets", "nvidia-dcgm-exporter", "gpu-operator")
    (found,) = [r for r in run_preflight(kube, _declaring(prod_spec, "4.4.1-4.6.0-ubuntu22.04"))
                if r.id == "dcgm-exporter"]
    assert found.status == Status.WARN and "none runs on the cluster" in found.message


def test_an_old_or_unreadable_dcgm_exporter_warns(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    prod_spec = _declaring(prod_spec, None)
    _exporter(prod, "4.2.3-4.1.3-ubuntu22.04")
    found = _only(kube, prod_spec, "dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04")
    assert found.status == Status.WARN and "older than any DCGM a GPU Operator release listing R580 ships" in found.message
    assert "declares no gpuOperator.dcgmExporterVersion" in found.message
    prod.update("daemonsets", "nvidia-dcgm-exporter", {"spec": {"template": {"spec": {"containers": [
        {"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:latest"}]}}}}, "gpu-operator")
    found = _only(kube, prod_spec, "dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:latest")
    assert found.status == Status.WARN and "cannot read DCGM's version" in found.message


# ---------------------------------------------------------------- spare-capacity counts the validation job


def test_spare_capacity_counts_the_node_the_validation_job_holds(prod: FakeKube, kube: k.Kube,
                                                                 prod_spec: FleetSpec) -> None:
    # gput4: 4 nodes of 4 GPUs, rerank-sglang holds 2: 14 spare, enough for one node out and the job's 4.
    assert prod_spec.validation_gpus(prod_spec.pool("gput4")) == 4
    found = _only(kube, prod_spec, "spare-capacity", "gput4")
    assert found.status == Status.PASS and "vs largest node 4 + 4 held by the validation job" in found.message
    without = prod_spec.model_copy(update={"validation": None})
    found = _only(kube, without, "spare-capacity", "gput4")
    assert found.status == Status.PASS and "held by the validation job" not in found.message


# ---------------------------------------------------------------- spare-capacity by the pool's own upgrade policy


def _with_pool_policy(spec: FleetSpec, pool: str, **keys: object) -> FleetSpec:
    """``spec`` with ``nodePools[pool].upgradePolicy`` set, through the model (so its checks run)."""
    config = spec.model_dump(mode="json", exclude_unset=True)
    next(p for p in config["nodePools"] if p["name"] == pool)["upgradePolicy"] = keys
    return FleetSpec.model_validate(config)


def test_spare_capacity_judges_each_pool_by_its_own_upgrade_policy(prod: FakeKube, kube: k.Kube,
                                                                    prod_spec: FleetSpec) -> None:
    # gput4: 4 nodes of 4 GPUs, rerank-sglang 2 replicas keeping 1: 14 spare. Two nodes at once with the job's
    # two: 16 GPUs out, more than spare; rerank-sglang could lose both replicas.
    assert _only(kube, prod_spec, "spare-capacity", "gput4").status == Status.PASS
    spec = _with_pool_policy(prod_spec, "gput4", maxParallelUpgrades=2, maxUnavailable=2)
    found = _only(kube, spec, "spare-capacity", "gput4")
    assert found.status == Status.FAIL
    assert "x 2 at once (nodePools[].upgradePolicy: maxParallelUpgrades 2, maxUnavailable 2)" in found.message
    assert "taking 2 nodes out can drop inference/rerank-sglang below minAvailable" in found.message
    # The other pools are judged by the stack's policy, one node at a time, as before.
    assert _only(kube, spec, "spare-capacity", "gpuh100") == _only(kube, prod_spec, "spare-capacity", "gpuh100")
