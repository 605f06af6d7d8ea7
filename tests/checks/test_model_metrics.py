"""Preflight model-metrics (checks/disruption.py): `watch` reads every model's error rate and p95 (its slo, else
relative to its own baseline), so a model whose metrics cannot be read fails in prod naming what to set: its
engine, the stack's Prometheus, SGLang's --enable-metrics. On the prod example's steady-state cluster (fake API)."""

from __future__ import annotations

from typing import Any

from checks import disruption
from checks import kube as k
from checks.inventory import read_inventory
from checks.results import Status
from fleetspec.load import spec_from_config
from fleetspec.model import FleetSpec
from tests.conftest import edited
from tests.fakekube.server import FakeKube


def _results(kube: k.Kube, spec: FleetSpec) -> dict[str, Any]:
    return {r.subject: r for r in disruption.check_model_metrics(read_inventory(kube, spec))}


def _model(name: str, change: dict[str, Any]) -> Any:
    def edit(models: list[dict[str, Any]]) -> None:
        (model,) = [m for m in models if m["name"] == name]
        model.update(change)
    return edit


def test_every_prod_model_of_the_example_has_readable_metrics(prod: FakeKube, kube: k.Kube,
                                                              prod_spec: FleetSpec) -> None:
    found = _results(kube, prod_spec)
    assert {r.status for r in found.values()} == {Status.PASS}
    assert found["inference/rerank-sglang"].message == ("sglang metrics, read from validation.prometheus; objective: "
                                                        "relative to its own baseline (no models[].slo)")


def test_a_model_of_no_known_engine_fails_naming_serving_engine(prod: FakeKube, kube: k.Kube) -> None:
    spec = spec_from_config(edited("prod", "models", _model("code-tgi", {"image": "registry.example.com/llm:1"})))
    result = _results(kube, spec)["inference/code-tgi"]
    assert result.status == Status.FAIL
    assert "models[code-tgi].serving.engine (vllm, tgi, triton or sglang)" in result.message


def test_a_prod_stack_without_prometheus_fails_every_model(prod: FakeKube, kube: k.Kube) -> None:
    spec = spec_from_config(edited("prod", "validation", lambda v: v.pop("prometheus")))
    found = _results(kube, spec)
    assert {r.status for r in found.values()} == {Status.FAIL}
    assert all("validation.prometheus: where `watch` reads the model's error rate and p95" in r.message
               for r in found.values())


def test_an_sglang_server_without_its_metrics_flag_fails(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    for pod in prod.objects("pods"):
        if pod["metadata"]["name"].startswith("rerank-sglang"):
            container = pod["spec"]["containers"][0]
            prod.update("pods", pod["metadata"]["name"], {"spec": {"containers": [
                {k_: v for k_, v in container.items() if k_ != "args"}]}}, "inference")
    result = _results(kube, prod_spec)["inference/rerank-sglang"]
    assert result.status == Status.FAIL and "--enable-metrics on its SGLang server" in result.message


def test_outside_prod_it_is_a_warning(kube: k.Kube, fake: FakeKube) -> None:
    spec = spec_from_config(edited("canary", "validation", lambda v: v.pop("prometheus")))
    assert {r.status for r in _results(kube, spec).values()} == {Status.WARN}
