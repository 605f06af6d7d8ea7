"""The fake API keeps the real server's rules our code could trip over; driven through the real client."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client as k8s

from checks import kube as k
from checks.errors import GaveUpError, PermanentError
from tests.fakekube.fixtures import pods_of, set_pod_ready
from tests.fakekube.server import Fault, FakeKube

T4 = "aks-gput4-12345678-vmss000000"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def core(kube: k.Kube) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube.api)


def status_of(exc: pytest.ExceptionInfo) -> int:
    return exc.value.status


# ---------------------------------------------------------------- field selectors


@pytest.mark.parametrize(("resource", "selector"), [
    (k.NODES, "spec.unschedulable=false"),
    (k.NODES, "metadata.name=" + T4),
    (k.PODS, "spec.nodeName=" + T4 + ",status.phase=Running"),
    (k.EVENTS, "involvedObject.kind=Node,reason=GPUDriverUpgrade,type=Normal"),
    (k.PDBS, "metadata.namespace=inference"),
    (k.NVIDIA_DRIVERS, "metadata.name=gpu-gput4"),
])
def test_supported_field_selectors(prod: FakeKube, kube: k.Kube, resource: k.Resource, selector: str) -> None:
    kube.list(resource, field_selector=selector)


@pytest.mark.parametrize(("resource", "selector"), [
    (k.NODES, "status.phase=Running"),
    (k.NODES, "metadata.namespace=default"),
    (k.DEPLOYMENTS, "spec.replicas=3"),
    (k.PDBS, "status.disruptionsAllowed=0"),
    (k.NVIDIA_DRIVERS, "spec.version=580.173.02"),
    (k.NVIDIA_DRIVERS, "metadata.namespace=x"),
])
def test_unsupported_field_selectors_are_refused(prod: FakeKube, kube: k.Kube, resource: k.Resource,
                                                 selector: str) -> None:
    with pytest.raises(PermanentError, match="HTTP 400.*field label not supported"):
        kube.list(resource, field_selector=selector)


def test_unset_fields_select_their_default(prod: FakeKube, kube: k.Kube) -> None:
    assert len(kube.list(k.NODES, field_selector="spec.unschedulable=false")) == 16
    prod.update("nodes", T4, {"spec": {"unschedulable": True}})
    assert [n["metadata"]["name"] for n in kube.list(k.NODES, field_selector="spec.unschedulable=true")] == [T4]


# ---------------------------------------------------------------- patch content types


def test_merge_patch_on_every_kind(prod: FakeKube, kube: k.Kube) -> None:
    kube.patch(k.NVIDIA_DRIVERS, "gpu-gput4", {"metadata": {"labels": {"a": "b"}}})
    assert prod.obj("nvidiadrivers", "gpu-gput4")["metadata"]["labels"]["a"] == "b"


def test_json_patch(prod: FakeKube, kube: k.Kube) -> None:
    ops = [{"op": "test", "path": "/metadata/labels/nvidia.com~1gpu-driver-upgrade-state", "value": "upgrade-done"},
           {"op": "add", "path": "/metadata/labels/x", "value": "1"},
           {"op": "remove", "path": "/metadata/labels/nvidia.com~1gpu.present"}]
    kube.patch(k.NODES, T4, ops, content_type=JSON_PATCH)
    node_labels = prod.obj("nodes", T4)["metadata"]["labels"]
    assert node_labels["x"] == "1" and "nvidia.com/gpu.present" not in node_labels
    with pytest.raises(PermanentError, match="HTTP 422"):  # the test op guards the write
        kube.patch(k.NODES, T4, [{"op": "test", "path": "/metadata/labels/x", "value": "2"},
                                 {"op": "add", "path": "/metadata/labels/y", "value": "1"}], content_type=JSON_PATCH)
    assert "y" not in prod.obj("nodes", T4)["metadata"]["labels"]
    kube.patch(k.NVIDIA_DRIVERS, "gpu-gput4", [{"op": "replace", "path": "/spec/usePrecompiled", "value": True}],
               content_type=JSON_PATCH)
    assert prod.obj("nvidiadrivers", "gpu-gput4")["spec"]["usePrecompiled"] is True


def test_strategic_merge_patch_merges_lists_by_key(prod: FakeKube, kube: k.Kube) -> None:
    body = {"spec": {"taints": [{"key": "maintenance", "value": "driver", "effect": "NoSchedule"}]}}
    kube.patch(k.NODES, T4, body, content_type=STRATEGIC)
    assert [t["key"] for t in prod.obj("nodes", T4)["spec"]["taints"]] == ["nvidia.com/gpu", "maintenance"]
    kube.patch(k.NODES, T4, {"spec": {"taints": [{"key": "maintenance", "$patch": "delete"}]}}, content_type=STRATEGIC)
    assert [t["key"] for t in prod.obj("nodes", T4)["spec"]["taints"]] == ["nvidia.com/gpu"]
    kube.patch(k.NODES, T4, body)  # a merge patch replaces the list
    assert [t["key"] for t in prod.obj("nodes", T4)["spec"]["taints"]] == ["maintenance"]


@pytest.mark.parametrize(("resource", "name", "content_type"), [
    (k.NVIDIA_DRIVERS, "gpu-gput4", STRATEGIC),  # custom resources have no strategic merge
    (k.CLUSTER_POLICIES, "cluster-policy", STRATEGIC),
    (k.NODES, T4, "application/json"),
])
def test_unsupported_patch_types_get_415(prod: FakeKube, kube: k.Kube, resource: k.Resource, name: str,
                                         content_type: str) -> None:
    with pytest.raises(PermanentError, match="HTTP 415"):
        kube.patch(resource, name, {"metadata": {"labels": {"a": "b"}}}, content_type=content_type)


# ---------------------------------------------------------------- create and delete


def test_create_and_delete(prod: FakeKube, kube: k.Kube) -> None:
    api = core(kube)
    body = {"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}
    created = api.create_namespaced_pod("inference", body)
    assert created.metadata.namespace == "inference" and created.metadata.resource_version
    with pytest.raises(k8s.ApiException) as conflict:
        api.create_namespaced_pod("inference", body)
    assert status_of(conflict) == 409
    with pytest.raises(k8s.ApiException) as mismatch:
        api.create_namespaced_pod("batch", {**body, "metadata": {"name": "p2", "namespace": "inference"}})
    assert status_of(mismatch) == 400
    api.delete_namespaced_pod("probe", "inference")
    assert ("inference", "probe") not in prod.store["pods"]
    with pytest.raises(k8s.ApiException) as missing:
        api.delete_namespaced_pod("probe", "inference")
    assert status_of(missing) == 404
    assert prod.counts["create"] == 3 and prod.counts["delete"] == 2


# ---------------------------------------------------------------- eviction


def evict(kube: k.Kube, name: str, namespace: str = "inference") -> None:
    core(kube).create_namespaced_pod_eviction(name, namespace, {"apiVersion": "policy/v1", "kind": "Eviction",
                                                                "metadata": {"name": name, "namespace": namespace}})


def test_eviction_honours_the_budget(prod: FakeKube, kube: k.Kube) -> None:
    pods = pods_of(prod, "inference", {"app": "llm-chat"})  # 3 replicas, minAvailable 2
    evict(kube, pods[0])
    with pytest.raises(k8s.ApiException) as refused:
        evict(kube, pods[1])
    assert status_of(refused) == 429 and "disruption budget" in refused.value.body
    assert len(pods_of(prod, "inference", {"app": "llm-chat"})) == 2


def test_unready_pod_may_go_only_while_the_budget_is_healthy(prod: FakeKube, kube: k.Kube) -> None:
    pods = pods_of(prod, "inference", {"app": "embed-triton"})  # 4 replicas, minAvailable 3
    set_pod_ready(prod, "inference", pods[0], False)  # 3 healthy >= 3 desired: budget healthy
    evict(kube, pods[0])
    set_pod_ready(prod, "inference", pods[1], False)  # 2 healthy < 3: budget unhealthy, 0 allowed
    with pytest.raises(k8s.ApiException) as refused:
        evict(kube, pods[1])
    assert status_of(refused) == 429
    prod.update("poddisruptionbudgets", "embed-triton-pdb", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}},
                "inference")
    evict(kube, pods[1])
    with pytest.raises(k8s.ApiException):
        evict(kube, pods[2])  # a ready pod still needs an allowed disruption


def test_pending_pods_bypass_the_budget_and_two_budgets_refuse(prod: FakeKube, kube: k.Kube) -> None:
    pods = pods_of(prod, "inference", {"app": "llm-chat"})
    prod.update("poddisruptionbudgets", "llm-chat-pdb", {"spec": {"minAvailable": 3}}, "inference")
    prod.update("pods", pods[0], {"status": {"phase": "Pending"}}, "inference")
    evict(kube, pods[0])
    prod.add({"kind": "PodDisruptionBudget", "metadata": {"name": "all", "namespace": "inference"},
              "spec": {"selector": {}, "maxUnavailable": "100%"}})
    with pytest.raises(k8s.ApiException) as two:
        evict(kube, pods[1])
    assert status_of(two) == 500 and "more than one PodDisruptionBudget" in two.value.body


def test_pdb_status_rounds_max_unavailable_up(prod: FakeKube) -> None:
    prod.update("poddisruptionbudgets", "llm-chat-pdb", {"spec": {"minAvailable": None, "maxUnavailable": "10%"}},
                "inference")
    status = prod.obj("poddisruptionbudgets", "llm-chat-pdb", "inference")["status"]
    assert (status["desiredHealthy"], status["disruptionsAllowed"]) == (2, 1)


# ---------------------------------------------------------------- paging and continue tokens


def test_pages_come_from_one_snapshot(prod: FakeKube, kube: k.Kube) -> None:
    added = []

    def write_between_pages(verb: str, plural: str, query: dict) -> None:
        if verb == "list" and plural == "nodes" and query.get("continue") and not added:
            added.append(prod.add({"kind": "Node", "metadata": {"name": "aaa-new", "labels": {
                "nvidia.com/gpu.present": "true"}}}))
            prod.remove("nodes", "aks-gput4-12345678-vmss000003")

    prod.hooks.append(write_between_pages)
    names = [n["metadata"]["name"] for n in kube.list(k.NODES, label_selector="nvidia.com/gpu.present=true")]
    assert len(names) == 16 and "aaa-new" not in names and "aks-gput4-12345678-vmss000003" in names


def test_an_expired_continue_token_restarts_the_list_once(prod: FakeKube, kube: k.Kube) -> None:
    compactions = []

    def compact_once(verb: str, plural: str, query: dict) -> None:
        if verb == "list" and query.get("continue") and not compactions:
            compactions.append(1)
            prod.add({"kind": "Node", "metadata": {"name": "aaa-new", "labels": {"nvidia.com/gpu.present": "true"}}})
            prod.compact()

    prod.hooks.append(compact_once)
    names = [n["metadata"]["name"] for n in kube.list(k.NODES, label_selector="nvidia.com/gpu.present=true")]
    assert len(names) == 17 == len(set(names)) and "aaa-new" in names  # the fresh list, never spliced
    assert prod.counts["list"] == 1 + 1 + 3  # page 1, the refused page 2, then three pages again


def test_a_list_that_keeps_expiring_gives_up(prod: FakeKube, kube: k.Kube) -> None:
    prod.hooks.append(lambda verb, plural, query: prod.compact() if query.get("continue") else None)
    with pytest.raises(GaveUpError, match="changed too fast"):
        kube.list(k.NODES, label_selector="nvidia.com/gpu.present=true")


# ---------------------------------------------------------------- faults


def test_retry_after_comes_from_the_fault_that_fired(prod: FakeKube, kubeconfig: Path) -> None:
    waits: list[float] = []
    settings = k.ClientSettings(request_timeout=2, attempts=3, backoff_base=0.01, backoff_cap=0.05, total_timeout=30)
    adapter = k.Kube(k.connect(str(kubeconfig), settings=settings).api, settings, sleep=waits.append)
    prod.faults += [Fault(429, verb="list", plural="nodes", retry_after=7), Fault(503, verb="list", plural="pods",
                                                                                   retry_after=3)]
    adapter.list(k.PODS, namespace="inference")
    assert waits == [3.0]  # the pods fault's own Retry-After, not the first fault's in the list


def test_retry_after_longer_than_the_cap_is_honoured(prod: FakeKube, kubeconfig: Path) -> None:
    waits: list[float] = []
    settings = k.ClientSettings(request_timeout=2, attempts=3, backoff_base=0.01, backoff_cap=0.05, total_timeout=30)
    adapter = k.Kube(k.connect(str(kubeconfig), settings=settings).api, settings, sleep=waits.append)
    prod.faults.append(Fault(429, verb="list", plural="nodes", retry_after=12))
    adapter.list(k.NODES)
    assert waits == [12.0]
    prod.faults.append(Fault(429, verb="list", plural="nodes", retry_after=60))  # past total_timeout: give up
    with pytest.raises(GaveUpError):
        adapter.list(k.NODES)
