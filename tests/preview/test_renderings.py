"""The renderings plan keeps across runs (preview/renderings.py): reused while every input is the same, rendered
again when any input changes, and a folder that is corrupt, partial or unwritable costs a rendering, never a
wrong answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi.output import Unknown

from preview import renderings
from preview import run as preview_run
from tests.conftest import PROJECT_DIR, edited, stack_config
from tests.rollout.gitrepo import GIT_ENV


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stacks the mock engine actually ran, in order."""
    seen: list[str] = []
    run_program = preview_run.run_program

    def counted(config: dict[str, str], stack: str, *args: Any, **kwargs: Any) -> preview_run.ProgramRun:
        seen.append(stack)
        return run_program(config, stack, *args, **kwargs)

    monkeypatch.setattr(preview_run, "run_program", counted)
    return seen


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """The project's program and attestations in a folder of their own, to change them."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copyfile(PROJECT_DIR / "__main__.py", folder / "__main__.py")
    shutil.copytree(PROJECT_DIR / "attestations", folder / "attestations")
    return folder / "__main__.py"


def entries() -> list[Path]:
    return sorted(renderings.cache_dir(Path("unused")).glob("*.json"))


def test_a_rendering_is_kept_and_reused_with_the_outputs_a_fresh_run_gives(program: Path, renders: list[str]) -> None:
    config = stack_config("canary")
    first = renderings.rendered_outputs(config, "canary", program)
    assert renders == ["canary"] and len(entries()) == 1
    again = renderings.rendered_outputs(config, "canary", program)
    assert renders == ["canary"]  # not run again
    assert again == first == json.loads(json.dumps(preview_run.run_program(config, "canary", program).outputs))
    assert first["driverVersion"] == "580.173.02"


def _shown(value: Any) -> Any:
    """``value`` with each unknown as one marker (an ``Unknown`` equals only itself)."""
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return "<unknown>" if isinstance(value, Unknown) else value


def test_the_whole_run_is_kept_what_a_fresh_run_registers_unknowns_and_all(program: Path, renders: list[str]) -> None:
    """What plan reports from (every resource, its inputs, dependencies and component outputs, the exports) comes
    back from the cache as a fresh run gives it, down to a value the preview cannot know yet."""
    config = stack_config("prod")
    kept = renderings.rendered_run(config, "prod", program)
    again = renderings.rendered_run(config, "prod", program)
    assert renders == ["prod"]
    fresh = preview_run.run_program(config, "prod", program)
    for run in (kept, again):
        assert [(r.type, r.name, r.custom, r.urn, r.provider, r.adopt) for r in run.resources] == \
            [(r.type, r.name, r.custom, r.urn, r.provider, r.adopt) for r in fresh.resources]
        assert [set(r.dependencies) for r in run.resources] == [set(r.dependencies) for r in fresh.resources]
        assert [r.inputs for r in run.resources] == [r.inputs for r in fresh.resources]
        assert run.outputs == fresh.outputs
        assert [_shown(r.outputs) for r in run.resources] == [_shown(r.outputs) for r in fresh.resources]
    unknown = [(r.name, key) for r in fresh.resources for key, value in r.outputs.items()
               if isinstance(value, list) and any(isinstance(v, Unknown) for v in value)]
    assert unknown  # an AKS pool's agent pool names are the cloud's to give
    by_name = {r.name: r for r in again.resources}
    for name, key in unknown:
        assert all(isinstance(v, Unknown) for v in by_name[name].outputs[key])


def _append_export(program: Path) -> None:
    program.write_text(program.read_text() + "\npulumi.export('extra', 1)\n")


def _add_attestation(program: Path) -> None:
    (program.parent / "attestations" / "canary" / "595.58.03.json").write_text("{}")


def _new_distribution(program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = program.parent.parent / "site"
    (site / "somesdk-9.9.0.dist-info").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))


# Each input of a rendering, changed: (config, stack, previous outputs, other stacks' outputs) -> changed ones.
CHANGES: dict[str, Callable[..., None]] = {
    "the config": lambda args, program, mp: args.update(config=edited("canary", "driver", lambda d: d.update(version="595.58.03"))),
    "the stack name": lambda args, program, mp: args.update(stack="canary-2"),
    "the last deployment given": lambda args, program, mp: args.update(previous={"driverVersion": "570.195.03"}),
    "another stack's outputs given": lambda args, program, mp: args.update(referenced={"prod": {"stage": "prod"}}),
    "the program": lambda args, program, mp: _append_export(program),
    "the attestations folder": lambda args, program, mp: _add_attestation(program),
    "the SDKs installed": lambda args, program, mp: _new_distribution(program, mp),
    "the Python version": lambda args, program, mp: mp.setattr(sys, "version", "3.99.0 (elsewhere)"),
    "the kubelogin method": lambda args, program, mp: mp.setenv("AAD_LOGIN_METHOD", "workloadidentity"),
    "a Pulumi setting": lambda args, program, mp: mp.setenv("PULUMI_DISABLE_RESOURCE_REFERENCES", "true"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_input_is_rendered_again(change: str, program: Path, renders: list[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    args: dict[str, Any] = {"config": stack_config("canary"), "stack": "canary", "previous": None, "referenced": None}

    def outputs() -> dict[str, Any]:
        return renderings.rendered_outputs(args["config"], args["stack"], program, args["previous"], args["referenced"])

    before = outputs()
    CHANGES[change](args, program, monkeypatch)
    after = outputs()
    assert len(renders) == 2 and len(entries()) == 2
    assert outputs() == after and len(renders) == 2  # the new rendering is kept in turn
    if change == "the config":
        assert (before["driverVersion"], after["driverVersion"]) == ("580.173.02", "595.58.03")
    if change == "the program":
        assert "extra" not in before and after["extra"] == 1


def test_an_ambient_engine_config_is_no_input(program: Path, renders: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    renderings.rendered_outputs(stack_config("canary"), "canary", program)
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-driver-upgrade:stage": "prod"}))  # the preview drops it
    renderings.rendered_outputs(stack_config("canary"), "canary", program)
    assert renders == ["canary"]


def test_the_program_digest_follows_its_imports_into_the_checkout_packages(tmp_path: Path) -> None:
    source = tmp_path / "checkout"
    for package, text in {"fleet": "from deep.part import x\n", "deep": "", "unrelated": ""}.items():
        (source / package).mkdir(parents=True)
        (source / package / "__init__.py").write_text(text)
        (source / package / "part.py").write_text("x = 1\n")
    program = tmp_path / "project" / "__main__.py"
    program.parent.mkdir()
    program.write_text("import os, fleet\n")
    base = renderings.program_digest(program, source)
    (source / "unrelated" / "part.py").write_text("x = 2\n")
    assert renderings.program_digest(program, source) == base  # a package it never imports
    for changed in (source / "fleet" / "part.py", source / "deep" / "part.py", program):
        changed.write_text(changed.read_text() + "# changed\n")
        assert renderings.program_digest(program, source) != base, changed
        base = renderings.program_digest(program, source)
    (source / "deep" / "new.py").write_text("")  # a module added to an imported package
    assert renderings.program_digest(program, source) != base


@pytest.mark.parametrize("content", [
    b"", b'{"key": "', b"\x00\xff not json", b"[]", b'{"key": "another", "run": RUN}', b'{"key": "KEY"}',
    b'{"key": "KEY", "run": {"stack": "prod", "outputs": {}, "resources": []}}',
    b'{"key": "KEY", "run": {"stack": "canary", "outputs": ["not", "outputs"], "resources": []}}',
    b'{"key": "KEY", "run": {"stack": "canary", "outputs": {}, "resources": [{"type": "t", "name": "n"}]}}',
])
def test_a_corrupt_or_partial_entry_is_rendered_again_and_rewritten(content: bytes, program: Path,
                                                                   renders: list[str]) -> None:
    config = stack_config("canary")
    good = renderings.rendered_outputs(config, "canary", program)
    [entry] = entries()
    run = json.dumps(json.loads(entry.read_bytes())["run"]).encode()
    entry.write_bytes(content.replace(b"KEY", entry.stem.encode()).replace(b"RUN", run))
    assert renderings.rendered_outputs(config, "canary", program) == good
    assert renders == ["canary", "canary"]
    assert json.loads(entry.read_bytes())["key"] == entry.stem  # rewritten whole
    assert renderings.rendered_outputs(config, "canary", program) == good and len(renders) == 2


def test_a_folder_that_cannot_be_written_costs_only_the_reuse(program: Path, renders: list[str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(renderings.CACHE_ENV, str(blocked / "cache"))
    first = renderings.rendered_outputs(stack_config("canary"), "canary", program)
    assert renderings.rendered_outputs(stack_config("canary"), "canary", program) == first
    assert renders == ["canary", "canary"]


def test_by_default_the_renderings_live_in_the_project_folder_which_git_ignores(program: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(renderings.CACHE_ENV)
    project = program.parent
    git_env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, env=git_env)
    renderings.rendered_outputs(stack_config("canary"), "canary", program)
    assert len(list((project / renderings.CACHE_FOLDER).glob("*.json"))) == 1
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project, check=True,
                            capture_output=True, text=True, env=git_env).stdout
    assert "?? __main__.py" in status.splitlines() and renderings.CACHE_FOLDER not in status


def test_the_folder_keeps_the_newest_entries_within_its_count_and_its_size(program: Path, renders: list[str],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renderings, "MAX_ENTRIES", 2)
    config = stack_config("canary")
    seen: set[Path] = set()
    for age, stack in enumerate(("canary", "canary-2", "canary-3")):
        renderings.rendered_outputs(config, stack, program)
        (new,) = set(entries()) - seen
        os.utime(new, ns=(10**18 + age, 10**18 + age))  # written in this order, whatever the clock's resolution
        seen = set(entries())
    assert len(entries()) == 2
    renderings.rendered_outputs(config, "canary-3", program)
    renderings.rendered_outputs(config, "canary-2", program)
    assert renders == ["canary", "canary-2", "canary-3"]  # the newest two were kept
    renderings.rendered_outputs(config, "canary", program)
    assert renders[-1] == "canary" and len(renders) == 4  # the oldest was not

    monkeypatch.setattr(renderings, "MAX_BYTES", 1)  # smaller than any entry: the newest alone stays
    renderings.rendered_outputs(config, "canary-4", program)
    assert len(entries()) == 1
    renderings.rendered_outputs(config, "canary-4", program)
    assert renders[-1] == "canary-4" and len(renders) == 5
