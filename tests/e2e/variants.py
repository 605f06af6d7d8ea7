"""Stacks of their own beside the session's: the existing-cluster examples with their pools renamed (selecting the
same nodes) and models whose PDBs select no pod, without the validation job and the in-cluster guard. Their records shared with the
session's stacks (kube-system/gpu-driver-upgrade-<stage>, the promotion record) are taken over with the provider's
patch force. The session's prod stack owns the cluster's prod validation job and guard, so these prod stacks are judged by
the prod pack config with `validation-job-required` disabled, written beside the project."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import e2e_prod_config, policy_args
from tests.e2e.pulumi_cli import Pulumi


def own_pools(config: dict, renamed: dict[str, str], prefix: str) -> None:
    """``config``'s pools under the names ``renamed`` gives, its models under ``prefix`` selecting no pod: a
    second PDB over the session's model pods would make the eviction API refuse them ("more than one
    PodDisruptionBudget") in every later test."""
    for pool in config["nodePools"]:
        pool["name"] = renamed[pool["name"]]
    config.pop("validation", None)
    config["guard"] = {"enabled": False}  # the session's prod stack's guard is the cluster's (its namespace, its roles)
    for model in config["models"]:
        model["name"] = f"{prefix}-{model['name']}"
        model["nodePools"] = [renamed[p] for p in model["nodePools"]]
        model["matchLabels"] = {"app": model["name"]}
    waivers = (config.get("promotion") or {}).get("waivers") or {}
    if waivers:
        config["promotion"]["waivers"] = {renamed[pool]: waiver for pool, waiver in waivers.items()}


def policy(pulumi: Pulumi, pack: Path, stage: str) -> list[str]:
    """The pack and its stage's config; in prod without `validation-job-required` (the module docstring)."""
    if stage != "prod":
        return policy_args(pack, stage)
    config = e2e_prod_config()
    config["validation-job-required"] = "disabled"
    written = pulumi.project / "variant-prod-policy.json"
    written.write_text(json.dumps(config))
    return ["--policy-pack", str(pack), "--policy-pack-config", str(written)]
