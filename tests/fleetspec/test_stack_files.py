"""Stack files are read as Pulumi reads them, and a hostile one is refused at once (issue 12, points 1-3),
through the real `gpu-rollout plan`: exit 2, the file and the reason named, nothing rendered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rollout.cli import app
from fleetspec.load import SpecError, read_stack_file
from fleetspec import yaml_files
from fleetspec.yaml_files import MAX_EXPANDED_NODES
from tests.conftest import PROJECT_DIR
from tests.rollout.json_contract import error_of

runner = CliRunner()


def plan(path: Path):
    return runner.invoke(app, ["plan", "--stack-file", str(path), "--json"])


def test_a_stack_file_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.prod.yaml"
    good = (PROJECT_DIR / "Pulumi.prod.yaml").read_bytes()
    offset = good.index(b"westeurope")
    path.write_bytes(good[:offset] + b"west\xe9urope" + good[offset + len(b"westeurope"):])
    result = plan(path)
    assert result.exit_code == 2, result.output
    assert str(path) in result.output
    assert f"byte 0xe9 at byte offset {offset + 4}" in result.output
    assert error_of(result.stdout, 2, "invalid-input")["problems"]  # nothing rendered: the error document alone


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    # A second stage key turned a prod stack into a canary one before: Pulumi's reader refuses it.
    text = (PROJECT_DIR / "Pulumi.prod.yaml").read_text()
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("gpu-driver-upgrade:stage:"))
    lines.insert(first + 2, "  gpu-driver-upgrade:stage: canary")
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text("\n".join(lines) + "\n")
    result = plan(path)
    assert result.exit_code == 2, result.output
    assert f"key 'gpu-driver-upgrade:stage' is given twice, on lines {first + 1} and {first + 3}" in result.output


def test_duplicate_keys_are_refused_at_any_depth(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  gpu-driver-upgrade:driver:\n    owner: operator\n    owner: image\n")
    with pytest.raises(SpecError, match="'owner' is given twice, on lines 3 and 4"):
        read_stack_file(path)


def _alias_bomb(levels: int) -> str:
    """A billion-laughs document: each level is ten aliases of the one before."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    lines.append(f"config: {{gpu-driver-upgrade:stage: *a{levels - 1}}}")
    return "\n".join(lines) + "\n"


def test_excessive_aliasing_is_refused_before_anything_expands(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bomb.yaml"
    path.write_text(_alias_bomb(9))  # 10**9 nodes expanded; under 1 KB written
    assert path.stat().st_size < 1024
    result = plan(path)
    assert result.exit_code == 2, result.output
    assert "excessive aliasing" in result.output and str(MAX_EXPANDED_NODES) in result.output


def test_modest_aliasing_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.ok.yaml"
    path.write_text(_alias_bomb(3).replace("config: {gpu-driver-upgrade:stage: *a2}", "config: {x: *a2}"))
    assert json.loads(read_stack_file(path)["x"]) == [[["lol"] * 10] * 10] * 10


def test_a_document_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.deep.yaml"
    path.write_text("config: " + "[" * 50_000 + "]" * 50_000 + "\n")
    result = plan(path)
    assert result.exit_code == 2, result.output
    # libyaml stops at depth 1000 and says where; the pure-Python parser runs into the recursion limit
    assert "exceeded maximum nesting depth (line 1" in result.output or "nested too deeply" in result.output


# The reader uses libyaml where PyYAML has it, else PyYAML's own parser: both must refuse the same way.
PARSERS = pytest.mark.parametrize("parser", [yaml_files.SafeLoader, yaml.SafeLoader], ids=["default", "pure-python"])


@PARSERS
def test_either_parser_refuses_a_bomb_a_duplicate_key_and_deep_nesting(parser: type[yaml.SafeLoader]) -> None:
    strict = type("Strict", (yaml_files.DuplicateKeysRefused, parser), {})
    with pytest.raises(yaml_files.YamlFileError, match="excessive aliasing"):
        yaml_files.parse(_alias_bomb(9), strict)
    with pytest.raises(yaml_files.YamlFileError, match="key 'a' is given twice, on lines 1 and 3"):
        yaml_files.parse("a: 1\nb: 2\na: 3\n", strict)
    with pytest.raises(yaml_files.YamlFileError, match="nested too deeply|exceeded maximum nesting depth"):
        yaml_files.parse("[" * 50_000 + "]" * 50_000, strict)
    assert yaml_files.parse("a: [1, {b: c}]\n", strict) == {"a": [1, {"b": "c"}]}


def test_an_oversized_stack_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.big.yaml"
    with path.open("wb") as handle:
        handle.truncate(5 * 1024 * 1024)  # sparse: the size alone must refuse it
    result = plan(path)
    assert result.exit_code == 2, result.output
    assert "larger than 4 MiB" in result.output
