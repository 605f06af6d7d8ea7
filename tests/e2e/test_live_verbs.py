"""`gpu-rollout preflight`, `pause`, `resume` and `watch --once` against the test cluster's API server, after
the stacks' `pulumi up` (which wrote the cluster-identity records the live verbs check)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.e2e import fleet
from tests.e2e.controlplane import Rest
from tests.e2e.pulumi_cli import CHECKOUT, Result

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
STATE = "nvidia.com/gpu-driver-upgrade-state"
NEW_DRIVER = "580.173.02"  # the stacks' driver.version


def gpu_rollout(project: Path, verb: str, stack: str, *extra: str) -> tuple[int, dict, str]:
    """`gpu-rollout VERB --stack STACK --json` on the test project; (exit code, JSON document, stderr)."""
    proc = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "rollout", verb, "--stack", stack, "--project-dir", str(project), "--json", *extra],
        cwd=CHECKOUT, capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(project), "KUBECONFIG": str(project / "no-such-kubeconfig")},
    )
    try:
        document = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except ValueError:
        raise AssertionError(f"gpu-rollout {verb}: not JSON:\n{proc.stdout}\n{proc.stderr}") from None
    return proc.returncode, document, proc.stderr


def node_labels(rest: Rest) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in rest.items("/api/v1/nodes")}


def pool_nodes(pool: str) -> set[str]:
    return set(fleet.node_names(next(p for p in fleet.POOLS if p.name == pool)))


@pytest.fixture
def live(canary_up: Result, prod_up: Result, cluster: Rest) -> Iterator[Rest]:
    """Both stacks are up; every node's labels, annotations and schedulability are restored afterwards."""
    before = {n["metadata"]["name"]: n for n in cluster.items("/api/v1/nodes")}
    yield cluster
    for name, node in before.items():
        now = cluster.get(f"/api/v1/nodes/{name}")
        meta = {}
        for field in ("labels", "annotations"):
            old, new = node["metadata"].get(field) or {}, now["metadata"].get(field) or {}
            patch = {k: v for k, v in old.items() if new.get(k) != v}
            patch.update({k: None for k in new if k not in old})
            if patch:
                meta[field] = patch
        body: dict = {"metadata": meta} if meta else {}
        if bool(now["spec"].get("unschedulable")) != bool(node["spec"].get("unschedulable")):
            body["spec"] = {"unschedulable": node["spec"].get("unschedulable")}
        if body:
            cluster.merge_patch(f"/api/v1/nodes/{name}", body)


def test_preflight_passes_on_the_healthy_fleet(live: Rest, project: Path) -> None:
    for stack in ("existing-canary", "existing-prod"):
        code, document, stderr = gpu_rollout(project, "preflight", stack)
        failed = [c for c in document.get("checks", []) if c.get("status") == "fail"]
        assert code == 0 and not failed, json.dumps(failed or document, indent=1) + stderr
        assert document["checks"], stderr


def test_preflight_fails_when_a_model_pod_is_not_ready(live: Rest, project: Path) -> None:
    """Not only a pass: the same run fails once the canary model has only unhealthy capacity left."""
    live.merge_patch(f"/apis/apps/v1/namespaces/{fleet.MODEL_NAMESPACE}/deployments/llm-chat-canary",
                     {"spec": {"replicas": 1}})
    try:
        def settled() -> bool:
            pdb = live.get(f"/apis/policy/v1/namespaces/{fleet.MODEL_NAMESPACE}"
                           "/poddisruptionbudgets/llm-chat-canary-pdb")
            return (pdb.get("status") or {}).get("expectedPods") == 1
        _wait(settled)
        code, document, stderr = gpu_rollout(project, "preflight", "existing-canary")
        failed = {c["id"] for c in document.get("checks", []) if c.get("status") == "fail"}
        assert code == 1, stderr
        assert {"model-replicas", "pdb-blocks-drain"} <= failed, document
    finally:
        live.merge_patch(f"/apis/apps/v1/namespaces/{fleet.MODEL_NAMESPACE}/deployments/llm-chat-canary",
                         {"spec": {"replicas": 2}})
        _wait(lambda: _ready_pods(live, {"app": "llm-chat", "track": "canary"}) == 2)


def _ready_pods(rest: Rest, selector: dict[str, str]) -> int:
    query = ",".join(f"{k}={v}" for k, v in selector.items())
    pods = rest.items(f"/api/v1/namespaces/{fleet.MODEL_NAMESPACE}/pods?labelSelector={query}")
    return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or []))


def _wait(probe, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {probe}")
        time.sleep(0.5)


def test_pause_and_resume_set_and_remove_exactly_their_skip_labels(live: Rest, project: Path) -> None:
    before = node_labels(live)
    # Someone else holds one node of the released prod pool by hand: pause and resume must leave it alone.
    foreign = "gpu-l40s-s04"
    live.merge_patch(f"/api/v1/nodes/{foreign}", {"metadata": {"labels": {SKIP: "true"}}})

    code, report, stderr = gpu_rollout(project, "pause", "existing-prod")
    assert code == 0, stderr
    after = node_labels(live)
    labelled = {n for n, labels in after.items() if labels.get(SKIP) == "true"} - {foreign}
    # The released pool's nodes are not on the target driver yet: held. The unreleased pool is pinned to the
    # driver its nodes run (done): nothing to hold. The canary pool is another stack's.
    assert labelled == pool_nodes("l40s-serving") - {foreign}
    assert set(report["changed"]) == labelled and foreign in report["foreign"]
    assert pool_nodes("h100-serving") <= set(report["done"])
    for name, labels in after.items():  # nothing else on any node changed
        expected = dict(before[name], **({SKIP: "true"} if name in labelled | {foreign} else {}))
        assert labels == expected, name

    code, report, stderr = gpu_rollout(project, "resume", "existing-prod")
    assert code == 0, stderr
    resumed = node_labels(live)
    assert resumed[foreign].get(SKIP) == "true"  # not ours: kept
    assert {n for n, labels in resumed.items() if labels.get(SKIP)} == {foreign}
    assert set(report["changed"]) == labelled
    annotations = {n["metadata"]["name"]: n["metadata"].get("annotations") or {} for n in live.items("/api/v1/nodes")}
    assert not [n for n, a in annotations.items() if any(k.startswith("gpu-driver-upgrade.io/paused") for k in a)]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def operator_moves(rest: Rest, node: str, state: str, driver: str | None = None) -> None:
    """What the GPU Operator's upgrade controller does: the state label (cordon on the way), an event,
    and GFD's driver labels once the new driver runs."""
    body: dict = {"metadata": {"labels": {STATE: state, **(fleet.driver_labels(driver) if driver else {})}}}
    if state == "cordon-required":
        body["spec"] = {"unschedulable": True}
    if state == "upgrade-done":
        body["spec"] = {"unschedulable": None}
    rest.merge_patch(f"/api/v1/nodes/{node}", body)
    rest.create("/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{node}."},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
        "reason": "GPUDriverUpgrade", "type": "Normal",
        "message": f"Successfully updated node state label to {state}",
        "source": {"component": "nvidia-gpu-operator"}, "firstTimestamp": _now(), "lastTimestamp": _now(),
        "count": 1,
    })


def _pool(document: dict, name: str) -> dict:
    return next(p for p in document["pools"] if p["pool"] == name)


def test_watch_follows_the_upgrade_states_and_pauses_on_upgrade_failed(live: Rest, project: Path) -> None:
    stack, pool = "existing-canary", "l40s-canary"
    first, second, third = sorted(pool_nodes(pool))

    code, document, stderr = gpu_rollout(project, "watch", stack, "--once")
    assert code == 0, stderr
    assert _pool(document, pool) | {"states": None} == {
        "pool": pool, "target": NEW_DRIVER, "held": False, "done": 0, "total": 3, "skipped": 0, "paused": 0,
        "states": None}

    # The operator takes the first node through its upgrade, one state at a time.
    for state in ("upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required"):
        operator_moves(live, first, state)
    code, document, stderr = gpu_rollout(project, "watch", stack, "--once")
    assert code == 0, stderr
    assert _pool(document, pool)["states"] == {"pod-deletion-required": 1, "upgrade-done": 2}
    mine = next(n for n in document["nodes"] if n["name"] == first)
    assert (mine["state"], mine["done"]) == ("pod-deletion-required", False)

    for state in ("drain-required", "pod-restart-required", "validation-required", "uncordon-required"):
        operator_moves(live, first, state)
    operator_moves(live, first, "upgrade-done", driver=NEW_DRIVER)
    code, document, stderr = gpu_rollout(project, "watch", stack, "--once")
    assert code == 0, stderr
    assert _pool(document, pool)["done"] == 1
    assert next(n for n in document["nodes"] if n["name"] == first)["driver"] == NEW_DRIVER

    # The second node fails: watch pauses the rollout itself and exits 1.
    for state in ("upgrade-required", "cordon-required", "upgrade-failed"):
        operator_moves(live, second, state)
    code, document, stderr = gpu_rollout(project, "watch", stack, "--once")
    assert code == 1, stderr
    assert any("upgrade-failed" in json.dumps(t) for t in document["triggers"]), document["triggers"]
    labels = node_labels(live)
    held = {n for n, node in labels.items() if node.get(SKIP) == "true"}
    # Every node of the stack's pools that is not done is held (the H100 canary's not upgraded yet either); the
    # done one is not; other stacks' are not.
    waiting = {second, third, *pool_nodes("h100-canary")}
    assert held == waiting, held
    assert set(document["paused"]["changed"]) == waiting

    code, report, stderr = gpu_rollout(project, "resume", stack)
    assert code == 0, stderr
    assert not {n for n, node in node_labels(live).items() if node.get(SKIP)}
