"""Issue 7 point 10: watch counts a model's available replicas from its Ready pods, whatever owns them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from checks import kube as k
from checks.watch import watch
from rollout.cli import app
from gpu_knowledge import labels
from fleetspec.model import FleetSpec
from tests.fakekube.fixtures import pod, pods_of, set_pod_ready
from tests.fakekube.real_cluster import server_pods
from tests.fakekube.server import FakeKube

runner = CliRunner()
LLM = {"app": "llm-chat", "track": "stable"}


def as_statefulset(fake: FakeKube) -> list[str]:
    """llm-chat run by a StatefulSet (its pods llm-chat-0..2), as vLLM multi-host servers often are: no
    Deployment named after the model."""
    old = pods_of(fake, "inference", LLM)
    nodes = [fake.obj("pods", name, "inference")["spec"]["nodeName"] for name in old]
    for name in old:
        fake.remove("pods", name, "inference")
    fake.remove("deployments", "llm-chat", "inference")
    fake.add({"kind": "StatefulSet", "metadata": {"name": "llm-chat", "namespace": "inference", "labels": dict(LLM)},
              "spec": {"replicas": 3, "serviceName": "llm-chat", "selector": {"matchLabels": dict(LLM)},
                       "template": {"metadata": {"labels": dict(LLM)}, "spec": {"containers": [
                           {"name": "server", "image": "vllm/vllm-openai:v0.10.2"}]}}}})
    return server_pods(fake, "inference", LLM, nodes, image="vllm/vllm-openai:v0.10.2", gpus=8,
                       owner=("StatefulSet", "llm-chat"))


def test_a_statefulset_model_is_not_zero_available(prod: FakeKube, kubeconfig: Path) -> None:
    pods = as_statefulset(prod)
    assert pods == ["llm-chat-0", "llm-chat-1", "llm-chat-2"]
    result = runner.invoke(app, ["watch", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--once", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {m["model"]: m["available"] for m in doc["models"]}["inference/llm-chat"] == 3
    assert doc["triggers"] == [] and doc["paused"] is None
    assert not any(n["metadata"]["labels"].get(labels.SKIP_UPGRADE) == "true" and "gput4" in n["metadata"]["name"]
                   for n in prod.objects("nodes"))  # nothing auto-paused


def test_real_unavailability_of_a_statefulset_model_still_triggers(prod: FakeKube, kube: k.Kube,
                                                                   prod_spec: FleetSpec) -> None:
    pods = as_statefulset(prod)
    set_pod_ready(prod, "inference", pods[0], False)
    set_pod_ready(prod, "inference", pods[1], False)  # 1 of 3 Ready, minAvailable 2
    outcome = watch(kube, prod_spec, "prod", once=True, auto_pause=False)
    assert [(t.kind, t.subject) for t in outcome.snapshot.triggers] == [("below-min-available", "inference/llm-chat")]
    assert "has 1 available replica(s), below its minAvailable 2" in outcome.snapshot.triggers[0].message


def test_terminating_pods_do_not_count(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    pods = as_statefulset(prod)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    prod.update("pods", pods[0], {"metadata": {"deletionTimestamp": when}}, "inference")  # evicted: still Ready
    outcome = watch(kube, prod_spec, "prod", once=True, auto_pause=False)
    assert {m["model"]: m["available"] for m in outcome.snapshot.models}["inference/llm-chat"] == 2
    assert outcome.snapshot.triggers == []  # 2 Ready and staying: minAvailable 2 holds
    prod.update("pods", pods[1], {"metadata": {"deletionTimestamp": when}}, "inference")
    outcome = watch(kube, prod_spec, "prod", once=True, auto_pause=False)
    assert [t.message for t in outcome.snapshot.triggers] == [
        "model inference/llm-chat has 1 available replica(s), below its minAvailable 2"]


def test_bare_pods_and_no_pods_at_all(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    for name in pods_of(prod, "inference", {"app": "rerank-sglang"}):
        prod.remove("pods", name, "inference")
    outcome = watch(kube, prod_spec, "prod", once=True, auto_pause=False)
    [trigger] = outcome.snapshot.triggers
    assert trigger.message.endswith("(no pod matches app=rerank-sglang in namespace inference)")
    for index in range(2):  # bare pods, no owner at all
        prod.add(pod(f"rerank-{index}", "inference", "aks-gput4-12345678-vmss000000", {"app": "rerank-sglang"},
                     [{"name": "server", "image": "lmsysorg/sglang:v0.4.6.post5-cu126",
                       "resources": {"requests": {"nvidia.com/gpu": "1"}}}]))
    assert watch(kube, prod_spec, "prod", once=True, auto_pause=False).snapshot.triggers == []


def test_preflight_counts_a_statefulset_models_replicas_from_its_pods(prod: FakeKube, kube: k.Kube,
                                                                      prod_spec: FleetSpec) -> None:
    from checks.preflight import run_preflight
    from checks.results import Status

    as_statefulset(prod)
    [found] = [r for r in run_preflight(kube, prod_spec) if r.id == "model-replicas" and r.subject == "inference/llm-chat"]
    assert found.status == Status.PASS and found.message == "3 pods (StatefulSet llm-chat; stack declares 3)"
    prod.remove("pods", "llm-chat-1", "inference")
    prod.remove("pods", "llm-chat-2", "inference")
    [found] = [r for r in run_preflight(kube, prod_spec) if r.id == "model-replicas" and r.subject == "inference/llm-chat"]
    assert found.status == Status.FAIL and found.message.startswith("1 pod (StatefulSet llm-chat)")
