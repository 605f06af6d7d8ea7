"""What every loopback HTTP fake of the tests shares: a request handler that keeps quiet on stderr and answers a
whole body at once (JSON unless told otherwise), with its Content-Length."""

from __future__ import annotations

import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any


class FakeHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def send_body(self, status: int, data: bytes, content_type: str | None = "application/json",
                  headers: Mapping[str, str] | None = None, with_body: bool = True) -> None:
        """``data`` as the answer; ``with_body`` False for a HEAD (the headers say what a GET would send)."""
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if with_body:
            self.wfile.write(data)

    def send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None,
                  with_body: bool = True) -> None:
        self.send_body(status, json.dumps(body).encode(), headers=headers, with_body=with_body)
