"""An Entra ID AKS kubeconfig (what listClusterUserCredential returns: a kubelogin exec user, device code by
default) made usable without a person, as `kubelogin convert-kubeconfig -l azurecli|workloadidentity` would,
or refused with the reason; and the program's AKS provider built from it."""

from __future__ import annotations

import json

import pytest
import yaml

from renderers.kubelogin import KubeloginError, login_method, non_interactive

SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"  # the AKS AAD server application every cluster shares


def aks_kubeconfig(args: list[str]) -> str:
    """The kubeconfig AKS returns for an Entra ID cluster, with the kubelogin arguments given."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "aks-inference-weu-1",
        "clusters": [{"name": "aks-inference-weu-1", "cluster": {"server": "https://aks-weu-1.hcp.westeurope.azmk8s.io:443",
                                                                 "certificate-authority-data": "Q0E="}}],
        "contexts": [{"name": "aks-inference-weu-1", "context": {"cluster": "aks-inference-weu-1",
                                                                 "user": "clusterUser_rg_aks"}}],
        "users": [{"name": "clusterUser_rg_aks", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin", "args": args,
            "env": None, "provideClusterInfo": False, "installHint": "install kubelogin"}}}],
    })


DEVICE_CODE = ["get-token", "--login", "devicecode", "--server-id", SERVER_ID, "--client-id",
               "80faf920-1908-4b52-b5ef-a8e7bedfc67a", "--tenant-id", "72f988bf-0000-0000-0000-2d7cd011db47",
               "--environment", "AzurePublicCloud"]


def exec_of(text: str) -> dict:
    return json.loads(text)["users"][0]["user"]["exec"]


def test_a_device_code_login_becomes_an_azure_cli_login() -> None:
    converted = non_interactive(aks_kubeconfig(DEVICE_CODE), {})
    assert exec_of(converted)["args"] == ["get-token", "--login", "azurecli", "--server-id", SERVER_ID]
    assert exec_of(converted)["command"] == "kubelogin" and json.loads(converted)["clusters"]


def test_no_login_flag_is_kubelogin_s_device_code_and_workload_identity_is_chosen_by_its_variable() -> None:
    bare = aks_kubeconfig(["get-token", "--server-id", SERVER_ID])
    converted = non_interactive(bare, {"AAD_LOGIN_METHOD": "workloadidentity"})
    assert exec_of(converted)["args"] == ["get-token", "--login", "workloadidentity", "--server-id", SERVER_ID]


def test_a_non_interactive_login_and_a_kubeconfig_without_kubelogin_stay_as_they_came() -> None:
    spn = aks_kubeconfig(["get-token", "--login", "spn", "--server-id", SERVER_ID])
    assert non_interactive(spn, {}) == spn
    local = yaml.safe_dump({"users": [{"name": "admin", "user": {"token": "t"}}]})
    assert non_interactive(local, {"AAD_LOGIN_METHOD": "devicecode"}) == local  # nothing to convert, nothing read


@pytest.mark.parametrize(("text", "environ", "why"), [
    (aks_kubeconfig(["get-token", "--login", "devicecode"]), {}, "names no --server-id, so it cannot be converted"),
    (aks_kubeconfig(DEVICE_CODE), {"AAD_LOGIN_METHOD": "interactive"}, "AAD_LOGIN_METHOD=interactive"),
    (yaml.safe_dump({"users": [{"name": "u", "user": {"auth-provider": {"name": "azure"}}}]}), {},
     "the legacy azure auth-provider"),
    ("- a list", {}, "not a YAML mapping"),
])
def test_what_cannot_be_converted_is_refused_never_waited_on(text: str, environ: dict, why: str) -> None:
    with pytest.raises(KubeloginError, match=why):
        non_interactive(text, environ)


def test_the_login_method_defaults_to_the_azure_cli() -> None:
    assert login_method({}) == "azurecli" and login_method({"AAD_LOGIN_METHOD": " workloadidentity "}) == \
        "workloadidentity"
