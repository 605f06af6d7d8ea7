"""Azure Resource Manager on loopback, over TLS with a CA of the test's own: it checks the Entra token and serves
one managed cluster (the example AKS stacks' ``rg-inference-weu-1/aks-inference-weu-1`` in subscription ``0000``,
which the fake cluster's nodes name in ``spec.providerID``) with the node OS upgrade channel the test gives."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from azure.core.credentials import AccessToken

from cloud_credentials.azure_management import ARM_SCOPE, AzureManagement
from cloud_credentials.credentials import AzureToken
from tests.loopback_http import FakeHandler
from tests.private_ca import private_ca

TOKEN = "arm-token"
CLUSTER = ("/subscriptions/0000/resourceGroups/rg-inference-weu-1/providers/Microsoft.ContainerService/"
           "managedClusters/aks-inference-weu-1")


@dataclass
class Arm:
    channel: str | None
    status: int = 200
    url: str = ""
    ca_file: str = ""
    seen: list[str] = field(default_factory=list)


@contextmanager
def serve(tmp_path: Path, channel: str | None, status: int = 200) -> Iterator[Arm]:
    arm = Arm(channel, status)

    class Handler(FakeHandler):
        def do_GET(self) -> None:  # noqa: N802 - the handler's name
            arm.seen.append(self.path)
            parts = urlsplit(self.path)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self.send_json(401, {"error": {"code": "AuthenticationFailed"}})
            elif arm.status != 200:
                self.send_json(arm.status, {"error": {"code": "AuthorizationFailed"}})
            elif parts.path != CLUSTER or "api-version=" not in parts.query:
                self.send_json(404, {"error": {"code": "ResourceNotFound"}})
            else:
                profile = {"nodeOSUpgradeChannel": arm.channel} if arm.channel else {}
                self.send_json(200, {"name": "aks-inference-weu-1", "properties": {"autoUpgradeProfile": profile}})

    bundle, tls = private_ca(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    arm.url, arm.ca_file = f"https://127.0.0.1:{server.server_address[1]}", str(bundle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield arm
    finally:
        server.shutdown()
        server.server_close()


class Entra:
    """An azure-identity credential that hands out the token ARM accepts, recording the scopes asked."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(TOKEN, 4_102_444_800)


def reader(arm: Arm, entra: Entra | None = None) -> AzureManagement:
    return AzureManagement(AzureToken(scope=ARM_SCOPE, credential=entra or Entra()), endpoint=arm.url,
                           ca_file=arm.ca_file)
