"""A loopback stand-in for the one API call the validation program makes: PATCH /api/v1/nodes/<name> with
a JSON merge patch (RFC 7386), applied to the node it keeps; every request is recorded with its headers.
A test can make it answer an error instead (``status``). tests/e2e/test_validation_job.py runs the same
program against the real API server."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.loopback_http import FakeHandler


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class Recorded:
    method: str
    path: str
    content_type: str
    authorization: str
    body: Any


@dataclass
class KubeApi:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    status: int | None = None  # answer every request with this error status

    def __post_init__(self) -> None:
        api = self

        class Handler(FakeHandler):
            def do_PATCH(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                api.requests.append(Recorded("PATCH", self.path, self.headers.get("Content-Type", ""),
                                             self.headers.get("Authorization", ""), body))
                if api.status is not None:
                    self.send_json(api.status, {"kind": "Status", "message": f"refused with {api.status}"})
                    return
                prefix = "/api/v1/nodes/"
                name = self.path.removeprefix(prefix)
                if not self.path.startswith(prefix) or name not in api.nodes:
                    self.send_json(404, {"kind": "Status", "message": f"nodes \"{name}\" not found"})
                    return
                api.nodes[name] = merge_patch(api.nodes[name], body)
                self.send_json(200, api.nodes[name])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
