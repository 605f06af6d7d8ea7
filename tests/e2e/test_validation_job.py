"""The validation job's identity on the real API server (issue 10 point 1): after the canary's `pulumi up`,
its ServiceAccount may patch nodes and do nothing else (access reviews and its bindings), and the admission
policy the program declares confines a patch to the node the pod runs on and to the job's own keys.

The API server's own authorizer and admission answer here, not a model of them: the test impersonates the
ServiceAccount (with the node-name claim a pod-bound token carries) through the admin credential.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from components import validation
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import TOKEN, ControlPlane, Rest
from workload import result

NAMESPACE = "gpu-validation-canary"  # validation.namespace_name of the canary stage
USER = f"system:serviceaccount:{NAMESPACE}:{validation.SERVICE_ACCOUNT}"
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]


def _review(rest: Rest, verb: str, resource: str, *, group: str = "", namespace: str = "",
            subresource: str = "") -> bool:
    attributes = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attributes["namespace"] = namespace
    if subresource:
        attributes["subresource"] = subresource
    answer = rest.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": USER, "groups": GROUPS, "resourceAttributes": attributes},
    })
    return bool(answer["status"].get("allowed"))


def test_the_service_account_may_patch_nodes_and_nothing_else(canary_up, cluster: Rest) -> None:
    assert _review(cluster, "patch", "nodes")
    denied = [
        ("get", "nodes", "", "", ""), ("list", "nodes", "", "", ""), ("update", "nodes", "", "", ""),
        ("delete", "nodes", "", "", ""), ("patch", "nodes", "", "", "status"),
        ("list", "pods", "", "", ""), ("create", "pods", "", NAMESPACE, "eviction"),
        ("get", "secrets", "", NAMESPACE, ""), ("get", "configmaps", "", NAMESPACE, ""),
        ("patch", "nvidiadrivers", "nvidia.com", "", ""), ("patch", "clusterpolicies", "nvidia.com", "", ""),
        ("create", "serviceaccounts", "", NAMESPACE, "token"), ("impersonate", "users", "", "", ""),
    ]
    allowed = [d for d in denied if _review(cluster, d[0], d[1], group=d[2], namespace=d[3], subresource=d[4])]
    assert allowed == []
    # Its only binding is the program's, to a role with exactly the one rule.
    bindings = [
        b for b in cluster.items("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings")
        + cluster.items("/apis/rbac.authorization.k8s.io/v1/rolebindings")
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == validation.SERVICE_ACCOUNT
               and s.get("namespace") == NAMESPACE for s in b.get("subjects") or [])
    ]
    assert [b["metadata"]["name"] for b in bindings] == ["gpu-driver-upgrade-validation-canary"]
    role = cluster.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{bindings[0]['roleRef']['name']}")
    assert role["rules"] == validation.cluster_role_rules()
    account = cluster.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{validation.SERVICE_ACCOUNT}")
    assert account.get("automountServiceAccountToken") is False


def _patch_as_the_job(control_plane: ControlPlane, node: str, body: dict, on_node: str) -> tuple[int, str]:
    """A merge patch of ``node`` as the job's pod on ``on_node`` sends it (impersonated)."""
    headers = {
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/merge-patch+json",
        "Accept": "application/json", "Impersonate-User": USER,
        f"Impersonate-Extra-{urllib.parse.quote(validation.NODE_NAME_CLAIM, safe='')}": on_node,
    }
    # The binding names the ServiceAccount's user; the API server adds system:authenticated itself.
    request = urllib.request.Request(f"{control_plane.server}/api/v1/nodes/{node}", method="PATCH",
                                     data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=control_plane.ssl_context()) as response:  # noqa: S310
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _canary_nodes(cluster: Rest) -> tuple[str, str]:
    nodes = cluster.items("/api/v1/nodes")
    canary = [n["metadata"]["name"] for n in nodes
              if (n["metadata"].get("labels") or {}).get("gpu.example.com/pool") == "l40s-canary"]
    other = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] not in canary]
    assert canary and other
    return canary[0], other[0]


@pytest.mark.parametrize(("what", "body", "refusal"), [
    ("another node's result", None, "only the node its pod runs on"),
    ("another label", {"metadata": {"labels": {"team": "ml"}}}, "only its own node labels"),
    ("another annotation", {"metadata": {"annotations": {"note": "x"}}}, "only its result annotations"),
    ("the node's spec", {"spec": {"unschedulable": True}}, "may not change a node's spec"),
])
def test_the_admission_policy_confines_the_job_to_its_node_and_keys(
    canary_up, cluster: Rest, control_plane: ControlPlane, what: str, body: dict | None, refusal: str,
) -> None:
    own, other = _canary_nodes(cluster)
    own_result = {"metadata": {"labels": {result.LABEL_OUTCOME: "passed"}}}
    # Its own result on its own node passes, once the policy is in force (the API server loads it async).
    seen: list[tuple[int, str]] = []

    def own_patch_passes() -> bool:
        seen.append(_patch_as_the_job(control_plane, own, own_result, own))
        return seen[-1][0] == 200

    try:
        wait_for("the validation job's own patch", own_patch_passes, timeout=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {seen[-1]}") from None
    target, patch = (other, own_result) if body is None else (own, body)

    def refused() -> tuple[int, str] | None:
        status, text = _patch_as_the_job(control_plane, target, patch, own)
        return (status, text) if status != 200 else None

    status, text = wait_for(f"the refusal of {what}", refused)
    assert status in (403, 422) and refusal in text, (status, text)
