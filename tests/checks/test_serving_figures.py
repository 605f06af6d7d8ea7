"""The engines' figures from their additive parts (checks/serving.py): an engine that counts failed and other requests
apart (Triton, SGLang) has its attempts added up from both, so its error rate is the failures over every request."""

from __future__ import annotations

import pytest

from checks.serving import ENGINE_PARTS, Parts, figures
from fleetspec.model import ServingEngine


@pytest.mark.parametrize("engine", [ServingEngine.TRITON, ServingEngine.SGLANG])
def test_failures_counted_apart_are_added_to_the_attempts(engine: ServingEngine) -> None:
    found = figures(Parts({"attempts": 90.0, "errors": 10.0}), ENGINE_PARTS[engine])
    assert found.errorRate == pytest.approx(0.10)
    # No failure counted yet: the counter of failures may not exist until the first one.
    assert figures(Parts({"attempts": 90.0}), ENGINE_PARTS[engine]).errorRate == 0.0


@pytest.mark.parametrize("engine", [ServingEngine.VLLM, ServingEngine.TGI])
def test_an_engine_that_counts_every_request_divides_by_it(engine: ServingEngine) -> None:
    assert figures(Parts({"attempts": 100.0, "errors": 10.0}), ENGINE_PARTS[engine]).errorRate == pytest.approx(0.10)


def test_sglang_reads_its_own_metrics() -> None:
    parts = ENGINE_PARTS[ServingEngine.SGLANG]
    assert "sglang:e2e_request_latency_seconds_bucket" in (parts.histogram or "")
    assert "sglang:num_aborted_requests_total" in (parts.errors or "")
    assert "sglang:num_requests_total" in (parts.attempts or "")
    assert "sglang:generation_tokens_total" in parts.tokens
