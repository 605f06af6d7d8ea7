"""A loopback webhook receiver for the announcement tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from tests.loopback_http import FakeHandler


class Receiver:
    """A loopback webhook: records each JSON body; answers ``status``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.status = 200
        receiver = self

        class Handler(FakeHandler):
            def do_POST(self) -> None:  # noqa: N802 - the handler's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.status == 200:
                    receiver.bodies.append(json.loads(body))
                self.send_body(receiver.status, b"ok", content_type=None)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()
    found.server.server_close()
