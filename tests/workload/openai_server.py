"""A small OpenAI-compatible completions server on loopback, shaped like vLLM's: ``/health``, ``/v1/models``,
``/v1/completions`` without streaming and streamed as server-sent events over chunked transfer encoding
(one chunk per token, a ``usage`` chunk when ``stream_options.include_usage`` is set, ``data: [DONE]``).

Its behaviour is set per test: the text it "generates" (one token per word), how long the first token
and each next one take, whether ``/health`` says ready, and a hook called on every completion request
(a test makes the fake NVML see an Xid there, as a GPU would during the run). Also runnable as the
program's serving process: ``python -m tests.workload.openai_server --port P [--model M]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty")


@dataclass
class Behaviour:
    model: str = "validation-model"
    text: str = TEXT
    ready: bool = True
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    send_usage: bool = True
    on_completion: Callable[[dict[str, Any]], None] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    def tokens(self, count: int, ignore_eos: bool) -> list[str]:
        words = [f" {w}" for w in self.text.split()]
        source = itertools.cycle(words) if ignore_eos else iter(words)
        return list(itertools.islice(source, count))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
        pass

    def _json(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        behaviour = self.server.behaviour
        if self.path == "/health":
            self._json(200 if behaviour.ready else 503, {})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": behaviour.model, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802
        behaviour = self.server.behaviour
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        behaviour.requests.append(body)
        if self.path != "/v1/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if body.get("model") != behaviour.model:
            self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
            return
        if behaviour.on_completion is not None:
            behaviour.on_completion(body)
        tokens = behaviour.tokens(int(body.get("max_tokens", 16)), bool(body.get("ignore_eos")))
        created = int(time.time())
        if not body.get("stream"):
            time.sleep(behaviour.first_token_delay + behaviour.token_delay * max(0, len(tokens) - 1))
            self._json(200, {"id": "cmpl-test", "object": "text_completion", "created": created,
                             "model": behaviour.model,
                             "choices": [{"index": 0, "text": "".join(tokens), "logprobs": None,
                                          "finish_reason": "length"}],
                             "usage": {"prompt_tokens": 7, "completion_tokens": len(tokens),
                                       "total_tokens": 7 + len(tokens)}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(behaviour.first_token_delay)
        for index, token in enumerate(tokens):
            if index:
                time.sleep(behaviour.token_delay)
            last = index == len(tokens) - 1
            event = {"id": "cmpl-test", "object": "text_completion", "created": created, "model": behaviour.model,
                     "choices": [{"index": 0, "text": token, "logprobs": None,
                                  "finish_reason": "length" if last else None}]}
            self._chunk(f"data: {json.dumps(event)}\n\n".encode())
        if behaviour.send_usage and (body.get("stream_options") or {}).get("include_usage"):
            usage = {"id": "cmpl-test", "object": "text_completion", "created": created, "model": behaviour.model,
                     "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(tokens),
                                              "total_tokens": 7 + len(tokens)}}
            self._chunk(f"data: {json.dumps(usage)}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    behaviour: Behaviour


class OpenAIServer:
    """Started on a free loopback port; ``url`` is its base URL; always ``stop()``."""

    def __init__(self, behaviour: Behaviour | None = None, port: int = 0) -> None:
        self.behaviour = behaviour or Behaviour()
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.behaviour = self.behaviour
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> OpenAIServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default=Behaviour.model)
    parser.add_argument("--exit-after", type=float, help="exit with code 3 after this many seconds (a crash)")
    args = parser.parse_args()
    server = OpenAIServer(Behaviour(model=args.model), port=args.port)
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        raise SystemExit(3)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
