"""Issue 24 point 7: `gpu-rollout --version`, and a top-level help that lists every verb in one line each."""

from __future__ import annotations

import re
from importlib.metadata import version

import typer
from typer.testing import CliRunner

from rollout.cli import app
from rollout.project import SOURCE_DIR

runner = CliRunner()


def test_version_prints_the_version_and_the_checkout() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"gpu-rollout {version('gpu-driver-upgrade')} (from {SOURCE_DIR})\n"


def test_the_top_level_help_lists_every_verb_in_one_line() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    commands = typer.main.get_command(app).commands
    lines = result.stdout.splitlines()
    for name, command in commands.items():
        assert command.short_help, f"{name} has no one-line help"
        listed = [line for line in lines if re.match(rf"^│ {re.escape(name)} +\S", line)]
        assert len(listed) == 1, name
        text = re.sub(r"\s+", " ", listed[0].strip("│ "))
        assert text == f"{name} {command.short_help}", name  # the whole line, nothing folded onto a next one
    assert max(len(line) for line in lines) <= 100
