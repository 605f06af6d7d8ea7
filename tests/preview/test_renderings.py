"""The renderings plan keeps across runs (preview/renderings.py): reused while every input is the same, rendered
again when any input changes, and a folder that is corrupt, partial or unwritable costs a rendering, never a
wrong answer."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi.output import Unknown

from preview import renderings
from preview import run as preview_run
from tests.conftest import PROJECT_DIR, edited, stack_config


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
    return sorted(renderings.cache_dir().glob("*.json"))


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


CANARY_OF = {"prod": "canary", "eks-prod": "eks-canary", "existing-prod": "existing-canary"}
EXAMPLE_STACKS = sorted(path.name.split(".")[1] for path in PROJECT_DIR.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_whole_run_is_kept_what_a_fresh_run_registers_unknowns_and_all(stack: str, program: Path,
                                                                             renders: list[str]) -> None:
    """What plan reports from (every resource, its inputs, dependencies and component outputs, the exports) comes
    back from the cache as a fresh run gives it, down to a value the preview cannot know yet: for every example
    stack, a prod stack with its canary's outputs."""
    assert set(CANARY_OF) | set(CANARY_OF.values()) <= set(EXAMPLE_STACKS)
    config = stack_config(stack)
    referenced = {CANARY_OF[stack]: renderings.rendered_outputs(stack_config(CANARY_OF[stack]), CANARY_OF[stack],
                                                                program)} if stack in CANARY_OF else None
    first = renderings.rendered_run(config, stack, program, None, referenced)
    again = renderings.rendered_run(config, stack, program, None, referenced)
    assert renders[-1] == stack and renders.count(stack) == 1
    fresh = preview_run.run_program(config, stack, program, None, referenced)
    for run in (first, again):
        assert [(r.type, r.name, r.custom, r.urn, r.provider, r.adopt) for r in run.resources] == \
            [(r.type, r.name, r.custom, r.urn, r.provider, r.adopt) for r in fresh.resources]
        assert [set(r.dependencies) for r in run.resources] == [set(r.dependencies) for r in fresh.resources]
        assert [r.inputs for r in run.resources] == [r.inputs for r in fresh.resources]
        assert [json.dumps(r.inputs) for r in run.resources] == [json.dumps(r.inputs) for r in fresh.resources]
        assert run.outputs == fresh.outputs
        assert [_shown(r.outputs) for r in run.resources] == [_shown(r.outputs) for r in fresh.resources]
    unknown = [(r.name, key) for r in fresh.resources for key, value in r.outputs.items()
               if isinstance(value, list) and any(isinstance(v, Unknown) for v in value)]
    if stack in ("canary", "prod"):
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
    # The Kubernetes provider's kubeconfig, where the stack gives none (an existing cluster), is $KUBECONFIG.
    "the kubeconfig path": lambda args, program, mp: mp.setenv("KUBECONFIG", "/elsewhere/kubeconfig"),
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


def test_by_default_the_renderings_live_in_the_user_s_cache_folder_never_in_the_checkout(
    program: Path, renders: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An entry is believed as the rendering of its key, so none is ever read from the checkout, whose files are
    what a change committed: a forged entry there (``git add -f`` gets past .gitignore) is never read."""
    monkeypatch.delenv(renderings.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    config = stack_config("canary")
    first = renderings.rendered_outputs(config, "canary", program)
    (entry,) = (tmp_path / "xdg" / "gpu-rollout" / "renderings").glob("*.json")
    assert not any(p.name.endswith(".json") for p in program.parent.rglob("*") if "attestations" not in p.parts)
    forged = program.parent / ".gpu-rollout-cache" / entry.name  # the folder earlier releases used
    forged.parent.mkdir()
    forged.write_text(entry.read_text().replace("580.173.02", "999.99.99"))
    entry.unlink()
    assert renderings.rendered_outputs(config, "canary", program) == first and renders == ["canary", "canary"]
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert renderings.cache_dir() == tmp_path / "home" / ".cache" / "gpu-rollout" / "renderings"


def test_with_no_home_nothing_is_kept_and_nothing_lands_in_the_working_folder(
    program: Path, renders: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (renderings.CACHE_ENV, "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(renderings.os.path, "expanduser", lambda path: path)  # no passwd entry either: "~" stays
    monkeypatch.chdir(tmp_path)
    assert renderings.cache_dir() is None
    first = renderings.rendered_outputs(stack_config("canary"), "canary", program)
    assert renderings.rendered_outputs(stack_config("canary"), "canary", program) == first
    assert renders == ["canary", "canary"]  # rendered each time, kept nowhere
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]  # no "~" folder in the working folder


def _age(entry: Path, age: int) -> None:
    """Set an entry's last use ``age`` steps into the past (10**18 ns is 2001), whatever the clock's resolution."""
    os.utime(entry, ns=(10**18 + age, 10**18 + age))


def test_the_folder_keeps_the_most_recently_used_entries_within_its_count_and_its_size(
    program: Path, renders: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(renderings, "MAX_ENTRIES", 2)
    config = stack_config("canary")
    seen: set[Path] = set()
    for age, stack in enumerate(("canary-a", "canary-b")):
        renderings.rendered_outputs(config, stack, program)
        (new,) = set(entries()) - seen
        _age(new, age)  # a written before b
        seen = set(entries())
    renderings.rendered_outputs(config, "canary-a", program)  # a used again: now the most recent
    renderings.rendered_outputs(config, "canary-c", program)  # the third: the least recently used goes
    assert len(entries()) == 2 and renders == ["canary-a", "canary-b", "canary-c"]
    renderings.rendered_outputs(config, "canary-a", program)
    assert len(renders) == 3  # a was kept
    renderings.rendered_outputs(config, "canary-b", program)
    assert renders[-1] == "canary-b" and len(renders) == 4  # b was not

    monkeypatch.setattr(renderings, "MAX_BYTES", 1)  # smaller than any entry: the newest alone stays
    renderings.rendered_outputs(config, "canary-d", program)
    assert len(entries()) == 1
    renderings.rendered_outputs(config, "canary-d", program)
    assert renders[-1] == "canary-d" and len(renders) == 5


def test_pruning_touches_only_the_folder_s_own_files_and_what_interrupted_writes_left(
    program: Path, renders: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$GPU_ROLLOUT_CACHE_DIR may name a folder that holds other files: only entries are pruned. A temporary file
    an interrupted write left goes once it is old; one as young as a write in progress stays."""
    folder = renderings.cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.json").write_text("{}")
    stale, fresh = folder / ".entry-stale.tmp", folder / ".entry-fresh.tmp"
    stale.write_bytes(b"half an entry")
    fresh.write_bytes(b"a write in progress")
    old = time.time() - renderings.STALE_TEMPORARY_SECONDS - 60
    os.utime(stale, (old, old))
    monkeypatch.setattr(renderings, "MAX_BYTES", 1)
    renderings.rendered_outputs(stack_config("canary"), "canary", program)
    renderings.rendered_outputs(stack_config("canary"), "canary-2", program)
    assert (folder / "notes.json").read_text() == "{}" and fresh.exists() and not stale.exists()
    assert len([entry for entry in entries() if entry.name != "notes.json"]) == 1  # the newest entry alone


def test_a_write_that_fails_leaves_no_temporary_file(program: Path, renders: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(renderings.os, "replace", full)
    first = renderings.rendered_outputs(stack_config("canary"), "canary", program)
    folder = renderings.cache_dir()
    assert first["driverVersion"] == "580.173.02"  # the rendering stands
    assert [p.name for p in folder.iterdir() if p.name != ".gitignore"] == []  # no entry, no temporary file


def test_an_attestation_behind_a_symbolic_link_is_an_input(program: Path, renders: list[str], tmp_path: Path) -> None:
    """The program reads attestations/<canary>/ through a link; so does the key (and a link back up is no loop)."""
    folder = program.parent / "attestations"
    elsewhere = tmp_path / "elsewhere-canary"
    shutil.move(folder / "canary", elsewhere)
    (folder / "canary").symlink_to(elsewhere, target_is_directory=True)
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    config = stack_config("canary")
    before = renderings.rendered_outputs(config, "canary", program)
    (elsewhere / "595.58.03.json").write_text("{}")
    assert renderings.rendered_outputs(config, "canary", program) == before
    assert renders == ["canary", "canary"]


def test_every_environment_variable_the_sdks_read_into_inputs_is_part_of_the_key() -> None:
    """The SDKs the program uses fill some inputs from the environment (``_utilities.get_env``): every name they
    read but PULUMI_* must be in renderings.SDK_ENVIRONMENT, or an entry would outlive a change of it."""
    import pulumi_aws
    import pulumi_azure_native
    import pulumi_kubernetes

    sources = [*Path(pulumi_kubernetes.__file__).parent.rglob("*.py")]
    for package in (pulumi_aws, pulumi_azure_native):
        root = Path(package.__file__).parent
        sources += [root / "provider.py", *(root / "config").glob("*.py")]
    read = {name for path in sources
            for call in re.findall(r"get_env(?:_bool|_int|_float)?\(([^)]*)\)", path.read_text(encoding="utf-8"))
            for name in re.findall(r"'([A-Z0-9_]+)'", call)}
    assert "KUBECONFIG" in read  # the scan sees what it is for
    assert {name for name in read if not name.startswith("PULUMI_")} <= set(renderings.SDK_ENVIRONMENT)
