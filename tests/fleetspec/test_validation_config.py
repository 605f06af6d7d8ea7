"""The `validation` block: what the job needs is required, each bad value is refused at its own key."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fleetspec.load import SpecError, spec_from_config
from tests.conftest import edited, stack_config

KEY = "gpu-driver-upgrade:validation"


def _problems(edit: Callable[[dict], object]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        spec_from_config(edited("existing-canary", "validation", edit))
    return {p.path: p.message for p in caught.value.problems}


def test_the_example_block_loads_with_its_defaults() -> None:
    spec = spec_from_config(edited("existing-canary", "validation", lambda v: None))
    validation = spec.validation
    assert validation is not None
    assert validation.modelPath == "/models/Qwen2.5-0.5B-Instruct"
    assert validation.cacheVolume is not None and validation.cacheVolume.claimName == "validation-models"
    assert (validation.maxTokens, validation.requests, validation.startupTimeoutSeconds) == (64, 3, 900)
    assert (validation.tolerance.timeToFirstToken, validation.tolerance.tokensPerSecond) == ("50%", "10%")
    assert validation.baselines == {}


def test_a_baseline_per_pool_loads() -> None:
    digest = "sha256:" + "ab" * 32
    spec = spec_from_config(edited("existing-canary", "validation", lambda v: v.update(baselines={
        "l40s-canary": {"timeToFirstTokenSeconds": 0.05, "tokensPerSecond": 180, "tokenDigest": digest,
                        "recordedOn": "570.195.03"}})))
    assert spec.validation is not None
    baseline = spec.validation.baselines["l40s-canary"]
    assert (baseline.tokensPerSecond, baseline.tokenDigest, baseline.recordedOn) == (180, digest, "570.195.03")


@pytest.mark.parametrize(("edit", "key", "reason"), [
    (lambda v: v.pop("modelPath"), "modelPath", "required key is missing"),
    (lambda v: v.update(image="vllm/vllm-openai"), "image", "explicit tag or digest"),
    (lambda v: v.update(image="vllm/vllm-openai:latest"), "image", "not latest"),
    (lambda v: v.update(modelPath="Qwen/Qwen2.5-0.5B-Instruct"), "modelPath", "absolute path"),
    (lambda v: v.update(modelPath="/models/../etc"), "modelPath", "absolute path"),
    (lambda v: v.update(modelPath="/opt/qwen"), "modelPath", "not under cacheVolume.mountPath '/models'"),
    (lambda v: v.update(cacheVolume={"claimName": "a", "hostPath": "/var/lib/models"}), "cacheVolume.claimName",
     "exactly one of claimName"),
    (lambda v: v.update(cacheVolume={}), "cacheVolume.claimName", "exactly one of claimName"),
    (lambda v: v.update(cacheVolume={"claimName": "Models_1"}), "cacheVolume.claimName", "not a valid"),
    (lambda v: v.update(tolerance={"tokensPerSecond": 0.1}), "tolerance.tokensPerSecond", "a percentage"),
    (lambda v: v.update(tolerance={"timeToFirstToken": "150%"}), "tolerance.timeToFirstToken", "a percentage"),
    (lambda v: v.update(maxTokens=0), "maxTokens", "greater than 0"),
    (lambda v: v.update(requests="3"), "requests", "valid integer"),
    (lambda v: v.update(serverArgs=["--port=9000"]), "serverArgs", "set by the job itself"),
    (lambda v: v.update(textfileDirectory="textfile"), "textfileDirectory", "absolute path"),
    (lambda v: v.update(baselines={"gpu-l40s": {"timeToFirstTokenSeconds": 0.05, "tokensPerSecond": 180}}),
     "baselines.gpu-l40s", "names no pool of this stack (h100-canary, l40s-canary)"),
    (lambda v: v.update(baselines={"l40s-canary": {"timeToFirstTokenSeconds": 0.05, "tokensPerSecond": 180,
                                                   "tokenDigest": "abc"}}),
     "baselines.l40s-canary.tokenDigest", "not a digest"),
    (lambda v: v.update(baselines={"l40s-canary": {"timeToFirstTokenSeconds": 0, "tokensPerSecond": 180}}),
     "baselines.l40s-canary.timeToFirstTokenSeconds", "greater than 0"),
    (lambda v: v.update(minTokensPerSecnd=40), "minTokensPerSecnd", "unknown key"),
    (lambda v: v.update(evictOnFailure={"gpu-l40s": False}), "evictOnFailure.gpu-l40s",
     "names no pool of this stack (h100-canary, l40s-canary)"),
    (lambda v: v.update(evictOnFailure={"l40s-canary": "no"}), "evictOnFailure.l40s-canary", "valid boolean"),
])
def test_a_bad_value_is_refused_at_its_key(edit: Callable[[dict], object], key: str, reason: str) -> None:
    problems = _problems(edit)
    assert f"{KEY}.{key}" in problems, problems
    assert reason in problems[f"{KEY}.{key}"]


def test_a_failed_node_s_model_pods_are_evicted_on_serving_pools_unless_the_stack_says_otherwise() -> None:
    spec = spec_from_config(edited("existing-canary", "validation", lambda v: None))
    assert [spec.evicts_on_failed_validation(p) for p in spec.nodePools] == [True, True]  # canary pools serve
    batch = spec_from_config(edited("existing-canary", "nodePools", lambda pools: pools[1].update(role="batch")))
    assert [batch.evicts_on_failed_validation(p) for p in batch.nodePools] == [True, False]
    told = spec_from_config(edited("existing-canary", "validation",
                                   lambda v: v.update(evictOnFailure={"l40s-canary": False})))
    assert [told.evicts_on_failed_validation(p) for p in told.nodePools] == [False, True]


def test_a_validation_pod_takes_every_gpu_of_its_node_on_the_pools_the_job_validates() -> None:
    canary = spec_from_config(stack_config("existing-canary"))
    assert {p.name: canary.validation_gpus(p) for p in canary.nodePools} == {"l40s-canary": 1, "h100-canary": 8}
    config = stack_config("existing-prod")
    declared = config.pop(KEY)  # the example declares the job (issue 23); first without it
    prod = spec_from_config(config)
    assert {p.name: prod.validation_gpus(p) for p in prod.nodePools} == {"l40s-serving": 0, "h100-serving": 0}
    config[KEY] = declared
    validated = spec_from_config(config)
    # The released pool is validated with all 4 GPUs of a node; the held one is not validated at all.
    assert {p.name: validated.validation_gpus(p) for p in validated.nodePools} == {"l40s-serving": 4,
                                                                                  "h100-serving": 0}
