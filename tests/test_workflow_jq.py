"""Issue 32, point 6: every field the workflows and their scripts read from a `gpu-rollout ... --json` document with
jq is a typed, declared field of that document's JSON Schema (docs/schemas/, generated from rollout/schemas.py): a
renamed or untyped field fails here, not in a deploy. Each row names the jq expression as the file spells it (so
the table cannot drift from the files), the document it reads and the field paths it uses; where jq is installed,
each expression also runs against a document the schema admits."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.conftest import PROJECT_DIR

SCHEMAS = PROJECT_DIR / "docs" / "schemas"

# (file, the jq expression as written there, the document's schema, the paths it reads: "a.b[].c")
READS: list[tuple[str, str, str, tuple[str, ...]]] = [
    (".github/workflows/preview.yml", "[.stacks[] | select(.problem == null)]", "stacks", ("stacks[].problem",)),
    (".github/workflows/rollback.yml", ".stacks[0]", "stacks", ("stacks[]",)),
    (".github/workflows/soak.yml", "jq -c .stacks", "stacks", ("stacks",)),
    (".github/workflows/soak.yml", "jq -r .ready", "soak", ("ready",)),
    (".github/workflows/soak.yml", "\\(.stack)`: \\(if .ready then", "soak", ("stack", "ready", "reason", "readyAt")),
    (".github/actions/fleet-access/action.yml", "any(.stacks[]; .cloud == $c)", "stacks", ("stacks[].cloud",)),
    (".github/actions/fleet-access/action.yml", '[.stacks[] | select(.cloud == "eks") | .eksRegion][0]', "stacks",
     ("stacks[].cloud", "stacks[].eksRegion")),
    (".github/scripts/fleet-kubeconfigs.sh", "jq -r .aksResourceGroup", "stacks", ("stacks[].aksResourceGroup",)),
    (".github/scripts/fleet-kubeconfigs.sh", "jq -r .aksClusterName", "stacks", ("stacks[].aksClusterName",)),
    (".github/scripts/fleet-kubeconfigs.sh", "jq -r .eksClusterName", "stacks", ("stacks[].eksClusterName",)),
    (".github/scripts/fleet-kubeconfigs.sh", "jq -r .eksRegion", "stacks", ("stacks[].eksRegion",)),
    (".github/scripts/fleet-kubeconfigs.sh", "jq -r .stack", "stacks", ("stacks[].stack",)),
    (".github/scripts/fleet-step.sh", ".error.message", "error", ("error.message",)),
    (".github/scripts/fleet-step.sh", "jq -e '.applies'", "fleet-advance", ("applies",)),
    (".github/scripts/fleet-step.sh", ".withheld // []", "fleet-advance", ("withheld",)),
    (".github/scripts/fleet-step.sh", ".approval // null", "fleet-advance", ("approval",)),
    (".github/scripts/fleet-step.sh", "- next: \\(.next)", "fleet-advance", ("next",)),
    (".github/scripts/fleet-step.sh", ".ups[]? | \"- up", "fleet-advance", ("ups[].stack", "ups[].ok", "ups[].detail")),
    (".github/scripts/fleet-step.sh", ".approval.ups[]?", "fleet-advance",
     ("approval.ups[].stack", "approval.ups[].configDigest", "approval.ups[].packRef")),
    (".github/scripts/fleet-step.sh", ".blocked[]?", "fleet-advance", ("blocked[]",)),
    (".github/scripts/fleet-step.sh", ".unread[]?", "fleet-advance", ("unread[]",)),
    (".github/scripts/fleet-step.sh", "\\(.halt.kind) in `\\(.halt.stack)`: \\(.halt.message)", "fleet-advance",
     ("halt.kind", "halt.stack", "halt.message")),
    (".github/scripts/fleet-step.sh", "\\(.halted.at): \\(.halted.cause)", "fleet-advance",
     ("halted.at", "halted.cause")),
    (".github/scripts/protected-packs.sh", "(.canary + .prod)[].packRef", "deploy-plan",
     ("canary[].packRef", "prod[].packRef")),
]


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    """``node`` with its $ref followed and its anyOf/oneOf branches spread (a nullable field is one of two)."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _resolve(root["$defs"][name], root)
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        return [b for branch in branches for b in _resolve(branch, root)]
    return [node]


def _typed(node: dict[str, Any], root: dict[str, Any]) -> bool:
    """A field with a type: not an open object (no declared properties, additional ones allowed) and not `{}`."""
    for branch in _resolve(node, root):
        if branch.get("type") == "null":
            continue
        if not branch or (branch.get("type") == "object" and "properties" not in branch):
            return False
    return True


def _field(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The schema of the field at ``path`` (``a.b[].c``: ``[]`` steps into an array's items); None: not declared."""
    nodes = [schema]
    for step in path.split("."):
        name, items = step.removesuffix("[]"), step.endswith("[]")
        found = []
        for node in nodes:
            for branch in _resolve(node, schema):
                child = branch.get("properties", {}).get(name)
                if child is None:
                    continue
                if items:
                    found += [b["items"] for b in _resolve(child, schema) if "items" in b]
                else:
                    found.append(child)
        if not found:
            return None
        nodes = found
    return nodes[0]


@pytest.mark.parametrize(("path", "expression", "document", "fields"), READS,
                         ids=[f"{r[0].rsplit('/', 1)[-1]}:{r[1][:30]}" for r in READS])
def test_each_jq_read_names_a_typed_field_of_its_document(path: str, expression: str, document: str,
                                                          fields: tuple[str, ...]) -> None:
    assert expression in (PROJECT_DIR / path).read_text(encoding="utf-8"), f"{path} no longer reads {expression}"
    schema = _schema(document)
    for field in fields:
        found = _field(schema, field)
        assert found is not None, f"{path}: {document} --json declares no {field}"
        assert _typed(found, schema), f"{path}: {document} --json's {field} is an open object"


def test_the_workflows_read_no_document_this_table_misses() -> None:
    """Every `gpu-rollout ... --json` whose output a workflow pipes or writes for jq is one of the documents above."""
    read = {document for _, _, document, _ in READS}
    for path in [*(PROJECT_DIR / ".github").rglob("*.yml"), *(PROJECT_DIR / ".github").rglob("*.sh")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "gpu-rollout" in line and "--json" in line and ("jq" in line or "json\"" in line):
                verb = line.split("gpu-rollout", 1)[1].split()[0].strip('"')
                verb = {"fleet": "fleet-advance"}.get(verb, verb)
                assert verb in read or verb.startswith("$"), f"{path.name}: {line.strip()}"


def _sample(schema: dict[str, Any], node: dict[str, Any] | None = None) -> Any:
    """A small document the schema admits: every declared object field present, one item per array."""
    node = schema if node is None else node
    branch = next((b for b in _resolve(node, schema) if b.get("type") != "null"), {"type": "null"})
    kind = branch.get("type")
    if "const" in branch:
        return branch["const"]
    if "enum" in branch:
        return branch["enum"][0]
    if kind == "object":
        return {k: _sample(schema, v) for k, v in branch.get("properties", {}).items()}
    if kind == "array":
        return [_sample(schema, branch["items"])] if "items" in branch else []
    return {"string": "x", "integer": 1, "number": 1.5, "boolean": True}.get(kind)


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (the schema checks above still ran)")
@pytest.mark.parametrize(("path", "expression", "document", "fields"),
                         [r for r in READS if r[1].startswith(("[", "(", ".")) and '"' not in r[1]])
def test_each_jq_expression_runs_on_a_document_the_schema_admits(path: str, expression: str, document: str,
                                                                 fields: tuple[str, ...]) -> None:
    sample = json.dumps(_sample(_schema(document)))
    done = subprocess.run(["jq", "-c", expression], input=sample, capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0, done.stderr
