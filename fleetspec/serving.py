"""Model servers as the checks meet them: which serving engine an image runs, and the health route on which the
engine answers only once its model is loaded (what a readiness or startup probe must ask).

Routes, from each engine's own HTTP API: vLLM ``/health`` (and ``/v1/models``; the OpenAI server binds its port
before the engine has loaded the weights, so a TCP probe passes early), TGI ``/health``, Triton
``/v2/health/ready`` (or a model's ``/v2/models/<name>/ready``; Triton also serves the gRPC health service), and
SGLang ``/health`` and ``/health_generate``.
"""

from __future__ import annotations

import re

from fleetspec.model import Model

VLLM, TGI, TRITON, SGLANG = "vllm", "tgi", "triton", "sglang"

# A model server's image: one path segment of the repository names the server, alone or with a suffix/prefix
# split by '-', '_' or '.' (vllm/vllm-openai, nvcr.io/nvidia/tritonserver, ghcr.io/huggingface/text-generation-
# inference, tgi-gaudi, lmsysorg/sglang); never a substring of another word ("contiguous" is not TGI).
_SERVER_SEGMENT = re.compile(r"^(?:.*[-_.])?(?P<server>vllm|triton|tritonserver|tgi|text-generation-inference|sglang)"
                             r"(?:[-_.].*)?$", re.IGNORECASE)
_ENGINE_OF_NAME = {"vllm": VLLM, "triton": TRITON, "tritonserver": TRITON, "tgi": TGI,
                   "text-generation-inference": TGI, "sglang": SGLANG}

HEALTH_ROUTES: dict[str, tuple[str, ...]] = {
    VLLM: ("/health", "/v1/models"),
    TGI: ("/health",),
    TRITON: ("/v2/health/ready",),
    SGLANG: ("/health", "/health_generate"),
}
GRPC_HEALTH = frozenset({TRITON})  # engines that serve grpc.health.v1 (what a Kubernetes gRPC probe asks)
_TRITON_MODEL_READY = re.compile(r"^/v2/models/[^/]+(?:/versions/[^/]+)?/ready$")


def engine_of_image(image: str) -> str | None:
    """The serving engine an image runs (VLLM, TGI, TRITON, SGLANG), or None for anything else."""
    repository = image.split("@", 1)[0]
    last = repository.rsplit("/", 1)
    if ":" in last[-1]:
        repository = repository.rsplit(":", 1)[0]
    segments = repository.split("/")
    if len(segments) > 1 and ("." in segments[0] or ":" in segments[0] or segments[0] == "localhost"):
        segments = segments[1:]  # the registry host names no server
    for segment in segments:
        match = _SERVER_SEGMENT.match(segment)
        if match:
            return _ENGINE_OF_NAME[match.group("server").lower()]
    return None


def is_model_server(image: str) -> bool:
    return engine_of_image(image) is not None


def engine_of_model(model: Model) -> str | None:
    """A declared model's engine: ``serving.engine`` when the stack says, else its image's."""
    if model.serving.engine is not None:
        return model.serving.engine.value
    return engine_of_image(model.image)


def answers_when_loaded(engine: str, path: str) -> bool:
    """An HTTP GET of ``path`` is the engine's own health route (a query string aside)."""
    path = path.split("?", 1)[0].rstrip("/") or "/"
    return path in HEALTH_ROUTES[engine] or (engine == TRITON and bool(_TRITON_MODEL_READY.fullmatch(path)))
