"""What a test asserts of a verb's --json output: the one error document a refused verb prints on stdout."""

from __future__ import annotations

import json
from typing import Any

from rollout.documents import SCHEMA_VERSION


def error_of(stdout: str, code: int, kind: str | None = None) -> dict[str, Any]:
    """The ``error`` of the one document on ``stdout``, checked against the contract (rollout/documents.py)."""
    document = json.loads(stdout)
    assert set(document) == {"schemaVersion", "error"} and document["schemaVersion"] == SCHEMA_VERSION, document
    error = document["error"]
    assert set(error) == {"code", "kind", "message", "problems"} and error["code"] == code and error["message"], error
    assert kind is None or error["kind"] == kind, error
    assert all(set(p) == {"key", "item", "message"} for p in error["problems"]), error
    return dict(error)
