"""What a test asserts of a verb's --json output: one document that validates against the verb's committed
schema (docs/schemas/<verb>.schema.json, written by `make docs` from rollout/schemas.py), or the error
document a refused verb prints instead."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema

from rollout.documents import SCHEMA_VERSION
from tests.conftest import PROJECT_DIR

SCHEMA_DIR = PROJECT_DIR / "docs" / "schemas"
VALIDATED: set[str] = set()  # the verbs some test validated this session (tests/rollout/test_json_contract.py)


@cache
def _validator(verb: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{verb}.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def conforms(verb: str, document: Any) -> dict[str, Any]:
    """``document`` if it validates against the verb's schema; else the failure names the key and why."""
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
                for e in _validator(verb).iter_errors(document)]
    assert not problems, f"{verb} --json breaks docs/schemas/{verb}.schema.json: {problems[:5]}"
    VALIDATED.add(verb)
    return dict(document)


def document_of(verb: str, stdout: str) -> dict[str, Any]:
    """The one document a verb printed with --json, checked against its schema."""
    return conforms(verb, json.loads(stdout))


def error_of(stdout: str, code: int, kind: str | None = None) -> dict[str, Any]:
    """The ``error`` of the one document on ``stdout``, checked against the error schema."""
    document = document_of("error", stdout)
    assert document["schemaVersion"] == SCHEMA_VERSION
    error = document["error"]
    assert error["code"] == code and error["message"], error
    assert kind is None or error["kind"] == kind, error
    return dict(error)
