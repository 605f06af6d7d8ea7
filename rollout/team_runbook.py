"""`gpu-rollout runbook`: docs/runbook.md with a team's own stack names in every command.

The runbook's commands name the examples' stacks (``--stack prod``, ``Pulumi.canary.yaml``,
``attestations/canary/``). A team whose stacks `gpu-rollout init` named ``team-a-canary`` and ``team-a-prod``
would otherwise run them as printed against the examples' files. The canary comes from the prod stack's own
``promotion.canaryStack`` (what the gate reads), not from a flag, so the runbook pairs the stacks the gate pairs.
Only stack names in command and file positions change; prose about "the canary" and "prod" stays as written.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from fleetspec.load import load_stack_file
from fleetspec.base import Stage
from refusals.errors import InvalidInput
from refusals.exits import Exit
from rollout.project import SOURCE_DIR

RUNBOOK = SOURCE_DIR / "docs" / "runbook.md"
# The examples' canary and prod stacks of each cloud (rollout.starter.EXAMPLES), as the runbook names them.
EXAMPLE_CANARIES = ("canary", "eks-canary", "existing-canary")
EXAMPLE_PRODS = ("prod", "eks-prod", "existing-prod")


def _positions(name: str) -> re.Pattern[str]:
    """Where a stack name stands for a stack: after --stack, in a stack file's name, as an attestation folder."""
    quoted = re.escape(name)
    return re.compile(rf"(?P<head>--stack[ =]|Pulumi\.|attestations/){quoted}(?P<tail>\.yaml|/|(?![\w.-]))")


def for_stacks(text: str, canary: str, prod: str) -> str:
    """``text`` with every example canary's name in a stack position replaced by ``canary``, every example prod's
    by ``prod``."""
    for examples, name in ((EXAMPLE_CANARIES, canary), (EXAMPLE_PRODS, prod)):
        for example in sorted(examples, key=len, reverse=True):
            text = _positions(example).sub(rf"\g<head>{name}\g<tail>", text)
    return text


def header(canary: str, prod: str, stack_file: Path) -> str:
    return (f"<!-- docs/runbook.md for prod stack {prod} and its canary {canary} (promotion.canaryStack of "
            f"{stack_file.name}), printed by `gpu-rollout runbook --stack {prod}`: print it again after an upgrade "
            "of gpu-rollout rather than editing it. -->\n\n")


def execute(stack: str, stack_file: Path, runbook: Path = RUNBOOK) -> Exit:
    """Print the runbook for ``stack`` (a prod stack) and the canary its promotion names."""
    spec = load_stack_file(stack_file)
    if spec.stage is not Stage.PROD or spec.promotion is None:
        raise InvalidInput(f"runbook: {stack_file.name} is a {spec.stage.value} stack; name a prod stack (its "
                           "promotion.canaryStack names the canary the runbook pairs it with)")
    canary = spec.promotion.canaryStack.rsplit("/", 1)[-1]
    sys.stdout.write(header(canary, stack, stack_file) + for_stacks(runbook.read_text(encoding="utf-8"), canary, stack))
    return Exit.OK
