"""The benchmark still runs (it prints figures; timings are never asserted)."""

from __future__ import annotations

import pytest

from benchmarks.checks_scale import measure
from checks import kube as k
from tests.fakekube.plugin import fake, kubeconfig  # noqa: F401 - fixtures
from tests.prometheus.server import MISSING, binary


def test_preflight_benchmark_runs_and_its_query_count_does_not_grow() -> None:
    small, larger = measure(8, k.ClientSettings()), measure(40, k.ClientSettings())
    assert small["writes"] == larger["writes"] == 0
    assert small["queries"] == larger["queries"] > 0
    assert larger["pods"] > small["pods"]


def test_the_simulator_benchmark_runs_and_grows_with_the_fleet() -> None:
    from benchmarks.simulate_scale import measure as simulate_measure

    small, larger = simulate_measure(40), simulate_measure(120)
    assert larger["nodes"] == 3 * small["nodes"] and larger["replicas"] == 3 * small["replicas"]
    assert small["peak_mb"] > 0


def test_the_sweep_reports_a_safe_parallelism_per_pool_and_never_beats_the_lower_bound() -> None:
    """benchmarks/simulate_scale.sweep runs each policy alone on a grid of parallelism: each of its runs is a
    simulated schedule, which the lower bound holds for, so no sweep comes in under the bound."""
    from benchmarks.simulate_scale import near_the_bound, spread_fleet, sweep

    fleet = spread_fleet(80)
    swept, assessed = sweep(fleet), near_the_bound("small", fleet)
    values = [int(v) for v in str(swept["sweep_values"]).split(", ")]
    assert len(values) == 4 and all(1 <= v <= 20 for v in values)  # four pools of 20 nodes
    assert isinstance(swept["sweep_h"], float) and swept["sweep_h"] >= assessed["lower_bound_h"]


def test_a_read_at_scale_reports_its_figures(fake, kubeconfig) -> None:  # noqa: F811 - the fixtures above
    from benchmarks.checks_scale import prod_with, read
    from tests.fakekube.fixtures import seed

    seed(fake, prod_with(12), filler_pods_per_node=6)
    for verb in ("preflight", "verify", "simulate"):
        row = read(verb, 12, str(kubeconfig))
        assert row["count"] > 0 and row["peak_mb"] > 0
    assert fake.writes == 0


@pytest.mark.skipif(binary("prometheus") is None or binary("promtool") is None, reason=MISSING)
def test_the_verify_soak_benchmark_runs_and_sees_its_xid() -> None:
    from benchmarks.verify_soak import measure

    row = measure(nodes=3, gpus=2, soak_minutes=6 * 60)
    assert row["nodes"] == 5 and row["peak_mb"] > 0 and row["queries"] > 0
    assert row["statuses"] == {"fail": 1, "pass": row["statuses"]["pass"]}  # the Xid 79, nothing else


def test_the_fleet_benchmark_reads_every_cluster_and_grows_with_them() -> None:
    from benchmarks.fleet_scale import measure as fleet_measure

    one, three = fleet_measure(1, nodes=12, pods_per_node=4), fleet_measure(3, nodes=12, pods_per_node=4)
    assert (one["clusters"], one["nodes"]) == (1, 12) and (three["clusters"], three["nodes"]) == (3, 36)
    assert three["peak_mb"] > 0


def test_the_guard_benchmark_runs_and_sees_every_trigger_of_its_burst() -> None:
    from benchmarks.guard_scale import measure as guard_measure

    row = guard_measure(60, 12)
    assert row["nodes"] >= 60 and row["burst"] == 12 and row["seen"] == 12
    assert not row["leader"] and row["peak_mb"] > 0 and row["latency_max"] is not None
