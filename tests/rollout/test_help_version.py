"""Issue 24 point 7: `gpu-rollout --version`, and a top-level help that lists every verb in one line each."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version

import typer
from typer.testing import CliRunner

from rollout.cli import app
from rollout.project import SOURCE_DIR
from tests.conftest import PROJECT_DIR

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


def test_a_reader_that_closes_the_pipe_early_is_not_a_failed_verdict() -> None:
    # `plan | head -1`: the command ends by SIGPIPE (141 in a shell), never with exit 1 (a mandatory violation).
    probe = subprocess.run(f"{sys.executable} -m rollout plan --stack prod | head -1; echo \"exit ${{PIPESTATUS[0]}}\"",
                           shell=True, cwd=PROJECT_DIR, capture_output=True, text=True, executable="/bin/bash")
    first, last = probe.stdout.splitlines()[0], probe.stdout.splitlines()[-1]
    assert first.startswith("plan of stack prod") and last == "exit 141", probe.stdout + probe.stderr
