"""Issue 24 point 6: --json is a contract. Every verb that takes --json has a document model (rollout/schemas.py)
and a committed JSON Schema generated from it (docs/schemas/<verb>.schema.json, `make docs`); the verbs' real
output is validated against those schemas by the tests that run them (tests/rollout/json_contract.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer

from rollout.cli import app
from rollout.documents import SCHEMA_VERSION, dumps, error_document
from refusals.exits import Exit
from rollout.schemas import DOCUMENTS
from scripts.json_schemas import SCHEMA_DIR, rendered
from fleetspec.load import SpecProblem
from tests.conftest import PROJECT_DIR
from tests.rollout.json_contract import conforms, error_of

BUMPED = {"fleet-plan": 2}


def _json_verbs() -> set[str]:
    """Every command (fleet's as fleet-<verb>) that has a --json option."""
    found: set[str] = set()

    def walk(command: Any, prefix: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():  # a group (typer's click) holds commands
            if hasattr(sub, "commands"):
                walk(sub, f"{prefix}{name}-")
            elif any("--json" in p.opts for p in sub.params):
                found.add(f"{prefix}{name}")
    walk(typer.main.get_command(app), "")
    return found


def test_every_verb_with_json_has_a_document_model() -> None:
    assert _json_verbs() == set(DOCUMENTS) - {"error"}


def test_the_committed_schemas_are_what_the_models_give() -> None:
    for name, text in rendered().items():
        path = SCHEMA_DIR / name
        assert path.is_file() and path.read_text(encoding="utf-8") == text, f"{path} is stale: run `make docs`"


@pytest.mark.parametrize("verb", sorted(DOCUMENTS))
def test_each_schema_is_valid_and_pins_the_version(verb: str) -> None:
    schema = json.loads((SCHEMA_DIR / f"{verb}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    # A document whose shape changed says so by its own version (fleet-plan 2: pools as objects, issue 32).
    assert schema["properties"]["schemaVersion"]["const"] == BUMPED.get(verb, SCHEMA_VERSION)
    assert "schemaVersion" in schema["required"]
    assert schema["additionalProperties"] is False  # a key the model does not declare breaks the contract


def test_every_document_is_checked_against_its_schema_by_some_test() -> None:
    used = set()
    for path in (PROJECT_DIR / "tests").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r'(?:document_of|conforms)\(\s*"([a-z-]+)"', text))
        if "error_of(" in text and path.name != "json_contract.py":
            used.add("error")
        # a test parametrized over verbs ("pause", "resume") passes the verb itself
        used |= {verb for verb in DOCUMENTS if "document_of(verb" in text and f"\"{verb}\"" in text}
    assert set(DOCUMENTS) <= used, set(DOCUMENTS) - used


def test_a_document_that_drifts_from_its_schema_fails() -> None:
    error = json.loads(dumps(error_document(Exit.INVALID, "invalid-input", "bad", [SpecProblem("k", "why", "gpua100")])))
    assert conforms("error", error)["error"]["problems"] == [{"key": "k", "item": "gpua100", "message": "why"}]
    for broken in ({**error, "extra": 1}, {k: v for k, v in error.items() if k != "schemaVersion"},
                   {**error, "schemaVersion": 2}, {**error, "error": {**error["error"], "code": "2"}}):
        with pytest.raises(AssertionError, match="breaks docs/schemas/error.schema.json"):
            conforms("error", broken)


def test_a_refusal_in_json_mode_prints_the_error_document_alone(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    # A stack file that is a folder: reading it is not a config problem the loader names, so it surfaces as
    # whatever the verb makes of it; either way stdout holds exactly one contract document.
    folder = tmp_path / "Pulumi.prod.yaml"
    folder.mkdir()
    result = CliRunner().invoke(app, ["plan", "--stack-file", str(folder), "--json"])
    assert result.exit_code in (Exit.INVALID, Exit.INTERNAL), result.output
    error_of(result.stdout, result.exit_code)


@pytest.mark.parametrize(("args", "flag"), [(["plan", "--json"], "--stack"),
                                            (["diff", "--markdown", "--json"], "--markdown")])
def test_a_usage_error_the_verb_finds_prints_the_error_document_too(args: list[str], flag: str) -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, [*args, "--project-dir", str(PROJECT_DIR)])
    assert result.exit_code == Exit.INVALID
    assert [p["key"] for p in error_of(result.stdout, Exit.INVALID, "invalid-input")["problems"]] == [flag]
    assert flag in result.stderr  # typer's usage message, as without --json
