"""The program's own AKS provider path (components/cluster.py) on an Entra ID cluster: the kubeconfig AKS hands
it logs in by device code, and the provider gets it converted to a login from the environment (what cannot be
converted is refused by renderers.kubelogin, tests/renderers/test_kubelogin.py). The offline preview's AKS credential
lookup is answered here with such a kubeconfig, and the provider's inputs are read as the mock engine receives
them."""

from __future__ import annotations

import base64
import json

import pytest

from preview import run
from tests.conftest import stack_config
from tests.renderers.test_kubelogin import DEVICE_CODE, SERVER_ID, aks_kubeconfig

CREDENTIALS = "azure-native:containerservice:listManagedClusterUserCredentials"


@pytest.fixture
def providers(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The kubeconfig input of every Kubernetes provider the program registers."""
    seen: list[object] = []
    original = run.RecordingMocks.new_resource

    def recording(self: run.RecordingMocks, args):  # type: ignore[no-untyped-def]
        if args.typ == "pulumi:providers:kubernetes":
            seen.append(args.inputs.get("kubeconfig"))
        return original(self, args)

    monkeypatch.setattr(run.RecordingMocks, "new_resource", recording)
    return seen


def answer(monkeypatch: pytest.MonkeyPatch, kubeconfig: str) -> None:
    encoded = base64.b64encode(kubeconfig.encode()).decode()
    monkeypatch.setitem(run.OFFLINE_INVOKES, CREDENTIALS, {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]})


def test_the_aks_provider_gets_a_kubeconfig_that_logs_in_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, providers: list[object]) -> None:
    monkeypatch.delenv("AAD_LOGIN_METHOD", raising=False)
    answer(monkeypatch, aks_kubeconfig(DEVICE_CODE))
    run.run_program(stack_config("prod"), "prod")
    (given,) = providers
    text = given["value"] if isinstance(given, dict) else given  # the kubeconfig is a secret: its value inside
    assert json.loads(text)["users"][0]["user"]["exec"]["args"] == ["get-token", "--login", "azurecli",
                                                                    "--server-id", SERVER_ID]

