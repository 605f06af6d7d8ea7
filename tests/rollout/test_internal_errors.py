"""Issue 12 point 5 (second half): a defect of gpu-rollout, not of its input, exits 70 (EX_SOFTWARE) with one
line saying so and where the traceback was written; --debug prints the traceback too. The library call a
verb makes is patched to fail, as a defect in it would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli import app
from refusals.exits import Exit
from tests.fakekube.server import Fault, FakeKube
from tests.rollout.json_contract import error_of

runner = CliRunner()


def defect(*args: object, **kwargs: object) -> None:
    raise ZeroDivisionError("a defect\nover two lines")


def said(stderr: str) -> list[str]:
    """stderr's lines but the transport note (the fake API is plain http: "note: ... reached without TLS")."""
    return [line for line in stderr.splitlines() if not (line.startswith("note: ") and "without TLS" in line)]


def traceback_file(stderr: str) -> Path:
    match = re.search(r"traceback written to (\S+?)(?: \(--debug prints it\))?; please report it", stderr)
    assert match, stderr
    return Path(match.group(1))


@pytest.mark.parametrize(("verb", "target"), [
    (["preflight"], "checks.preflight.run_preflight"),
    (["watch", "--once"], "rollout.watch.watch"),
    (["pause"], "rollout.pause.pause"),
    (["resume"], "rollout.pause.resume"),
], ids=lambda v: v[0] if isinstance(v, list) else "")
def test_an_internal_error_exits_70_in_one_line(prod: FakeKube, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch,
                                                verb: list[str], target: str) -> None:
    monkeypatch.setattr(target, defect)
    result = runner.invoke(app, [verb[0], "--stack", "prod", "--kubeconfig", str(kubeconfig), *verb[1:]])
    assert result.exit_code == Exit.INTERNAL == 70
    [line] = said(result.stderr)
    assert line.startswith("internal error: gpu-rollout failed, not because of its input "
                           "(ZeroDivisionError: a defect over two lines); traceback written to ")
    assert line.endswith(" (--debug prints it); please report it")
    written = traceback_file(line)
    try:
        text = written.read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" in text and "ZeroDivisionError: a defect" in text
    finally:
        written.unlink()
    assert prod.writes == 0


def test_debug_prints_the_traceback(prod: FakeKube, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("checks.preflight.run_preflight", defect)
    result = runner.invoke(app, ["preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--debug"])
    assert result.exit_code == 70
    first, *rest = said(result.stderr)
    assert first.startswith("internal error: ") and "--debug prints it" not in first
    assert rest[0] == "Traceback (most recent call last):" and rest[-2:] == ["ZeroDivisionError: a defect",
                                                                           "over two lines"]
    traceback_file(first).unlink()


def test_plan_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rollout.plan.run", defect)
    result = runner.invoke(app, ["plan", "--stack", "canary"])
    assert result.exit_code == 70 and result.stdout == ""
    traceback_file(result.stderr).unlink()


def test_a_server_answering_something_else_than_an_object_is_a_cluster_error(prod: FakeKube, kubeconfig: Path) -> None:
    """Not a defect of ours: a proxy or webhook sending JSON that is no Kubernetes object fails the read (exit 1)."""
    prod.faults.append(Fault(200, verb="list", plural="nodes", body=["not", "an", "object"], times=99))
    result = runner.invoke(app, ["preflight", "--stack", "prod", "--kubeconfig", str(kubeconfig), "--json"])
    assert result.exit_code == 1 and error_of(result.stdout, 1, "cluster")
    assert result.stderr.strip().endswith("list nodes: the server sent JSON that is not an object")
    assert json.dumps(["not"]) not in result.stderr
