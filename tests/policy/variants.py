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


def eks_pool(name: str, **changes: Any) -> Callable[[list[dict]], None]:
    """Edit the ``eks`` block of one pool (a value of None removes the key)."""

    def edit(pools: list[dict]) -> None:
        block = next(p for p in pools if p["name"] == name)["eks"]
        for key, value in changes.items():
            if value is None:
                block.pop(key, None)
            else:
                block[key] = value

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


def _v100_on_r595() -> dict[str, str]:
    def edit(pools: list[dict]) -> None:
        pools[0]["gpuProduct"] = "Tesla-V100-SXM2-16GB"
        pools[0]["eks"]["instanceTypes"] = ["p3.8xlarge"]  # four V100 SXM2, as gpusPerNode says
        pools[0]["generations"][1]["driverVersion"] = "595.91.07"

    return change(stack_config("eks-canary"), "nodePools", edit)


def _no_ticket() -> dict[str, str]:
    config = stack_config("prod")
    del config[KEY + "changeTicket"]
    return config


# id -> (stack, config builder, enforcement the violation must carry)
# driver-version-pinned, nvidiadriver-selectors-disjoint, single-driver-owner and operator-supports-os have
# none: FleetSpec refuses every config that would render an unpinned driver, an NVIDIA AMI or AKS-installed
# driver under the operator, or an operator-owned pool on an OS without a driver image, and the program
# renders one NVIDIADriver per pool; test_rules.py feeds those rules hand-edited resources instead.
VARIANTS: dict[str, tuple[str, Callable[[], dict[str, str]], str]] = {
    "cuda-driver-compatible": (
        "canary", lambda: change(stack_config("canary"), "models", model("llm-chat-canary", cudaVersion="13.1")),
        "mandatory",
    ),
    "gpu-supported-by-driver": ("eks-canary", _v100_on_r595, "mandatory"),
    # issue 30: eight H100 SXM on NVSwitch declared as the canary's PCIe H100 NVL (the whole case, GPUs per node and
    # NVSwitch too, is in test_platform_rules.py: one GPU per node would break spare-capacity as well)
    "pool-hardware-matches-size": (
        "prod", lambda: change(stack_config("prod"), "nodePools", pool("gpuh100", gpuProduct="NVIDIA-H100-NVL")),
        "mandatory",
    ),
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
        # gpua100's own policy (nodePools[].upgradePolicy) at two nodes: its one spare A100 cannot cover them.
        "prod", lambda: change(stack_config("prod"), "nodePools",
                               pool("gpua100", upgradePolicy={"maxParallelUpgrades": 2, "maxUnavailable": 2})),
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
    # One cluster-wide driver on an existing cluster: nothing shows the held pool cannot grow.
    "held-pool-pinned": (
        "existing-prod",
        lambda: _accepting_driver_mode(change(stack_config("existing-prod"), "gpuOperator",
                                              lambda op: op.update(useNvidiaDriverCrd=False))),
        "mandatory",
    ),
    "wait-for-batch-jobs": (
        "prod",
        lambda: change(
            stack_config("prod"), "gpuOperator", lambda op: op.update(batchJobSelectors=["workload-class=finetune"])
        ),
        "advisory",
    ),
    # Issue 23. The L40S pool (wave 2) stays released while the A10G batch pool (wave 1) goes back to being held.
    "waves-in-order": ("eks-prod", lambda: change(stack_config("eks-prod"), "nodePools", _a10g_held), "mandatory"),
    "validation-job-required": ("prod", lambda: _without("prod", "validation"), "mandatory"),
    "guard-image-digest": (
        "prod", lambda: change(stack_config("prod"), "guard", lambda g: g.update(
            image="ghcr.io/example-org/gpu-driver-upgrade:v1.4.0")), "mandatory",
    ),
    "soak-floor": (
        "prod", lambda: change(stack_config("prod"), "promotion", lambda p: p.update(minSoakHours=12)), "mandatory",
    ),
    "maintenance-window": (
        "prod", lambda: change(stack_config("prod"), "rollout", lambda r: r.pop("maintenanceWindow")), "mandatory",
    ),
}


def _a10g_held(pools: list[dict]) -> None:
    """gpu-a10g held on its 570.195.03 generation (the 580.173.02 one removed, the old one live again)."""
    a10g = next(p for p in pools if p["name"] == "gpu-a10g")
    a10g["rollout"]["released"] = False
    a10g["generations"] = [{**a10g["generations"][0], "retired": False}]


def _without(stack: str, key: str) -> dict[str, str]:
    config = stack_config(stack)
    del config[KEY + key]
    return config


def _l40s_on_its_first_generation(pools: list[dict]) -> None:
    l40s = next(p for p in pools if p["name"] == "gpu-l40s")
    l40s["generations"] = l40s["generations"][:1]


def _l40s_first_generation_retired(pools: list[dict]) -> None:
    next(p for p in pools if p["name"] == "gpu-l40s")["generations"][0]["retired"] = True


def _helm_without_nvidiadrivers(selectors: list[str]) -> dict[str, str]:
    """Prod with the operator installed by Helm and one cluster-wide driver: the Helm Release carries no
    metadata, so only the PDBs show the declared batch selectors."""

    def edit(op: dict) -> None:
        # The held pools are held by the skip label alone here (policy held-pool-pinned): accepted, with a reason.
        op.update(clusterPolicy="helm", useNvidiaDriverCrd=False, batchJobSelectors=selectors,
                  unpinnedHoldReason="fixed-size pools, node auto-repair off (CHG-1)")

    return _accepting_driver_mode(change(stack_config("prod"), "gpuOperator", edit))


def _accepting_driver_mode(config: dict[str, str]) -> dict[str, str]:
    """The stack's shipped waivers also accept the driver mode: one ClusterPolicy driver here, per-pool
    NVIDIADrivers on the canary that attested it (a difference the prod gate names, canary-attested)."""

    def edit(promotion: dict[str, Any]) -> None:
        for waiver in promotion["waivers"].values():
            waiver["accept"] = [*waiver["accept"], "driver-mode"]

    return change(config, "promotion", edit)


# More bad variants, for policies with a second way to fail: name -> (policy id, stack, builder, enforcement).
MORE_VARIANTS: dict[str, tuple[str, str, Callable[[], dict[str, str]], str]] = {
    # cuda-compat-12-9 runs on R535 and R570 only: on R580 the older package must go, although 580.173.02
    # runs CUDA 12.9 natively.
    "forward-compat-package-older-than-driver": (
        "cuda-driver-compatible", "canary",
        lambda: change(
            stack_config("canary"), "models", model("llm-chat-canary", cudaVersion="12.9", cudaForwardCompat=True)
        ),
        "mandatory",
    ),
    # EKS managed node groups take updateConfig.maxUnavailable nodes out during an AMI update; the H100
    # group runs on a Capacity Block (no surge), so 2 of its 3 nodes out leave llm-chat below minAvailable.
    "eks-node-group-unavailable-beyond-spare": (
        "parallelism-within-spare-capacity", "eks-prod",
        lambda: change(stack_config("eks-prod"), "nodePools", eks_pool("gpu-h100", maxUnavailable=2)),
        "mandatory",
    ),
    # Moving by generations is no surge on a Capacity Block: the pool needs its spare node.
    "capacity-block-generations-without-spare-node": (
        "spare-capacity", "eks-prod",
        lambda: change(stack_config("eks-prod"), "nodePools", pool("gpu-h100", nodeCount=2)),
        "mandatory",
    ),
    # ... nor with updateStrategy MINIMAL (GPU capacity declared scarce), even on on-demand capacity.
    "minimal-generations-without-spare-node": (
        "spare-capacity", "eks-canary",
        lambda: change(stack_config("eks-canary"), "nodePools", pool("gpu-canary", nodeCount=1)),
        "mandatory",
    ),
    # Prod runs the guard by default: a stack file without its image (from before the guard) fails until it says.
    "guard-without-image": ("guard-image-digest", "prod", lambda: _without("prod", "guard"), "mandatory"),
    "batch-selectors-in-helm-mode": (
        "wait-for-batch-jobs", "prod", lambda: _helm_without_nvidiadrivers(["workload-class=finetune"]), "advisory",
    ),
}


def _helm_prod(chart: str, per_pool: bool) -> dict[str, str]:
    return change(
        stack_config("prod"), "gpuOperator",
        lambda op: op.update(clusterPolicy="helm", chartVersion=chart, useNvidiaDriverCrd=per_pool),
    )


# Bad changes, checked against the stack's last deployment (`plan --previous-outputs`): name -> (policy id,
# stack, builder of the deployed config, builder of the change, enforcement).
TRANSITION_VARIANTS: dict[str, tuple[str, str, Callable[[], dict[str, str]], Callable[[], dict[str, str]], str]] = {
    # instanceTypes is replace-only on an EKS node group: a same-name replacement fails at create.
    "cloud-pool-not-replaced": (
        "cloud-pool-not-replaced", "eks-prod", lambda: stack_config("eks-prod"),
        lambda: change(stack_config("eks-prod"), "nodePools", eks_pool("gpu-l40s", instanceTypes=["g6e.24xlarge"])),
        "mandatory",
    ),
    # AKS fixes vmSize at creation.
    "aks-vm-size-changed": (
        "cloud-pool-not-replaced", "prod", lambda: stack_config("prod"),
        lambda: change(stack_config("prod"), "nodePools", lambda pools: pools[1]["aks"].update(vmSize="Standard_NC48ads_A100_v4")),
        "mandatory",
    ),
    # The Capacity Block generation's AMI release edited in place while it runs its 3 nodes.
    "capacity-block-updated-empty": (
        "capacity-block-updated-empty", "eks-prod", lambda: stack_config("eks-prod"),
        lambda: change(
            stack_config("eks-prod"), "nodePools",
            lambda pools: pools[2]["generations"][0].update(releaseVersion="1.33.5-20251120"),
        ),
        "mandatory",
    ),
    # The operator chart goes from 26.3.3 to 26.7.0 and per-pool mode comes on in the same Helm upgrade.
    "per-pool-mode-own-change": (
        "per-pool-mode-own-change", "prod", lambda: _helm_prod("v26.3.3", False), lambda: _helm_prod("v26.7.0", True),
        "mandatory",
    ),
    # Issue 23: the L40S pool's first generation retired in the change that first deploys its second, the way
    # back gone before the new generation ran at all.
    "old-generation-kept": (
        "old-generation-kept", "eks-prod",
        lambda: change(stack_config("eks-prod"), "nodePools", _l40s_on_its_first_generation),
        lambda: change(stack_config("eks-prod"), "nodePools", _l40s_first_generation_retired),
        "mandatory",
    ),
}
