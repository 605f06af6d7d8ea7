"""Where verify and watch read Prometheus (``validation.prometheus``), how verify judges the soak
(``validation.bucketMinutes``, ``minBucketRequests``, ``maxModelRestarts``, ``tolerance.errorRate``) and a model's
SLO (``models[].slo``): the examples load, and bad values fail naming their key and why."""

from __future__ import annotations

from typing import Any

import pytest

from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import ModelSlo
from fleetspec.observability import (PrometheusService, PrometheusSettings, PrometheusUrl, decimal_percent,
                                     duration_seconds, parse_prometheus)
from tests.conftest import edited


def _problem(config: dict[str, str]) -> str:
    with pytest.raises(SpecError) as info:
        spec_from_config(config)
    (problem,) = info.value.problems
    return f"{problem.path}: {problem.message}"


def test_prometheus_is_a_url_or_a_service_reached_through_the_proxy() -> None:
    assert parse_prometheus("monitoring/prometheus-k8s:9090") == PrometheusService("monitoring", "prometheus-k8s",
                                                                                    "9090")
    assert parse_prometheus("monitoring/kube-prometheus-stack-prometheus:http-web").port == "http-web"
    assert parse_prometheus("https://prometheus.example.com/api/") == PrometheusUrl("https://prometheus.example.com/api")


@pytest.mark.parametrize(("value", "reason"), [
    ("prometheus:9090", "neither an http(s) URL nor a Service as namespace/name:port"),
    ("monitoring/prometheus", "neither an http(s) URL nor a Service"),
    ("Monitoring/prometheus:9090", "namespace 'Monitoring' is not a valid Kubernetes name"),
    ("monitoring/prometheus:70000", "port 70000 is not between 1 and 65535"),
    ("monitoring/prometheus:web_port", "port 'web_port' is neither a number nor a Service port name"),
    ("ftp://prometheus", "is not an http(s) URL"),
])
def test_a_bad_prometheus_is_refused_at_its_key(value: str, reason: str) -> None:
    problem = _problem(edited("canary", "validation", lambda v: v.update(prometheus=value)))
    assert problem.startswith("gpu-driver-upgrade:validation.prometheus: ") and reason in problem, problem


def test_the_object_form_names_where_prometheus_is_and_its_credential() -> None:
    value = {"url": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1",
             "auth": {"type": "aws-sigv4", "region": "us-east-1"}}
    spec = spec_from_config(edited("canary", "validation", lambda v: v.update(prometheus=value)))
    assert spec.validation is not None and isinstance(spec.validation.prometheus, PrometheusSettings)
    assert spec.validation.prometheus.auth is not None and spec.validation.prometheus.auth.region == "us-east-1"


@pytest.mark.parametrize(("value", "path", "reason"), [
    ({"url": "https://p", "service": "monitoring/p:9090"}, "prometheus", "set exactly one of 'url'"),
    ({"service": "monitoring/p:9090", "auth": {"type": "azure"}}, "prometheus.auth", "'auth' applies to a url"),
    ({"url": "https://p", "scheme": "https"}, "prometheus.scheme", "'scheme' applies to a service"),
    ({"url": "https://p", "auth": {"type": "bearer-file"}}, "prometheus.auth.file", "auth type bearer-file needs 'file'"),
    ({"url": "https://p", "auth": {"type": "bearer-file", "file": "token"}}, "prometheus.auth.file",
     "must be an absolute path"),
    ({"url": "https://p", "auth": {"type": "azure", "region": "us-east-1"}}, "prometheus.auth.region",
     "'region' is not a setting of auth type azure"),
    ({"url": "https://p", "auth": {"type": "aws-sigv4", "region": "Virginia"}}, "prometheus.auth.region",
     "is not an AWS region"),
    ({"url": "https://p", "auth": {"type": "bearer-env", "env": "PROM-TOKEN"}}, "prometheus.auth.env",
     "is not an environment variable name"),
    ({"url": "https://p", "auth": {"type": "oauth"}}, "prometheus.auth.type", "bearer-file"),
    ({"url": "ftp://p"}, "prometheus.url", "is not an http(s) URL"),
])
def test_a_bad_prometheus_object_is_refused_at_its_key(value: dict[str, Any], path: str, reason: str) -> None:
    problem = _problem(edited("canary", "validation", lambda v: v.update(prometheus=value)))
    assert problem.startswith(f"gpu-driver-upgrade:validation.{path}: ") and reason in problem, problem


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("bucketMinutes", 2, "greater than or equal to 5"),
    ("minBucketRequests", 0, "greater than or equal to 1"),
    ("maxModelRestarts", -1, "greater than or equal to 0"),
    ("minJudgedFraction", 1.5, "less than or equal to 1"),
    ("minJudgedFraction", 0, "greater than 0"),
    ("minServingJudgedFraction", 2, "less than or equal to 1"),
    ("minRequests", 0, "greater than or equal to 1"),
])
def test_bad_soak_judging_settings_are_refused_at_their_key(key: str, value: float, reason: str) -> None:
    problem = _problem(edited("canary", "validation", lambda v: v.update({key: value})))
    assert problem.startswith(f"gpu-driver-upgrade:validation.{key}: ") and reason in problem, problem


def test_the_soak_floors_default_to_what_an_attestation_needs() -> None:
    spec = spec_from_config(edited("canary", "validation", lambda v: [v.pop(k, None) for k in (
        "minJudgedFraction", "minServingJudgedFraction", "minRequests")]))
    assert spec.validation is not None
    assert (spec.validation.minJudgedFraction, spec.validation.minServingJudgedFraction,
            spec.validation.minRequests) == (0.95, 0.9, 1000)


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("minJudgedFraction", 1.01, "less than or equal to 1"),
    ("minRequests", -5, "greater than or equal to 1"),
])
def test_bad_promotion_floors_are_refused_at_their_key(key: str, value: float, reason: str) -> None:
    problem = _problem(edited("prod", "promotion", lambda v: v.update({key: value})))
    assert problem.startswith(f"gpu-driver-upgrade:promotion.{key}: ") and reason in problem, problem


def test_an_error_rate_tolerance_is_a_percentage_with_decimals() -> None:
    spec = spec_from_config(edited("canary", "validation", lambda v: v.update(tolerance={"errorRate": "0.5%"})))
    assert spec.validation is not None and decimal_percent(spec.validation.tolerance.errorRate) == 0.005
    problem = _problem(edited("canary", "validation", lambda v: v.update(tolerance={"errorRate": "five"})))
    assert problem.startswith("gpu-driver-upgrade:validation.tolerance.errorRate: ") and "such as '1%' or '0.5%'" in problem


def _with_slo(slo: dict[str, Any]) -> dict[str, str]:
    return edited("canary", "models", lambda models: models[0].update(slo=slo))


def test_a_model_slo_loads_with_its_objectives_and_how_long_a_breach_must_last() -> None:
    spec = spec_from_config(_with_slo({"errorRate": "0.5%", "p95LatencySeconds": 2.5, "for": "15m"}))
    slo = spec.models[0].slo
    assert slo is not None and (slo.error_rate, slo.p95LatencySeconds, slo.sustained_seconds) == (0.005, 2.5, 900)
    assert ModelSlo(errorRate="1%").sustained_seconds == 600  # ten minutes by default
    assert duration_seconds("2h") == 7200


@pytest.mark.parametrize(("slo", "path", "reason"), [
    ({"for": "10m"}, "models[0].slo.errorRate", "declare errorRate, p95LatencySeconds or both"),
    ({"errorRate": "150%"}, "models[0].slo.errorRate", "from 0% to 100%"),
    ({"errorRate": "1%", "for": "30s"}, "models[0].slo.for", "must be from 1m to 24h"),
    ({"errorRate": "1%", "for": "ten minutes"}, "models[0].slo.for", "such as '90s', '10m' or '1h'"),
    ({"p95LatencySeconds": 0}, "models[0].slo.p95LatencySeconds", "greater than 0"),
    ({"errorRate": "1%", "window": "5m"}, "models[0].slo.window", "unknown key"),
])
def test_a_bad_model_slo_is_refused_at_its_key(slo: dict[str, Any], path: str, reason: str) -> None:
    problem = _problem(_with_slo(slo))
    assert problem.startswith(f"gpu-driver-upgrade:{path}: ") and reason in problem, problem
