"""The Eviction API against a PDB the canary stack rendered: what the operator's drain meets on a real cluster."""

from __future__ import annotations

from tests.e2e import fleet
from tests.e2e.conftest import ready, wait_for
from tests.e2e.controlplane import Rest
from tests.e2e.pulumi_cli import Result

NAMESPACE = fleet.MODEL_NAMESPACE
PDB = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/llm-chat-canary-pdb"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/llm-chat-canary"
SELECTOR = "app=llm-chat,track=canary"


def canary_pods(rest: Rest) -> list[dict]:
    pods = rest.items(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={SELECTOR}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def evict(rest: Rest, pod: dict) -> tuple[int, dict]:
    name = pod["metadata"]["name"]
    return rest.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NAMESPACE},
    })


def pdb_status(rest: Rest, expected_pods: int, healthy: int) -> dict | None:
    status = rest.get(PDB).get("status") or {}
    generation = rest.get(PDB)["metadata"]["generation"]
    if (status.get("expectedPods"), status.get("currentHealthy"), status.get("observedGeneration")) == (
            expected_pods, healthy, generation):
        return status
    return None


def test_eviction_is_refused_when_the_pdb_allows_no_disruption_and_allowed_when_it_does(
    canary_up: Result, cluster: Rest
) -> None:
    assert cluster.get(PDB)["spec"]["minAvailable"] == 1  # as rendered: one of the two replicas must stay

    # One replica left (the other moved away): minAvailable 1 of 1 allows no disruption.
    cluster.merge_patch(DEPLOYMENT, {"spec": {"replicas": 1}})
    try:
        status = wait_for("the PDB to count one healthy pod", lambda: pdb_status(cluster, 1, 1))
        assert status["disruptionsAllowed"] == 0
        [pod] = wait_for("one canary pod", lambda: p if len(p := canary_pods(cluster)) == 1 else None)
        code, answer = evict(cluster, pod)
        assert code == 429, answer
        assert "disruption budget" in answer.get("message", ""), answer
        assert cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}")  # still there
    finally:
        cluster.merge_patch(DEPLOYMENT, {"spec": {"replicas": 2}})

    # Back to two Ready replicas: one disruption allowed, so the eviction goes through.
    status = wait_for("the PDB to count two healthy pods", lambda: pdb_status(cluster, 2, 2))
    assert status["disruptionsAllowed"] == 1
    pods = canary_pods(cluster)
    assert len(pods) == 2 and all(map(ready, pods))
    code, answer = evict(cluster, pods[0])
    assert code == 201, answer
    wait_for("the evicted pod to be gone", lambda: pods[0]["metadata"]["name"] not in {
        p["metadata"]["name"] for p in cluster.items(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={SELECTOR}")})
    # The Deployment replaces it and the PDB recovers.
    wait_for("the canary model back to two Ready pods", lambda: (
        len(p := canary_pods(cluster)) == 2 and all(map(ready, p))))
    wait_for("the PDB to recover", lambda: pdb_status(cluster, 2, 2))
