"""The ``--json`` contract: every verb prints one JSON document on stdout, and every document says its version.

A script reads ``schemaVersion`` first. Adding a key keeps the version; removing or renaming a key, or changing
what a value means, raises it. The shape of each verb's document is a pydantic model in :mod:`rollout.schemas`,
from which ``make docs`` writes the JSON Schemas in docs/schemas/.

When a verb fails on its input or on the cluster in ``--json`` mode, stdout still carries one document: the
error document (``error.code`` is the exit code, ``error.kind`` what went wrong, ``error.problems`` one entry
per bad key with the key path `pulumi config set --path` takes); the human message goes to stderr as ever.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rollout.console import say
from refusals.exits import Exit
from fleetspec.load import SpecProblem

SCHEMA_VERSION = 1


def dumps(document: Mapping[str, Any]) -> str:
    """The document as printed: ``schemaVersion`` first, two-space indent, one trailing newline."""
    return json.dumps({"schemaVersion": SCHEMA_VERSION, **document}, indent=2) + "\n"


def write(document: Mapping[str, Any]) -> None:
    """Print a verb's document on stdout."""
    sys.stdout.write(dumps(document))


def error_document(code: Exit, kind: str, message: str, problems: Iterable[SpecProblem] = ()) -> dict[str, Any]:
    """What stdout carries when a verb stops on an error in ``--json`` mode."""
    return {"error": {"code": int(code), "kind": kind, "message": message,
                      "problems": [problem.as_json() for problem in problems]}}


def refused(code: Exit, kind: str, message: str, problems: Iterable[SpecProblem] = (), *, as_json: bool) -> Exit:
    """A verb stops: say why on stderr and, with --json, print the error document on stdout. Returns ``code``."""
    say(message)
    if as_json:
        write(error_document(code, kind, message, problems))
    return code
