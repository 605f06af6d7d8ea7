"""The benchmark still runs (it prints figures; timings are never asserted)."""

from __future__ import annotations

from benchmarks.checks_scale import measure
from checks import kube as k


def test_preflight_benchmark_runs_and_its_query_count_does_not_grow() -> None:
    small, larger = measure(8, k.ClientSettings()), measure(40, k.ClientSettings())
    assert small["writes"] == larger["writes"] == 0
    assert small["queries"] == larger["queries"] > 0
    assert larger["pods"] > small["pods"]
