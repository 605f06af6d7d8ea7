"""Bad variants of the example stacks: one setting changed, each breaking one policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import change, stack_config

KEY = "gpu-driver-upgrade:"


def model(name: str, **changes: Any) -> Callable[[list[dict]], None]:
    def edit(models: list[dict]) -> None:
        next(m for m in models if m["name"] == name).update(changes)

    return edit


def pool(name: str, **changes: Any) -> Callable[[list[dict]], None]:
    def edit(pools: list[dict]) -> None:
        next(p for p in pools if p["name"] == name).update(changes)

    return edit


def upgrade_policy(**changes: Any) -> Callable[[dict], None]:
    def edit(operator: dict) -> None:
        policy = operator["upgradePolicy"]
        for path, value in changes.items():
            *parents, leaf = path.split("__")
            target = policy
            for part in parents:
                target = target[part]
            target[leaf] = value

    return edit


def _operator_owned_nvidia_ami() -> dict[str, str]:
    # EKS prod switched to an operator-owned driver but still on the NVIDIA AMI, without a pinned release.
    config = change(stack_config("eks-prod"), "driver", lambda d: d.update(owner="operator"))

    def drop_generations(pools: list[dict]) -> None:
        for p in pools:
            p.pop("generations")

    return change(config, "nodePools", drop_generations)


def _v100_on_r595() -> dict[str, str]:
    def edit(pools: list[dict]) -> None:
        pools[0]["gpuProduct"] = "Tesla-V100-SXM2-16GB"
        pools[0]["generations"][1]["driverVersion"] = "595.91.07"

    return change(stack_config("eks-canary"), "nodePools", edit)


def _no_ticket() -> dict[str, str]:
    config = stack_config("prod")
    del config[KEY + "changeTicket"]
    return config


# id -> (stack, config builder, enforcement the violation must carry)
VARIANTS: dict[str, tuple[str, Callable[[], dict[str, str]], str]] = {
    "driver-version-pinned": ("eks-prod", _operator_owned_nvidia_ami, "mandatory"),
    "single-driver-owner": ("eks-prod", _operator_owned_nvidia_ami, "mandatory"),
    "cuda-driver-compatible": (
        "canary", lambda: change(stack_config("canary"), "models", model("llm-chat-canary", cudaVersion="13.1")),
        "mandatory",
    ),
    "gpu-supported-by-driver": ("eks-canary", _v100_on_r595, "mandatory"),
    "operator-supports-driver": (
        "prod", lambda: change(stack_config("prod"), "driver", lambda d: d.update(version="590.48.01")), "mandatory",
    ),
    "fabric-manager-matches": (
        "prod", lambda: change(stack_config("prod"), "nodePools", pool("gpuh100", fabricManager="host")), "mandatory",
    ),
    "canary-one-node-at-a-time": (
        "canary", lambda: change(stack_config("canary"), "gpuOperator", upgrade_policy(maxParallelUpgrades=0)),
        "mandatory",
    ),
    "parallelism-within-spare-capacity": (
        "prod", lambda: change(stack_config("prod"), "gpuOperator", upgrade_policy(maxParallelUpgrades=2)),
        "mandatory",
    ),
    "spare-capacity": (
        "prod", lambda: change(stack_config("prod"), "nodePools", pool("gpua100", nodeCount=7)), "mandatory",
    ),
    "eviction-respects-pdb": (
        "prod", lambda: change(stack_config("prod"), "gpuOperator", upgrade_policy(podDeletion__force=True)),
        "mandatory",
    ),
    "pdb-allows-drain": (
        "prod", lambda: change(stack_config("prod"), "models", model("embed-triton", minAvailable=4)), "mandatory",
    ),
    "model-redundancy": (
        "prod", lambda: change(stack_config("prod"), "models", model("rerank-sglang", replicas=1)), "mandatory",
    ),
    "change-ticket": ("prod", _no_ticket, "mandatory"),
    "upgrade-controller-enabled": (
        "prod", lambda: change(stack_config("prod"), "gpuOperator", upgrade_policy(autoUpgrade=False)), "advisory",
    ),
    "wait-for-batch-jobs": (
        "prod",
        lambda: change(
            stack_config("prod"), "gpuOperator", lambda op: op.update(batchJobSelectors=["workload-class=finetune"])
        ),
        "advisory",
    ),
}
