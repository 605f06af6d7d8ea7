"""docs/coverage.md maps every step of the runbook to what covers it, and names only what exists: policies of the
registry, checks of the catalogue, verbs of the command line, top-level config keys; each step's strongest form is
one the doc defines, and the tests it names as giving that form bad input are tests pytest collects."""

from __future__ import annotations

import re
import subprocess
import sys

import typer.main

from checks.catalogue import CATALOGUE
from policy.registry import REGISTRY
from rollout.cli import app
from fleetspec.model import FleetSpec
from tests.conftest import PROJECT_DIR

DOC = (PROJECT_DIR / "docs" / "coverage.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (?P<n>\d+) \| (?P<step>[^|]+) \| (?P<covered>.+) \| (?P<form>[^|`]+) \| (?P<tests>`[^|]+`) \|$")
# The strongest forms the doc defines, strongest first (its list above the table).
FORMS = ("refused in the stack file", "refused by the pack", "fails preflight", "fails verify", "pauses the rollout",
         "the verb refuses", "advice", "warns")
NODE_ID = re.compile(r"`(tests/[\w/]+\.py::[\w]+(?:\[[^\]`]+\])?)`")
NAME = re.compile(r"`(?P<kind>policy|check)/(?P<id>[a-z0-9-]+)`|`gpu-rollout (?P<verb>[a-z-]+)`|`config (?P<key>[A-Za-z]+)`")


def _rows() -> list[re.Match[str]]:
    return [m for line in DOC.splitlines() if (m := ROW.match(line))]


def test_every_step_is_numbered_in_order_and_covered() -> None:
    rows = _rows()
    assert [int(r["n"]) for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) == 62  # the runbook's steps (issue 23)
    for row in rows:
        assert NAME.search(row["covered"]), row.group(0)


def test_every_step_states_its_strongest_form_and_the_tests_that_give_it_bad_input() -> None:
    for row in _rows():
        assert row["form"].startswith(FORMS), row.group(0)
        named = NODE_ID.findall(row["tests"])
        assert named and len(named) == row["tests"].count("`") // 2, row.group(0)  # every name a node id
        for node_id in named:
            assert (PROJECT_DIR / node_id.split("::")[0]).is_file(), node_id


def test_pytest_collects_every_test_the_table_names() -> None:
    """Each named node id is one pytest collects (a renamed test or parameter fails here), from the project's
    folder, as `make test` runs them."""
    named = sorted({node_id for row in _rows() for node_id in NODE_ID.findall(row["tests"])})
    assert len(named) > 62 // 2
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *named],
                          cwd=PROJECT_DIR, capture_output=True, text=True, timeout=600, check=False)
    collected = {line.strip() for line in done.stdout.splitlines()}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [node_id for node_id in named if node_id not in collected] == []


def test_every_name_in_the_table_exists() -> None:
    checks = {c.id for verb in ("preflight", "verify") for c in CATALOGUE.checks(verb)}
    verbs = {command.name for command in typer.main.get_command(app).commands.values()}  # type: ignore[attr-defined]
    named = [m for row in _rows() for m in NAME.finditer(row["covered"])]
    assert named
    for m in named:
        if m["kind"] == "policy":
            assert m["id"] in REGISTRY, m.group(0)
        elif m["kind"] == "check":
            assert m["id"] in checks, m.group(0)
        elif m["verb"]:
            assert m["verb"] in verbs, m.group(0)
        else:
            assert m["key"] in FleetSpec.model_fields, m.group(0)


def test_every_policy_and_check_covers_some_step() -> None:
    named = {(m["kind"], m["id"]) for row in _rows() for m in NAME.finditer(row["covered"]) if m["kind"]}
    unused_policies = set(REGISTRY) - {i for kind, i in named if kind == "policy"} - {"facts-readable", "per-pool-mode-own-change"}
    assert unused_policies == set(), unused_policies  # facts-readable and per-pool-mode-own-change guard the project, no step
    checks = {c.id for verb in ("preflight", "verify") for c in CATALOGUE.checks(verb)}
    unused_checks = checks - {i for kind, i in named if kind == "check"} - {"cluster-identity", "pool-membership",
                                                                            "pool-adopted"}
    # Those make sure the verbs act on the stack's own cluster and pools (pool-adopted: none created twice).
    assert unused_checks == set(), unused_checks


CHECKLIST_ROW = re.compile(r"^\| (?P<step>[^|\d][^|]*|\d+\. [^|]+) \| (?P<first>\d+)-(?P<last>\d+) \|$")


def test_the_checklist_steps_partition_the_rows_in_order() -> None:
    """The table of checklist steps names the rows of each, so the doc stands alone: its ranges follow one another
    from row 1 to the last row, with no gap and no overlap, and the numbered steps 1-7 come in order."""
    steps = [m for line in DOC.splitlines() if (m := CHECKLIST_ROW.match(line))]
    assert steps
    expected_first = 1
    for step in steps:
        assert int(step["first"]) == expected_first, step.group(0)
        assert int(step["last"]) >= int(step["first"]), step.group(0)
        expected_first = int(step["last"]) + 1
    assert expected_first - 1 == len(_rows())
    numbered = [int(n) for step in steps if (n := step["step"].split(".", 1)[0]).isdigit()]
    assert numbered == list(range(1, 8))
