"""Pytest fixtures of the fake API, shared by the tests of the live checks (tests/checks) and of the command
line (tests/rollout): each of their conftest.py imports the ones it uses.

``fake`` is an empty cluster on loopback; ``prod`` and ``eks`` are the example stacks' clusters in their steady
state; ``kubeconfig`` is a real kubeconfig file pointing at ``fake``; ``kube`` an adapter connected through it
with small retry waits (the production code path, only faster).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from checks import kube as kube_module
from fleetspec.load import load_stack_file
from fleetspec.discipline import WEEKDAYS, MaintenanceWindow, WeeklyWindow
from fleetspec.model import FleetSpec
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import seed
from tests.fakekube.server import FakeKube

# Small waits so retry tests finish in milliseconds; the code path is the production one.
FAST = kube_module.ClientSettings(request_timeout=0.5, attempts=3, backoff_base=0.01, backoff_cap=0.05,
                                  total_timeout=5.0, page_size=7)


def stack_spec(name: str) -> FleetSpec:
    return load_stack_file(PROJECT_DIR / f"Pulumi.{name}.yaml")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as server:
        yield server


@pytest.fixture
def prod_spec() -> FleetSpec:
    """The example prod stack, its maintenance window open around the clock: the watch tests play the operator at
    whatever time they run; tests/checks/test_watch_window.py judges the example's window on a fixed clock."""
    spec = stack_spec("prod")
    always = MaintenanceWindow(timeZone="UTC", weekly=[WeeklyWindow(days=list(WEEKDAYS), start="00:00", end="24:00")])
    return spec.model_copy(update={"rollout": spec.rollout.model_copy(update={"maintenanceWindow": always})})


@pytest.fixture
def prod(fake: FakeKube, prod_spec: FleetSpec) -> FakeKube:
    """The prod stack's cluster in its steady state, before any change."""
    seed(fake, prod_spec)
    fake.reset_counts()
    return fake


@pytest.fixture
def eks_spec() -> FleetSpec:
    return stack_spec("eks-prod")


@pytest.fixture
def eks(fake: FakeKube, eks_spec: FleetSpec) -> FakeKube:
    """The EKS prod stack's cluster as `pulumi up` leaves it: each live generation's nodes on its driver."""
    seed(fake, eks_spec)
    fake.reset_counts()
    return fake


@pytest.fixture
def kubeconfig(fake: FakeKube, tmp_path: Path) -> Path:
    return fake.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kube(kubeconfig: Path) -> kube_module.Kube:
    return kube_module.connect(str(kubeconfig), settings=FAST)
