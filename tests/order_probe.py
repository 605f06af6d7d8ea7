"""What `plan --json`, `diff --json` and the policy pack print for the example stacks, as one JSON document
on stdout: run by tests/test_deterministic_order.py in subprocesses under several ``PYTHONHASHSEED``s, which
must all print the same bytes.

    python -m tests.order_probe WORKDIR SHUFFLE_SEED

The pack is handed each stack's resources in an order shuffled by SHUFFLE_SEED, as the engine hands them
in the order they happened to register; its findings must not depend on it.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy
from typer.testing import CliRunner

from policy import pack
from policy.evaluate import from_registered
from policy.registry import REGISTRY
from rollout.cli import app
from tests.conftest import EXAMPLE_STACKS, as_planned
from tests.policy.variants import VARIANTS
from tests.rollout.gitrepo import GIT_ENV, GitRepo

runner = CliRunner()

# Variants whose findings list several resources of one kind in one message (generations, pools).
VARIANT_CASES = ("parallelism-within-spare-capacity", "spare-capacity", "operator-supports-driver")


def plan_json(stack: str) -> str:
    done = runner.invoke(app, ["plan", "--stack", stack, "--json"])
    if done.exit_code not in (0, 1):
        raise SystemExit(f"plan --stack {stack}: exit {done.exit_code}: {done.stderr}")
    return done.stdout


def pack_findings(run: Any, shuffle: random.Random) -> list[str]:
    """Every message of every stack policy and of the advice policy, in the order the pack reported them."""
    resources = [PolicyResource(r.type, r.props, r.urn or f"urn:{r.name}", r.name, None, None, None, [], {})
                 for r in from_registered(run.resources)]
    shuffle.shuffle(resources)
    reported: list[str] = []
    policies = [pack.build_policy(policy) for policy in REGISTRY.values()] + [pack.build_advice_policy()]
    for built in policies:
        if isinstance(built, StackValidationPolicy):
            built.validate(StackValidationArgs(resources, None),
                           lambda message, urn=None, name=built.name: reported.append(f"{name}: {message}"))
    return reported


def diff_json(workdir: Path) -> str:
    """A change to four stacks at once: a canary driver bump, a prod pool released, an EKS canary generation
    node image moved (its node groups differ), an existing cluster's prod pool released."""
    repo = GitRepo(workdir / "fleet")
    base = repo.git("rev-parse", "HEAD")
    repo.edit("canary", "driver", lambda d: d.update(version="595.91.07"))
    repo.pool("prod", "gpua100", lambda p: p["rollout"].update(released=True))

    def new_image(pool: dict[str, Any]) -> None:
        newest = max(pool["generations"], key=lambda g: g["id"])
        newest["releaseVersion"] = "1.33.5-20251201"

    repo.pool("eks-canary", "gpu-canary", new_image)
    repo.edit("existing-prod", "driver", lambda d: d.update(version="595.91.07"))
    head = repo.commit("four stacks change")
    done = runner.invoke(app, ["diff", "--project-dir", str(repo.root), "--base", base, "--head", head, "--json"],
                         env=GIT_ENV)
    if done.exit_code != 0:
        raise SystemExit(f"diff: exit {done.exit_code}: {done.stderr}")
    return done.stdout


def main(workdir: Path, seed: int) -> None:
    shuffle = random.Random(seed)
    document: dict[str, Any] = {"plan": {}, "pack": {}}
    for stack in EXAMPLE_STACKS:
        document["plan"][stack] = plan_json(stack)
        document["pack"][stack] = pack_findings(as_planned(stack), shuffle)
    for policy in VARIANT_CASES:
        stack, build, _ = VARIANTS[policy]
        document["pack"][f"variant {policy}"] = pack_findings(as_planned(stack, build()), shuffle)
    document["diff"] = diff_json(workdir)
    sys.stdout.write(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
