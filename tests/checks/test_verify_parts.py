"""verify's parts beyond the vLLM canary: the TGI and Triton test requests through the pod proxy, the engines'
default queries as a real Prometheus parses them, Prometheus unreachable or refusing a query (inconclusive,
never a pass), another cluster refused, and bad `models[].serving` config refused at its key."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from checks import kube as kube_module
from checks.prometheus import Prometheus, PrometheusError, regex_union
from checks.catalogue import CATALOGUE
from checks.objects import labels_of, name_of
from checks.serving import ENGINE_PARTS, engine_of, fill
from checks.verify_read import gather
from rollout.cli import app
from fleetspec.load import SpecError, load_stack_file
from gpu_knowledge import labels
from fleetspec.model import ServingEngine
from tests.checks.verify_world import ProxyKube, World, build, write_stack
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import identity_record, seed
from tests.fakekube.plugin import FAST
from tests.fakekube.server import FakeKube
from tests.loopback_http import FakeHandler
from tests.prometheus.server import MISSING, History, binary, start

needs_prometheus = pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)


class _Engine(FakeHandler):
    """TGI's /generate and Triton's /v2 health and generate endpoints, as much as verify asks of them."""

    def _json(self, status: int, body: Any) -> None:
        if body is None:
            self.send_body(status, b"", content_type=None)
        else:
            self.send_json(status, body)

    def do_GET(self) -> None:  # noqa: N802
        self._json(200, None) if self.path == "/v2/health/ready" else self._json(404, {"error": self.path})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.seen.append((self.path, body))  # type: ignore[attr-defined]
        if self.path == "/generate" and body.get("inputs"):
            self._json(200, {"generated_text": " one two three"})
        elif self.path == "/v2/models/llm/generate" and body.get("text_input"):
            self._json(200, {"model_name": "llm", "text_output": " one two three"})
        elif self.path == "/v1/completions" and body.get("model") == "llm-chat":  # SGLang's OpenAI API
            self._json(200, {"choices": [{"text": " one two three"}], "usage": {"completion_tokens": 3}})
        else:
            self._json(404, {"error": self.path})


@pytest.fixture
def engine_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _world(fake: ProxyKube, tmp_path: Path, server: ThreadingHTTPServer, **serving: Any) -> World:
    world = build(fake, tmp_path, **serving)
    for pod in world.canary_pods:
        fake.backends[("inference", pod)] = f"http://127.0.0.1:{server.server_address[1]}"
    return world


def _kube(fake: ProxyKube, tmp_path: Path) -> kube_module.Kube:
    return kube_module.connect(str(fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)


def _results(world: World, kube: kube_module.Kube, prometheus: Prometheus | None = None) -> dict[str, list[Any]]:
    facts = gather(kube, load_stack_file(world.stack_file), prometheus)
    out: dict[str, list[Any]] = {}
    for result in CATALOGUE.run("verify", facts):
        out.setdefault(result.id, []).append(result)
    return out


def test_a_tgi_model_is_asked_on_generate_at_its_port(tmp_path: Path, engine_server: ThreadingHTTPServer) -> None:
    with ProxyKube() as fake:
        world = _world(fake, tmp_path, engine_server, engine="tgi", port=8080)
        results = _results(world, _kube(fake, tmp_path))
    answers = results["model-answers"]
    assert [r.status.value for r in answers] == ["pass", "pass"]
    assert answers[0].evidence == {"model": "inference/llm-chat-canary", "node": answers[0].evidence["node"],
                                   "engine": "tgi", "port": 8080, "request": "POST /generate"}
    assert {(m, port, path) for m, _, _, port, path in fake.proxied} == {("POST", 8080, "generate")}
    assert engine_server.seen[0][1] == {"inputs": "Count from one to ten.", "parameters": {"max_new_tokens": 8}}


def test_an_sglang_model_is_asked_on_its_openai_completions_at_its_default_port(
        tmp_path: Path, engine_server: ThreadingHTTPServer) -> None:
    with ProxyKube() as fake:
        world = _world(fake, tmp_path, engine_server, engine="sglang", servedModel="llm-chat")
        results = _results(world, _kube(fake, tmp_path))
    assert [r.status.value for r in results["model-answers"]] == ["pass", "pass"]
    assert {(m, port, path) for m, _, _, port, path in fake.proxied} == {("POST", 30000, "v1/completions")}
    assert engine_server.seen[0][1]["model"] == "llm-chat"


def test_a_triton_model_is_asked_for_readiness_then_generate(tmp_path: Path,
                                                            engine_server: ThreadingHTTPServer) -> None:
    with ProxyKube() as fake:
        world = _world(fake, tmp_path, engine_server, engine="triton", servedModel="llm")
        results = _results(world, _kube(fake, tmp_path))
    assert [r.status.value for r in results["model-answers"]] == ["pass", "pass"]
    assert {(m, port, path) for m, _, _, port, path in fake.proxied} == {
        ("GET", 8000, "v2/health/ready"), ("POST", 8000, "v2/models/llm/generate")}


def test_a_model_server_answering_nonsense_fails(tmp_path: Path, engine_server: ThreadingHTTPServer) -> None:
    with ProxyKube() as fake:
        world = _world(fake, tmp_path, engine_server, engine="triton", servedModel="other")  # 404 from Triton
        results = _results(world, _kube(fake, tmp_path))
    assert {r.status.value for r in results["model-answers"]} == {"fail"}
    assert ('no answer: create pods/proxy in namespace inference: not found ({"error": "/v2/models/other/generate"})'
            in results["model-answers"][0].message)


def test_the_engine_is_read_from_the_image_unless_declared(tmp_path: Path) -> None:
    spec = load_stack_file(write_stack(tmp_path))
    model = spec.models[0]
    assert engine_of(model) == ServingEngine.VLLM
    for image, engine in (("ghcr.io/huggingface/text-generation-inference:3.0.1", ServingEngine.TGI),
                          ("nvcr.io/nvidia/tritonserver:25.01-py3", ServingEngine.TRITON),
                          ("registry.example.com/llm/server:1.2", None)):
        assert engine_of(model.model_copy(update={"image": image})) == engine, image
    declared = model.model_copy(update={"serving": model.serving.model_copy(update={"engine": ServingEngine.TGI})})
    assert engine_of(declared) == ServingEngine.TGI


@needs_prometheus
def test_every_default_query_is_valid_promql_and_an_empty_result_is_inconclusive(tmp_path: Path) -> None:
    with start(History(), tmp_path / "prometheus") as url:
        prometheus = Prometheus(url)
        for engine, parts in ENGINE_PARTS.items():
            for metric, template in parts.templates().items():
                expr = fill(template, "inference", regex_union(["llm-chat-7d9f8c-000", "llm.chat-1"]), "300s")
                assert "{pods}" not in expr and "{window}" not in expr
                assert prometheus.query(expr) == [], (engine, metric)  # parsed and evaluated: no data
        with pytest.raises(PrometheusError, match="bad_data"):
            prometheus.query("sum(rate(x[5m])")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_prometheus_unreachable_makes_the_metric_checks_inconclusive(tmp_path: Path,
                                                                     engine_server: ThreadingHTTPServer) -> None:
    prometheus = Prometheus(f"http://127.0.0.1:{_closed_port()}", attempts=2, backoff=0.01, timeout=2)
    with ProxyKube() as fake:
        world = _world(fake, tmp_path, engine_server, engine="tgi")
        results = _results(world, _kube(fake, tmp_path), prometheus)
    for check_id in ("latency-throughput", "no-new-xid", "dcgm-metrics"):
        assert {r.status.value for r in results[check_id]} == {"inconclusive"}, check_id
    assert "no answer after 2 attempt(s)" in results["dcgm-metrics"][0].message
    assert "no data: p95LatencySeconds new" in results["latency-throughput"][0].message


@needs_prometheus
def test_a_query_prometheus_refuses_is_inconclusive_with_its_error(tmp_path: Path,
                                                                   engine_server: ThreadingHTTPServer) -> None:
    with ProxyKube() as fake, start(History(), tmp_path / "prometheus") as url:
        world = _world(fake, tmp_path, engine_server, engine="tgi",
                       queries={"p95LatencySeconds": "max(up{pod=~\"{pods}\"}", "tokensPerSecond": "vector(1) + 0*count(up{pod=~\"{pods}\"})"})
        results = _results(world, _kube(fake, tmp_path), Prometheus(url))
    (found,) = results["latency-throughput"]
    assert found.status.value == "inconclusive" and "bad_data" in found.message
    assert found.evidence["queries"]["p95LatencySeconds new"]["query"] == 'max(up{pod=~"llm-chat-canary-7d9f8c-000|llm-chat-canary-7d9f8c-001"}'


def test_another_cluster_is_refused_before_any_check(tmp_path: Path) -> None:
    with ProxyKube() as fake:
        world = build(fake, tmp_path)
        fake.remove("configmaps", "gpu-driver-upgrade-canary", "kube-system")
        fake.add(identity_record(world.spec, cluster="inference-neu-2"))
        result = CliRunner().invoke(app, ["verify", "--stack-file", str(world.stack_file), "--project-dir",
                                          str(tmp_path), "--kubeconfig", str(fake.write_kubeconfig(tmp_path / "kc"))])
    assert result.exit_code == 2 and "wrong cluster" in result.output and "inference-neu-2" in result.output
    assert fake.proxied == [] and not (tmp_path / "attestations").exists()


@pytest.mark.parametrize(("serving", "key", "reason"), [
    ({"baselineMatchLabels": {}}, "serving.baselineMatchLabels", "an empty map would select every pod"),
    ({"queries": {"tokensPerSecond": "sum(rate(x[5m]))"}}, "serving.queries.tokensPerSecond", "must use {pods}"),
    ({"port": 70000}, "serving.port", "less than 65536"),
    ({"engine": "ollama"}, "serving.engine", "'vllm', 'tgi', 'triton' or 'sglang'"),
])
def test_bad_serving_config_is_refused_at_its_key(tmp_path: Path, serving: dict[str, Any], key: str,
                                                  reason: str) -> None:
    path = write_stack(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["config"]["gpu-driver-upgrade:models"][0]["serving"] = serving
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError) as caught:
        load_stack_file(path)
    (problem,) = caught.value.problems
    assert problem.path.endswith(f"models[0].{key}") and reason in problem.message, (problem.path, problem.message)


def test_an_image_owned_canary_checks_its_newest_generation(tmp_path: Path) -> None:
    """EKS canary, driver in the AMI: generation 2 (580.173.02) is what is verified; generation 1's nodes (the
    old AMI, leaving) are not upgraded nodes. No driver pod is asked for: the node image carries the driver."""
    spec = load_stack_file(PROJECT_DIR / "Pulumi.eks-canary.yaml")
    with FakeKube() as fake:
        seed(fake, spec)
        kube = kube_module.connect(str(fake.write_kubeconfig(tmp_path / "kubeconfig")), settings=FAST)
        facts = gather(kube, spec, None)
        results = CATALOGUE.run("verify", facts)
    newest = {name_of(n) for n in fake.objects("nodes") if labels_of(n).get(labels.GENERATION) == "2"}
    assert newest and {n.name for n in facts.nodes} == newest and {n.target for n in facts.nodes} == {"580.173.02"}
    driver = [r for r in results if r.id == "driver-version"]
    assert {r.status.value for r in driver} == {"pass"} and all("(GFD label)" in r.message for r in driver)
    assert "driverPods" not in driver[0].evidence
    # The validation job has not run on generation 2 yet: missing evidence, never a pass.
    assert {r.status.value for r in results if r.id == "validation-job"} == {"inconclusive"}
