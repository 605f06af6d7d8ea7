"""The shared pieces of the command line: how a verb resolves its stack and cluster (rollout.context), the
one exit-code type (refusals.exits) and the consoles (rollout.console)."""

from __future__ import annotations

import importlib
import typing
from pathlib import Path

import pytest
import typer

from rollout import console, context, project
from refusals.exits import Exit
from fleetspec.load import load_stack_file
from tests.conftest import PROJECT_DIR

EXISTING = load_stack_file(PROJECT_DIR / "Pulumi.existing-prod.yaml")  # declares context lab-gpu-1, no file
PROD = load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")  # an AKS stack: declares neither


@pytest.mark.parametrize(("spec", "declared_file", "flags", "expected"), [
    (PROD, None, (None, None), (None, None)),  # the client's defaults: $KUBECONFIG, current context
    (PROD, None, ("/k", "ctx"), ("/k", "ctx")),
    (EXISTING, None, (None, None), (None, "lab-gpu-1")),
    (EXISTING, "/declared", (None, None), ("/declared", "lab-gpu-1")),
    (EXISTING, "/declared", ("/flag", None), ("/flag", "lab-gpu-1")),
    (EXISTING, "/declared", (None, "other"), ("/declared", "other")),
], ids=["nothing", "flags", "declared-context", "declared-both", "flag-file-wins", "flag-context-wins"])
def test_flag_beats_the_stack_which_beats_the_client_defaults(spec, declared_file, flags, expected) -> None:
    if declared_file is not None:
        existing = spec.cluster.existing.model_copy(update={"kubeconfig": declared_file})
        spec = spec.model_copy(update={"cluster": spec.cluster.model_copy(update={"existing": existing})})
    found = context.resolve_cluster(spec, *flags)
    assert (found.kubeconfig, found.context) == expected


def test_a_stack_file_names_its_stack(tmp_path: Path) -> None:
    ref = context.resolve_stack(None, tmp_path / "Pulumi.staging.yaml", tmp_path)
    assert (ref.name, ref.path, ref.project_dir) == ("staging", tmp_path / "Pulumi.staging.yaml", tmp_path)
    assert context.resolve_stack("prod", None, tmp_path).path == tmp_path / "Pulumi.prod.yaml"


@pytest.mark.parametrize(("stack", "stack_file", "message"), [
    ("prod", Path("Pulumi.prod.yaml"), "not both"),
    (None, None, "a stack is required"),
])
def test_stack_flags_in_conflict_are_usage_errors(stack, stack_file, message) -> None:
    with pytest.raises(typer.BadParameter, match=message):
        context.resolve_stack(stack, stack_file, None)


def test_the_project_is_the_current_folder_when_it_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert project.default_project_dir() == project.SOURCE_DIR == PROJECT_DIR
    (tmp_path / "Pulumi.yaml").write_text("name: gpu-driver-upgrade\n", encoding="utf-8")
    assert project.default_project_dir() == tmp_path
    assert context.resolve_stack("prod", None, None).path == tmp_path / "Pulumi.prod.yaml"


@pytest.mark.parametrize("module", ["rollout.plan", "rollout.preflight", "rollout.watch", "rollout.pause"])
def test_every_verb_returns_the_one_exit_type(module: str) -> None:
    execute = importlib.import_module(module).execute
    assert typing.get_type_hints(execute)["return"] is Exit


def test_exit_codes() -> None:
    assert [int(code) for code in Exit] == [0, 1, 2, 70]
    assert Exit.failed_if(True) is Exit.FAILED and Exit.failed_if(False) is Exit.OK


def test_without_a_terminal_reports_are_160_columns_and_messages_never_wrap(capsys: pytest.CaptureFixture) -> None:
    assert console.stdout().width == console.WIDTH_WITHOUT_A_TERMINAL == 160
    line = "x" * 300 + " [bold]as written[/]"
    console.say(line)
    assert capsys.readouterr().err == line + "\n"
