"""A small OCI distribution registry on loopback, over TLS with a CA of the test's own, answering as nvcr.io and
Docker Hub do: ``HEAD /v2/<repository>/manifests/<tag>`` without a token is a 401 with a Bearer challenge naming
its token realm, service and scope; the realm (``GET /token``) gives a pull token, anonymously for a public
registry, only for the right Basic login for a private one; with the token, a manifest it holds is 200 and any
other a 404 ``MANIFEST_UNKNOWN``. Every request is recorded."""

from __future__ import annotations

import base64
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback_http import FakeHandler
from tests.private_ca import private_ca

SERVICE = "loopback-registry"


@dataclass
class Registry:
    manifests: set[tuple[str, str]]  # (repository, tag) it holds
    login: tuple[str, str] | None = None  # None: anyone gets a pull token
    url: str = ""
    host: str = ""  # host:port, as an image reference names the registry
    ca_file: str = ""
    tokens: set[str] = field(default_factory=set)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # method, path, headers


def _token(registry: Registry, query: dict[str, list[str]], authorization: str | None) -> tuple[int, dict[str, Any]]:
    """The token realm: a pull token for the registry's service, given the login where it asks for one."""
    if query.get("service") != [SERVICE] or not query.get("scope", [""])[0].endswith(":pull"):
        return 400, {"details": "bad service or scope"}
    if registry.login is not None:
        expected = base64.b64encode(":".join(registry.login).encode()).decode()
        if authorization != f"Basic {expected}":
            return 401, {"details": "login required"}
    token = secrets.token_hex(8)
    registry.tokens.add(token)
    return 200, {"token": token, "expires_in": 300}


def _handler(registry: Registry) -> type[FakeHandler]:
    class Handler(FakeHandler):
        def _manifest(self, send_body: bool) -> None:
            registry.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            parts = urlsplit(self.path)
            if parts.path == "/token" and self.command == "GET":
                self._token(parse_qs(parts.query))
                return
            repository, _, tag = parts.path.removeprefix("/v2/").rpartition("/manifests/")
            if not parts.path.startswith("/v2/") or not repository:
                self.send_json(404, {"errors": [{"code": "NAME_UNKNOWN"}]}, with_body=send_body)
                return
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if token not in registry.tokens:
                challenge = (f'Bearer realm="{registry.url}/token",service="{SERVICE}",'
                             f'scope="repository:{repository}:pull"')
                self.send_json(401, {"errors": [{"code": "UNAUTHORIZED"}]}, {"WWW-Authenticate": challenge}, send_body)
            elif (repository, tag) in registry.manifests:
                self.send_json(200, {"schemaVersion": 2}, {"Docker-Content-Digest": "sha256:" + "0" * 64},
                             send_body)
            else:
                self.send_json(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]}, with_body=send_body)

        def _token(self, query: dict[str, list[str]]) -> None:
            status, body = _token(registry, query, self.headers.get("Authorization"))
            self.send_json(status, body)

        def do_HEAD(self) -> None:  # noqa: N802 - the handler's name
            self._manifest(send_body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._manifest(send_body=True)

    return Handler


@contextmanager
def serve(directory: Path, manifests: set[tuple[str, str]], login: tuple[str, str] | None = None
          ) -> Iterator[Registry]:
    """The registry, up on 127.0.0.1 until the block ends."""
    bundle, tls = private_ca(directory)
    registry = Registry(manifests, login, ca_file=str(bundle))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(registry))
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    registry.host = f"127.0.0.1:{server.server_address[1]}"
    registry.url = f"https://{registry.host}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
