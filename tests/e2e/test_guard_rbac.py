"""The in-cluster guard's identity on the real API server (issue 35, point 2): after the prod stack's `pulumi up`,
which declares the guard (on by default in prod), its ServiceAccount may do what the guard's process needs and
nothing beyond it (access reviews of the API server's own authorizer), and the admission policy the program
declares refuses a node patch outside the pause label, the pause annotations and the guard's own annotations.
The Deployment itself became available on the kwok CPU nodes, away from every GPU node.

The ServiceAccount is impersonated through the admin credential: its RBAC and the admission policy answer as
they would for the pod's token.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from components import guard
from gpu_knowledge import labels
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import ControlPlane, Rest, impersonated_patch

NAMESPACE = "gpu-rollout-guard"  # guard.namespace's default
USER = f"system:serviceaccount:{NAMESPACE}:{guard.NAME}"
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]
NODE = "gpu-l40s-s01"  # a prod GPU node of the e2e fleet (tests/e2e/fleet.py)

# (verb, resource, group, namespace, subresource, name): what the process needs (the contract of issue 35).
ALLOWED = [
    ("get", "nodes", "", "", "", ""), ("list", "nodes", "", "", "", ""), ("watch", "nodes", "", "", "", ""),
    ("patch", "nodes", "", "", "", ""),
    ("list", "pods", "", "", "", ""), ("watch", "pods", "", "", "", ""),
    ("create", "pods", "", "inference", "eviction", ""),
    ("list", "poddisruptionbudgets", "policy", "", "", ""), ("watch", "poddisruptionbudgets", "policy", "", "", ""),
    ("list", "nvidiadrivers", "nvidia.com", "", "", ""), ("watch", "clusterpolicies", "nvidia.com", "", "", ""),
    ("list", "deployments", "apps", "", "", ""),
    ("create", "events", "", "default", "", ""), ("create", "events", "events.k8s.io", "default", "", ""),
    ("get", "leases", "coordination.k8s.io", NAMESPACE, "", guard.NAME),
    ("update", "leases", "coordination.k8s.io", NAMESPACE, "", guard.NAME),
    ("create", "leases", "coordination.k8s.io", NAMESPACE, "", ""),
    ("get", "leases", "coordination.k8s.io", "kube-system", "", "gpu-driver-upgrade-fleet"),
    ("update", "leases", "coordination.k8s.io", "kube-system", "", "gpu-driver-upgrade-fleet"),
    ("create", "leases", "coordination.k8s.io", "kube-system", "", ""),
    ("list", "configmaps", "", "kube-system", "", ""), ("get", "namespaces", "", "", "", "kube-system"),
    # existing-prod reads Prometheus through the API server (validation.prometheus): that one Service's proxy.
    ("create", "services", "", "monitoring", "proxy", "prometheus-k8s:9090"),
]
DENIED = [
    ("update", "nodes", "", "", "", ""), ("delete", "nodes", "", "", "", ""),
    ("patch", "nodes", "", "", "status", ""),
    ("create", "pods", "", "inference", "", ""), ("delete", "pods", "", "inference", "", ""),
    ("patch", "pods", "", "inference", "", ""), ("create", "pods", "", "inference", "exec", ""),
    ("get", "secrets", "", NAMESPACE, "", ""), ("list", "secrets", "", "", "", ""),
    ("update", "deployments", "apps", "inference", "", ""), ("delete", "poddisruptionbudgets", "policy", "inference", "", ""),
    ("patch", "nvidiadrivers", "nvidia.com", "", "", ""), ("patch", "clusterpolicies", "nvidia.com", "", "", ""),
    ("delete", "events", "", "default", "", ""),
    ("update", "leases", "coordination.k8s.io", "kube-system", "", "kube-controller-manager"),
    ("delete", "leases", "coordination.k8s.io", "kube-system", "", "gpu-driver-upgrade-fleet"),
    ("create", "leases", "coordination.k8s.io", "default", "", ""),
    ("update", "leases", "coordination.k8s.io", NAMESPACE, "", "another-lease"),
    ("create", "configmaps", "", "kube-system", "", ""), ("update", "configmaps", "", "kube-system", "", ""),
    ("get", "namespaces", "", "", "", "default"), ("list", "namespaces", "", "", "", ""),
    ("create", "services", "", "monitoring", "proxy", "alertmanager:9093"),  # another Service of its namespace
    ("create", "services", "", "inference", "proxy", "prometheus-k8s:9090"),  # the same name elsewhere
    ("create", "serviceaccounts", "", NAMESPACE, "token", ""), ("impersonate", "users", "", "", "", ""),
    ("bind", "clusterroles", "rbac.authorization.k8s.io", "", "", ""),
    ("escalate", "clusterroles", "rbac.authorization.k8s.io", "", "", ""),
    ("create", "validatingadmissionpolicybindings", "admissionregistration.k8s.io", "", "", ""),
]


def _review(rest: Rest, verb: str, resource: str, group: str, namespace: str, subresource: str, name: str) -> bool:
    attributes = {"verb": verb, "resource": resource, "group": group}
    for key, value in (("namespace", namespace), ("subresource", subresource), ("name", name)):
        if value:
            attributes[key] = value
    answer = rest.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": USER, "groups": GROUPS, "resourceAttributes": attributes},
    })
    return bool(answer["status"].get("allowed"))


def test_the_guard_may_do_what_its_process_needs_and_nothing_beyond(prod_up, cluster: Rest) -> None:
    refused = [a for a in ALLOWED if not _review(cluster, *a)]
    assert refused == []
    granted = [d for d in DENIED if _review(cluster, *d)]
    assert granted == []
    # Its only bindings are the program's: the ClusterRole's and a Role's in its namespace, in kube-system and
    # in Prometheus's.
    bindings = [
        (kind, b["metadata"].get("namespace", ""), b["roleRef"]["name"])
        for kind, path in (("ClusterRoleBinding", "clusterrolebindings"), ("RoleBinding", "rolebindings"))
        for b in cluster.items(f"/apis/rbac.authorization.k8s.io/v1/{path}")  # a list's items carry no kind
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == guard.NAME and s.get("namespace") == NAMESPACE
               for s in b.get("subjects") or [])
    ]
    role = "gpu-driver-upgrade-guard-prod"
    assert sorted(bindings) == [("ClusterRoleBinding", "", role), ("RoleBinding", NAMESPACE, role),
                                ("RoleBinding", "kube-system", role), ("RoleBinding", "monitoring", role)]


def test_its_deployment_runs_on_the_cpu_nodes_only(prod_up, cluster: Rest) -> None:
    deployment = cluster.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{guard.NAME}")
    assert deployment["status"].get("availableReplicas") == 2  # `pulumi up` waited for it
    pods = cluster.items(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io%2Fname%3D{guard.NAME}")
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["cpu-01", "cpu-02"]  # one per node, never a GPU node


def _patch_as_the_guard(control_plane: ControlPlane, body: dict) -> tuple[int, str]:
    return impersonated_patch(control_plane, f"/api/v1/nodes/{NODE}", body, {"Impersonate-User": USER})


PAUSE = {"metadata": {"labels": {labels.SKIP_UPGRADE: "true"}, "annotations": {
    labels.ANNOTATION_PAUSED_BY: "existing-prod", labels.ANNOTATION_PAUSED_REASON: "e2e: upgrade-failed"}}}
OWN_NOTE = f"{labels.GUARD_ANNOTATION_PREFIX}seen"


@pytest.fixture
def node_restored(cluster: Rest) -> Iterator[None]:
    """Whatever a test wrote on the node is taken off again (by the admin), so no other test sees a pause."""
    yield
    cluster.merge_patch(f"/api/v1/nodes/{NODE}", {"metadata": {
        "labels": {labels.SKIP_UPGRADE: None, "team": None},
        "annotations": {labels.ANNOTATION_PAUSED_BY: None, labels.ANNOTATION_PAUSED_REASON: None, OWN_NOTE: None,
                        "note": None}}, "spec": {"unschedulable": None}})


@pytest.mark.parametrize(("what", "body", "refusal"), [
    ("another label", {"metadata": {"labels": {"team": "ml"}}}, "only the pause label"),
    ("another annotation", {"metadata": {"annotations": {"note": "x"}}}, "only the pause annotations"),
    ("a cordon", {"spec": {"unschedulable": True}}, "may not change a node's spec"),
    ("the pause with another label", {"metadata": {"labels": {labels.SKIP_UPGRADE: "true", "team": "ml"}}},
     "only the pause label"),
])
def test_the_admission_policy_refuses_a_node_patch_outside_the_pause(
    prod_up, cluster: Rest, control_plane: ControlPlane, node_restored, what: str, body: dict, refusal: str,
) -> None:
    # The pause and the guard's own annotation pass, once the policy is in force (the API server loads it async).
    seen: list[tuple[int, str]] = []

    def pause_passes() -> bool:
        seen.append(_patch_as_the_guard(control_plane, {**PAUSE, "metadata": {
            **PAUSE["metadata"], "annotations": {**PAUSE["metadata"]["annotations"], OWN_NOTE: "1"}}}))
        return seen[-1][0] == 200

    try:
        wait_for("the guard's pause", pause_passes, timeout=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {seen[-1]}") from None

    def refused() -> tuple[int, str] | None:
        status, text = _patch_as_the_guard(control_plane, body)
        return (status, text) if status != 200 else None

    status, text = wait_for(f"the refusal of {what}", refused)
    assert status in (403, 422) and refusal in text, (status, text)
    node = cluster.get(f"/api/v1/nodes/{NODE}")
    assert "team" not in node["metadata"]["labels"] and not node["spec"].get("unschedulable")
