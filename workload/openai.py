"""A client of the serving process's OpenAI-compatible HTTP API (vLLM's), with the standard library only.

``/health`` says the engine is up, ``/v1/models`` which names it serves, ``/v1/completions`` answers: once
without streaming (the greedy completion whose digest is compared), and streamed as server-sent events
(``data: {...}`` lines, ``data: [DONE]`` last, a final chunk with ``usage`` when
``stream_options.include_usage`` is set) for the timings.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ServerError(Exception):
    """The server did not answer as an OpenAI-compatible server should."""


def _request(url: str, body: dict[str, Any] | None, timeout: float) -> urllib.request.Request:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    return urllib.request.Request(url, data=data, method="POST" if data is not None else "GET", headers=headers)


def get_json(url: str, timeout: float) -> tuple[int, Any]:
    """(HTTP status, parsed body or None); raises OSError when nothing answers."""
    try:
        with urllib.request.urlopen(_request(url, None, timeout), timeout=timeout) as response:  # noqa: S310
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        return error.code, None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def wait_ready(base_url: str, model: str, timeout: float, exited: Callable[[], str | None],
               interval: float = 1.0) -> float:
    """Seconds until ``/health`` answers 200 and ``/v1/models`` lists ``model``; ServerError otherwise.

    ``exited()`` names why the serving process is gone (then waiting longer is pointless), else None.
    """
    started = time.monotonic()
    deadline = started + timeout
    last = "no answer yet"
    while True:
        gone = exited()
        if gone:
            raise ServerError(f"the serving process {gone} before it was ready ({last})")
        try:
            status, _ = get_json(f"{base_url}/health", timeout=min(10.0, timeout))
            if status == 200:
                status, models = get_json(f"{base_url}/v1/models", timeout=min(10.0, timeout))
                served = [m.get("id") for m in (models or {}).get("data") or [] if isinstance(m, dict)]
                if status == 200 and model in served:
                    return time.monotonic() - started
                last = f"/v1/models answered {status} serving {served}, not {model!r}"
            else:
                last = f"/health answered {status}"
        except OSError as error:
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() >= deadline:
            raise ServerError(f"not ready after {timeout:.0f}s: {last}")
        time.sleep(interval)


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Completion:
    text: str
    completion_tokens: int | None
    finish_reason: str | None


def complete(base_url: str, model: str, prompt: str, max_tokens: int, timeout: float) -> Completion:
    """One greedy completion, not streamed."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 0, "n": 1,
            "stream": False}
    try:
        with urllib.request.urlopen(_request(f"{base_url}/v1/completions", body, timeout),  # noqa: S310
                                    timeout=timeout) as response:
            document = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise ServerError(f"/v1/completions answered {error.code}: {error.read()[:300]!r}") from None
    except (OSError, ValueError) as error:
        raise ServerError(f"/v1/completions: {type(error).__name__}: {error}") from None
    try:
        choice = document["choices"][0]
        text = choice["text"]
    except (KeyError, IndexError, TypeError):
        raise ServerError(f"/v1/completions answered no choices[0].text: {str(document)[:300]}") from None
    usage = document.get("usage") or {}
    tokens = usage.get("completion_tokens")
    return Completion(str(text), int(tokens) if isinstance(tokens, int) else None, choice.get("finish_reason"))


@dataclass(frozen=True)
class Timing:
    time_to_first_token: float  # seconds from sending the request to the first chunk with text
    completion_tokens: int
    decode_seconds: float  # from the first chunk with text to the last one
    text: str

    @property
    def tokens_per_second(self) -> float | None:
        """Decode rate: tokens after the first over the time they took (None with fewer than two tokens)."""
        if self.completion_tokens < 2 or self.decode_seconds <= 0:
            return None
        return (self.completion_tokens - 1) / self.decode_seconds


def stream(base_url: str, model: str, prompt: str, max_tokens: int, timeout: float) -> Timing:
    """One streamed greedy completion of exactly ``max_tokens`` tokens (``ignore_eos``), timed."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 0, "n": 1,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    started = time.monotonic()
    first = last = None
    chunks = 0
    usage_tokens = None
    parts: list[str] = []
    done = False
    try:
        with urllib.request.urlopen(_request(f"{base_url}/v1/completions", body, timeout),  # noqa: S310
                                    timeout=timeout) as response:
            for raw in response:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue  # blank separators, comments, other SSE fields
                payload = line.removeprefix("data:").strip()
                if payload == "[DONE]":
                    done = True
                    break
                event = json.loads(payload)
                usage = event.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    usage_tokens = usage["completion_tokens"]
                for choice in event.get("choices") or []:
                    text = choice.get("text") or ""
                    if text:
                        now = time.monotonic()
                        first = now if first is None else first
                        last = now
                        chunks += 1
                        parts.append(text)
    except urllib.error.HTTPError as error:
        raise ServerError(f"/v1/completions (stream) answered {error.code}: {error.read()[:300]!r}") from None
    except (OSError, ValueError) as error:
        raise ServerError(f"/v1/completions (stream): {type(error).__name__}: {error}") from None
    if not done:
        raise ServerError("/v1/completions (stream) ended without data: [DONE]")
    if first is None or last is None:
        raise ServerError("/v1/completions (stream) sent no text")
    # vLLM sends one chunk per token; the usage chunk counts them exactly where the server sends it.
    tokens = usage_tokens if usage_tokens is not None else chunks
    return Timing(first - started, tokens, last - first, "".join(parts))
