"""Fixtures of the validation program's tests: a fake NVML standing in for pynvml, an OpenAI-compatible
server on loopback, a stand-in for the node PATCH, and the program's own entry point to run."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.workload.fake_nvml import FakeNvml
from tests.workload.kube_api import KubeApi
from tests.workload.openai_server import Behaviour, OpenAIServer
from workload import result, validate

NODE = "gpu-l40s-c01"
TARGET = "580.173.02"
MODEL = "validation-model"


def program_config(url: str, **changes: Any) -> dict[str, Any]:
    """The program's configuration as components/validation.py renders it, for a server already running."""
    config: dict[str, Any] = {
        "apiVersion": result.CONFIG_API_VERSION,
        "stage": "canary",
        "cluster": "lab-gpu-1",
        "pool": "l40s-canary",
        "targetDriver": TARGET,
        "gpusPerNode": 1,
        "image": "vllm/vllm-openai:v0.10.2",
        "model": MODEL,
        "modelPath": "/models/validation-model",
        "prompt": "Count from one to ten.",
        "maxTokens": 16,
        "requests": 3,
        "minTokensPerSecond": 20,
        "baseline": None,
        "tolerance": {"timeToFirstToken": 0.5, "tokensPerSecond": 0.1},
        "server": {"command": [], "url": url, "startupTimeoutSeconds": 5, "requestTimeoutSeconds": 30},
        "textfileDirectory": None,
    }
    config.update(changes)
    return config


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """One healthy L40S on the target driver, imported by the program as ``pynvml``."""
    fake = FakeNvml.uniform(1)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    return fake


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer(Behaviour(model=MODEL, token_delay=0.001)).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    api = KubeApi(nodes={NODE: {"metadata": {"name": NODE, "labels": {"gpu.example.com/pool": "l40s-canary"}}}})
    try:
        yield api
    finally:
        api.stop()


@dataclass
class Run:
    code: int
    result: result.Result | None  # as written to the node (parsed back), None when nothing was written
    node: dict[str, Any]


@pytest.fixture
def run_validation(tmp_path: Path, kube: KubeApi) -> Callable[..., Run]:
    """Write the config, run the program's ``main`` against the stand-in API server, read back what it wrote."""
    token = tmp_path / "token"
    token.write_text("validation-token\n")

    def run(config: dict[str, Any], *extra: str) -> Run:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        before = len(kube.requests)
        code = validate.main(["--config", str(path), "--node", NODE, "--api-server", kube.url,
                              "--token-file", str(token), *extra])
        node = kube.nodes[NODE]
        written = None
        if len(kube.requests) > before and kube.status is None:
            annotation = node["metadata"]["annotations"][result.result_annotation(config["targetDriver"])]
            written = result.parse_result(annotation)
        return Run(code, written, node)

    return run
