"""The adapter against the fake API: pagination, retries, clear errors, never a partial list."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks import kube as k
from checks.errors import AccessDeniedError, ConfigError, GaveUpError
from tests.fakekube.server import Fault, FakeKube


def test_lists_every_page_with_selectors(prod: FakeKube, kube: k.Kube) -> None:
    nodes = kube.list(k.NODES, label_selector="gpu-driver-upgrade.io/pool in (gpua100,gput4)")
    assert len(nodes) == 12  # 8 + 4 nodes over pages of 7
    assert prod.counts["list"] == 2
    running = kube.list(k.PODS, namespace="inference", field_selector="status.phase=Running")
    assert {p["metadata"]["namespace"] for p in running} == {"inference"}
    assert len(running) == 12  # 3 + 4 + 3 + 2 model replicas


def test_retries_throttling_and_server_errors_then_succeeds(prod: FakeKube, kube: k.Kube) -> None:
    prod.faults += [Fault(429, verb="list", plural="nodes"), Fault(500, verb="list", plural="nodes")]
    assert len(kube.list(k.NODES, label_selector="nvidia.com/gpu.present=true")) == 16
    assert prod.counts_by_resource[("list", "nodes")] == 2 + 3  # two refused, then three pages


def test_retries_a_timed_out_request(prod: FakeKube, kube: k.Kube) -> None:
    prod.faults.append(Fault("timeout", verb="list", plural="deployments", delay=1.0))
    assert len(kube.list(k.DEPLOYMENTS)) == 5


def test_honours_retry_after(prod: FakeKube, kubeconfig: Path) -> None:
    waits: list[float] = []
    settings = k.ClientSettings(request_timeout=2, attempts=3, backoff_base=0.01, backoff_cap=5, total_timeout=30)
    adapter = k.connect(str(kubeconfig), settings=settings)
    adapter._sleep = waits.append  # record instead of waiting
    prod.faults.append(Fault(429, verb="list", plural="pods", retry_after=2))
    adapter.list(k.PODS)
    assert waits == [2.0]


def test_gives_up_mid_pagination_instead_of_returning_part(prod: FakeKube, kube: k.Kube) -> None:
    prod.faults.append(Fault(500, verb="list", plural="nodes", skip=1, times=10))  # page 2 always fails
    with pytest.raises(GaveUpError, match="list nodes gave up after 3 attempt"):
        kube.list(k.NODES, label_selector="nvidia.com/gpu.present=true")


def test_forbidden_names_the_missing_permission(prod: FakeKube, kube: k.Kube) -> None:
    prod.faults.append(Fault(403, verb="patch", plural="nodes"))
    with pytest.raises(AccessDeniedError, match="'patch' 'nodes' cluster-wide"):
        kube.patch(k.NODES, "aks-gput4-12345678-vmss000000", {"metadata": {"labels": {"x": "y"}}})
    prod.faults.append(Fault(403, verb="list", plural="pods"))
    with pytest.raises(AccessDeniedError, match="'list' 'pods' in namespace inference"):
        kube.list(k.PODS, namespace="inference")


def test_missing_crd_is_reported_as_absent(prod: FakeKube, kube: k.Kube) -> None:
    prod.served.discard("nvidiadrivers")
    assert kube.list_optional(k.NVIDIA_DRIVERS) is None
    assert [p["metadata"]["name"] for p in kube.list_optional(k.CLUSTER_POLICIES) or []] == ["cluster-policy"]


def test_bad_kubeconfig_and_context_are_config_errors(tmp_path: Path, kubeconfig: Path) -> None:
    with pytest.raises(ConfigError, match="context nope"):
        k.connect(str(kubeconfig), context="nope")
    with pytest.raises(ConfigError):
        k.connect(str(tmp_path / "missing"))


def test_unauthorized_says_the_credentials_were_rejected(prod: FakeKube, kube: k.Kube) -> None:
    prod.faults.append(Fault(401, verb="list", plural="nodes"))
    with pytest.raises(AccessDeniedError, match="credentials were rejected") as raised:
        kube.list(k.NODES)
    assert "RBAC" not in str(raised.value)
