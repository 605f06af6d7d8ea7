"""The ``--json`` contract: every verb prints one JSON document on stdout, and every document says its version.

A script reads ``schemaVersion`` first. Adding a key keeps the version; removing or renaming a key, or changing
what a value means, raises it. Each verb builds its document as a pydantic model of :mod:`rollout.schemas` and
prints it here (:func:`write`), so a document's shape is its model: ``make docs`` writes the JSON Schemas in
docs/schemas/ from the same models.

When a verb fails on its input or on the cluster in ``--json`` mode, stdout still carries one document: the
error document (``error.code`` is the exit code, ``error.kind`` what went wrong, ``error.problems`` one entry
per bad key with the key path `pulumi config set --path` takes); the human message goes to stderr as ever.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from rollout.console import say
from rollout.schemas import Document, ErrorBody, ErrorDocument, Problem
from refusals.exits import Exit
from fleetspec.load import SpecProblem
from vocabulary.errors import ErrorKind

SCHEMA_VERSION = 1  # every document's but those whose model says another (:class:`rollout.schemas.Document`)


def dumps(document: Document) -> str:
    """The document as printed: ``schemaVersion`` first, then its model's fields in their declared order (a key
    with a default only where the verb set it), two-space indent, one trailing newline.

    Python mode, then :func:`json.dumps`: the free-form payloads (a resource's inputs, a check's evidence) print
    as they always did (pydantic's JSON mode would turn an infinite float into null)."""
    return json.dumps({"schemaVersion": document.schemaVersion, **document.model_dump(exclude_unset=True, by_alias=True)},
                      indent=2) + "\n"


def write(document: Document) -> None:
    """Print a verb's document on stdout."""
    sys.stdout.write(dumps(document))


def error_document(code: Exit, kind: ErrorKind, message: str, problems: Iterable[SpecProblem] = ()) -> ErrorDocument:
    """What stdout carries when a verb stops on an error in ``--json`` mode."""
    return ErrorDocument(error=ErrorBody(code=int(code), kind=kind, message=message, problems=[
        Problem(key=problem.path, item=problem.item, message=problem.message) for problem in problems]))


def refused(code: Exit, kind: ErrorKind, message: str, problems: Iterable[SpecProblem] = (), *, as_json: bool) -> Exit:
    """A verb stops: say why on stderr and, with --json, print the error document on stdout. Returns ``code``."""
    say(message)
    if as_json:
        write(error_document(code, kind, message, problems))
    return code
