"""An Entra ID AKS kubeconfig the program can use without a person at a keyboard.

On an AKS cluster with Entra ID integration, ``listClusterUserCredential`` (what the program's Kubernetes
provider is built from, and what `az aks get-credentials` writes) returns a kubeconfig whose user runs the
``kubelogin get-token`` exec plugin, by default with ``--login devicecode``: the plugin prints a code and waits
for someone to enter it in a browser, so a CI `pulumi up` would hang until it times out. :func:`non_interactive`
rewrites such a user the way `kubelogin convert-kubeconfig -l <login>` does: ``get-token --login <login>
--server-id <the cluster's server app id>``, whose credentials come from the environment (``azurecli``: the
session `az login` or the azure/login action left; ``workloadidentity``: the federated token of
``AZURE_CLIENT_ID``/``AZURE_TENANT_ID``/``AZURE_FEDERATED_TOKEN_FILE``). Which one is kubelogin's own
``AAD_LOGIN_METHOD``, else ``azurecli``; another non-interactive method already in the kubeconfig stays, and
an interactive one that cannot be converted is refused with the reason, never waited on. A kubeconfig with no
kubelogin user (a local account, the offline preview's) is returned as it came.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

LOGIN_ENV = "AAD_LOGIN_METHOD"  # kubelogin's own variable for its login method
CONVERTIBLE = ("azurecli", "workloadidentity")  # what the program converts to: credentials from the environment
INTERACTIVE = ("devicecode", "interactive")  # a person must act: never left in the program's kubeconfig
DEFAULT_LOGIN = "devicecode"  # kubelogin get-token without --login
GET_TOKEN = "get-token"


class KubeloginError(ValueError):
    """A kubeconfig the program cannot use without a login by a person; the message says why and what to do."""


def login_method(environ: Mapping[str, str]) -> str:
    """The login to convert to: ``AAD_LOGIN_METHOD`` when set, else ``azurecli``."""
    wanted = environ.get(LOGIN_ENV, "").strip() or "azurecli"
    if wanted not in CONVERTIBLE:
        raise KubeloginError(f"{LOGIN_ENV}={wanted}: the program converts an AKS kubeconfig's device-code login to "
                             f"one of {', '.join(CONVERTIBLE)} (credentials from the environment), not {wanted}")
    return wanted


def _arg(args: list[Any], flag: str) -> str | None:
    for index, value in enumerate(args):
        if value == flag and index + 1 < len(args) and isinstance(args[index + 1], str):
            return str(args[index + 1])
        if isinstance(value, str) and value.startswith(flag + "="):
            return value.split("=", 1)[1]
    return None


def _convert_user(name: str, user: dict[str, Any], environ: Mapping[str, str]) -> bool:
    """Rewrite one kubelogin user in place; whether it changed."""
    if "auth-provider" in user and (user["auth-provider"] or {}).get("name") == "azure":
        raise KubeloginError(f"kubeconfig user {name}: the legacy azure auth-provider logs in by device code; fetch "
                             "the credentials again (listClusterUserCredential gives an exec kubeconfig)")
    plugin = user.get("exec")
    if not isinstance(plugin, dict) or "kubelogin" not in str(plugin.get("command", "")).lower():
        return False
    args = list(plugin.get("args") or [])
    current = _arg(args, "--login") or DEFAULT_LOGIN
    if current not in INTERACTIVE:
        return False  # already non-interactive (azurecli, workloadidentity, spn, msi ...): as it came
    login = login_method(environ)
    server = _arg(args, "--server-id")
    if not server:
        raise KubeloginError(f"kubeconfig user {name}: kubelogin logs in by {current} and names no --server-id, so "
                             f"it cannot be converted to {login}; a CI run would wait for a person")
    plugin["args"] = [GET_TOKEN, "--login", login, "--server-id", server]  # --login wins over AAD_LOGIN_METHOD
    return True


def non_interactive(kubeconfig: str, environ: Mapping[str, str]) -> str:
    """``kubeconfig`` with every kubelogin user that would log in interactively converted to the login
    ``environ`` names (:func:`login_method`); as it came when no user needed it. KubeloginError where a user
    cannot be converted."""
    try:
        document = yaml.safe_load(kubeconfig)
    except yaml.YAMLError as error:
        raise KubeloginError(f"the cluster's kubeconfig is not YAML: {error}") from None
    if not isinstance(document, dict):
        raise KubeloginError("the cluster's kubeconfig is not a YAML mapping")
    changed = False
    for entry in document.get("users") or []:
        if isinstance(entry, dict) and isinstance(entry.get("user"), dict):
            changed = _convert_user(str(entry.get("name")), entry["user"], environ) or changed
    return json.dumps(document) if changed else kubeconfig
