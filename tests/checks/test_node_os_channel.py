"""AKS node image held still (issue 36, point 6): preflight reads the managed cluster's node OS upgrade channel from
Azure Resource Manager (cloud_credentials.azure_management, with an Entra token for ARM's scope) and fails unless
it is None or cluster.aks.nodeOsUpgradeChannelReason says why; where the identity cannot read it, a warning naming
the role. ARM is a small server on loopback (TLS with the test's own CA) that checks the token and serves one
managed cluster; the subscription is the one the fake cluster's nodes name in spec.providerID."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks import kube as k
from checks.inventory import Inventory
from checks.owner import check_node_os_channel
from checks.preflight import run_preflight
from checks.results import Status
from cloud_credentials.azure_management import ARM_ENDPOINT, ARM_SCOPE, AzureManagement
from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import FleetSpec
from rollout import preflight as verb
from tests.arm_server import CLUSTER, Entra, reader, serve
from tests.conftest import change, stack_config
from tests.fakekube.plugin import stack_spec
from tests.fakekube.server import FakeKube


def _judge(kube: k.Kube, spec: FleetSpec, management: AzureManagement | None) -> tuple[Status, str]:
    (found,) = [r for r in run_preflight(kube, spec, management=management) if r.id == "node-os-channel"]
    return found.status, found.message


def _with_reason(spec: FleetSpec, reason: str | None) -> FleetSpec:
    assert spec.cluster.aks is not None
    aks = spec.cluster.aks.model_copy(update={"nodeOsUpgradeChannelReason": reason})
    return spec.model_copy(update={"cluster": spec.cluster.model_copy(update={"aks": aks})})


def test_a_cluster_whose_channel_is_none_passes(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                tmp_path: Path) -> None:
    entra = Entra()
    with serve(tmp_path, "None") as arm:
        status, message = _judge(kube, prod_spec, reader(arm, entra))
    assert status == Status.PASS and "nodeOSUpgradeChannel None" in message
    assert entra.scopes == [(ARM_SCOPE,)] and [p.split("?")[0] for p in arm.seen] == [CLUSTER]


@pytest.mark.parametrize("channel", ["NodeImage", "SecurityPatch", "Unmanaged"])
def test_any_other_channel_fails_naming_it_and_the_key(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                        tmp_path: Path, channel: str) -> None:
    with serve(tmp_path, channel) as arm:
        status, message = _judge(kube, prod_spec, reader(arm))
    assert status == Status.FAIL
    assert f"nodeOSUpgradeChannel is {channel}" in message and "cluster.aks.nodeOsUpgradeChannelReason" in message


def test_a_stated_reason_accepts_another_channel(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec,
                                                 tmp_path: Path) -> None:
    with serve(tmp_path, "NodeImage") as arm:
        status, message = _judge(kube, _with_reason(prod_spec, "images canaried weekly; CHG-1"), reader(arm))
    assert status == Status.PASS
    assert "nodeOSUpgradeChannel NodeImage, accepted by cluster.aks.nodeOsUpgradeChannelReason: images canaried" in message


def test_an_identity_that_may_not_read_the_cluster_warns_naming_the_role(prod: FakeKube, kube: k.Kube,
                                                                         prod_spec: FleetSpec, tmp_path: Path) -> None:
    with serve(tmp_path, "None", status=403) as arm:
        status, message = _judge(kube, prod_spec, reader(arm))
    assert status == Status.WARN and "HTTP 403" in message and "Reader role" in message


def test_unread_is_no_pass_and_other_clouds_have_no_channel(prod: FakeKube, kube: k.Kube, prod_spec: FleetSpec) -> None:
    status, message = _judge(kube, prod_spec, None)
    assert status == Status.WARN and "was not read" in message
    eks = Inventory(stack_spec("eks-prod"), [], [], [], [], [], [], [], None, None)
    (found,) = check_node_os_channel(eks)
    assert found.status == Status.PASS and "cluster on eks: no AKS node OS upgrade channel" in found.message


@pytest.mark.azure_management
def test_the_verb_reads_resource_manager_for_an_aks_stack() -> None:
    reader = verb.azure_management(stack_spec("prod"))
    assert isinstance(reader, AzureManagement) and reader.endpoint == ARM_ENDPOINT
    assert verb.azure_management(stack_spec("eks-prod")) is None


def test_an_empty_reason_is_refused_at_its_key() -> None:
    config = change(stack_config("prod"), "cluster", lambda c: c["aks"].update(nodeOsUpgradeChannelReason=""))
    with pytest.raises(SpecError) as error:
        spec_from_config(config)
    assert "cluster.aks.nodeOsUpgradeChannelReason" in str(error.value)
