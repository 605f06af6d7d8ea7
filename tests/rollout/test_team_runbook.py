"""Issue 32 point 8: the runbook in a team's own stack names. `gpu-rollout runbook --stack <prod>` prints
docs/runbook.md with the prod stack and the canary its promotion.canaryStack names in every command and file name
where the runbook names the examples' stacks; `init` says so."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from rollout.cli import app
from rollout.team_runbook import RUNBOOK, for_stacks
from tests.rollout.test_init import CLOUDS, init, project  # noqa: F401  (project is a fixture)

runner = CliRunner()
STACK_POSITIONS = re.compile(r"(?:--stack[ =]|Pulumi\.|attestations/)([\w.-]+?)(?:\.yaml|/|(?![\w.-]))")


def test_a_team_s_runbook_names_its_own_stacks_in_every_command(project: Path) -> None:  # noqa: F811
    made = init(project, "--cloud", "eks", "--name", "team-a", "--cluster", "team-a-gpu", *CLOUDS["eks"])
    assert made.exit_code == 0 and "gpu-rollout runbook --stack team-a-prod" in made.stdout
    result = runner.invoke(app, ["runbook", "--project-dir", str(project), "--stack", "team-a-prod"])
    assert result.exit_code == 0, result.output
    named = set(STACK_POSITIONS.findall(result.stdout)) - {"NAME", "<stack>"}
    assert named and named <= {"team-a-canary", "team-a-prod"}, named
    assert "gpu-rollout verify --stack team-a-canary" in result.stdout
    assert "gpu-rollout plan --stack team-a-prod" in result.stdout
    # Prose is the release's: only lines naming a stack changed.
    original = RUNBOOK.read_text(encoding="utf-8").splitlines()
    printed = result.stdout.splitlines()[2:]
    assert len(printed) == len(original)
    assert all(a == b for a, b in zip(original, printed, strict=True) if not STACK_POSITIONS.search(a))


def test_names_that_merely_contain_an_example_s_stay() -> None:
    text = "gpu-rollout plan --stack prod-eu; Pulumi.canary.yaml; attestations/canary/580.json; the prod stack"
    assert for_stacks(text, "t-canary", "t-prod") == \
        "gpu-rollout plan --stack prod-eu; Pulumi.t-canary.yaml; attestations/t-canary/580.json; the prod stack"


def test_a_canary_stack_is_refused_naming_what_to_give(project: Path) -> None:  # noqa: F811
    result = runner.invoke(app, ["runbook", "--project-dir", str(project), "--stack", "canary"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "is a canary stack; name a prod stack" in result.output


def test_a_stack_file_plan_would_refuse_is_refused_here_naming_the_key(project: Path) -> None:  # noqa: F811
    path = project / "Pulumi.prod.yaml"
    path.write_text(path.read_text().replace("canaryStack: canary", "canaryStack: 'not a/stack name/x/y'"))
    result = runner.invoke(app, ["runbook", "--project-dir", str(project), "--stack", "prod"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "promotion.canaryStack" in result.output
