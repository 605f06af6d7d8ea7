"""The catalogue of live checks (checks/registry.py): each check declared once, in the module of its runbook
section, named by the runner and never by itself; and how a verb of its own (verify, runbook section 5)
joins it."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from checks import preflight
from checks.registry import CATALOGUE, SECTIONS, Check, Registry, Section
from checks.results import CheckResult, Finding, Status, failed, passed, warned
from tests.conftest import PROJECT_DIR

RUNBOOK = (PROJECT_DIR / "docs" / "runbook.md").read_text(encoding="utf-8")


def test_every_section_follows_a_heading_of_the_runbook_and_lives_in_its_own_module() -> None:
    headings = {line.lstrip("#").strip() for line in RUNBOOK.splitlines() if line.startswith("#")}
    for section in SECTIONS:
        assert section.runbook in headings, section
    assert len({s.module for s in SECTIONS}) == len(SECTIONS)


@pytest.mark.parametrize("check", CATALOGUE.checks("preflight"), ids=lambda c: c.id)
def test_each_check_is_declared_in_its_sections_module_and_documented(check: Check) -> None:
    assert check.function.__module__ == check.section.module
    assert f"`{check.id}`" in RUNBOOK  # the runbook's preflight table names every id


@pytest.mark.parametrize("check", CATALOGUE.checks("preflight"), ids=lambda c: c.id)
def test_no_check_function_spells_its_own_id(check: Check) -> None:
    source = inspect.getsource(check.function)
    body = source.split("\n", 1)[1]  # below the @check(...) line that declares it
    assert f'"{check.id}"' not in body and f"'{check.id}'" not in body


def test_preflight_runs_the_sections_in_order() -> None:
    assert [s.title for s in preflight.sections()] == ["The stack's cluster", "Who owns the driver",
                                                       "1. Compatibility checks",
                                                       "2. Capacity and disruption controls"]
    order = [SECTIONS.index(c.section) for c in CATALOGUE.checks("preflight")]
    assert order == sorted(order)


# ---------------------------------------------------------------- the registry's guards

HERE = Section("Here", "Here", "preflight", __name__)


def _findings(facts: object) -> list[Finding]:
    return [passed("cluster", f"saw {facts}"), warned("pool-a", "careful")]


def test_the_runner_stamps_the_id_on_every_finding() -> None:
    registry = Registry([HERE])
    registry.check("example-check", HERE)(_findings)
    assert registry.run("preflight", "the facts") == [
        CheckResult("example-check", Status.PASS, "cluster", "saw the facts"),
        CheckResult("example-check", Status.WARN, "pool-a", "careful"),
    ]
    assert registry.section_of("example-check") == HERE


def test_a_check_that_names_itself_is_refused() -> None:
    registry = Registry([HERE])
    registry.check("self-naming", HERE)(lambda facts: [CheckResult("self-naming", Status.PASS, "x", "y")])
    with pytest.raises(TypeError, match="a check returns Findings"):
        registry.run("preflight", None)


@pytest.mark.parametrize(("check_id", "section", "match"), [
    ("example-check", HERE, "registered twice: .*_findings and .*<lambda>"),
    ("Example_Check", HERE, "not kebab-case"),
    ("other-check", Section("Elsewhere", "Elsewhere", "preflight", __name__), "is not one of this registry's"),
])
def test_the_registry_refuses(check_id: str, section: Section, match: str) -> None:
    registry = Registry([HERE])
    registry.check("example-check", HERE)(_findings)
    with pytest.raises(ValueError, match=match):
        registry.check(check_id, section)(lambda facts: [])


def test_an_id_of_the_catalogue_cannot_be_declared_again() -> None:
    with pytest.raises(ValueError, match="'driver-owner' is registered twice: checks.owner.check_driver_owner"):
        CATALOGUE.check("driver-owner", SECTIONS[1])(_findings)


# ---------------------------------------------------------------- another verb: verify (runbook section 5)

VALIDATION = Section("5. Validate the canary", "5. Validate the canary", "verify", __name__)


def test_verify_checks_join_the_same_registry_under_their_own_verb() -> None:
    """What issue 10 does with the real catalogue: list a section with verb="verify" beside the preflight ones,
    declare its checks with @check in the section's module, and run them over verify's own facts."""
    assert "5. Validate the canary" in {line.lstrip("#").strip() for line in RUNBOOK.splitlines()}
    assert [s.module for s in CATALOGUE.sections("verify")] == ["checks.validation"]  # the real one (issue 10)
    registry = Registry([*(s for s in SECTIONS if s.verb == "preflight"), VALIDATION])

    @registry.check("canary-soaked", VALIDATION)
    def check_canary_soaked(facts: dict[str, float]) -> list[Finding]:
        hours = facts["hours"]
        return [(passed if hours >= 24 else failed)("canary", f"{hours:.0f} h on the new driver")]

    assert registry.sections("verify") == [VALIDATION]
    assert [c.id for c in registry.checks("verify")] == ["canary-soaked"]
    assert registry.checks("preflight") == []  # the preflight checks are the real catalogue's, not this one's
    assert registry.run("verify", {"hours": 6}) == [CheckResult("canary-soaked", Status.FAIL, "canary",
                                                                "6 h on the new driver")]
    assert check_canary_soaked({"hours": 30})[0].status == Status.PASS  # the decorator returns the function


def test_the_catalogue_loads_its_section_modules_itself() -> None:
    """A verb gets every check of its sections whoever imported what: the registry imports each section's
    module before it lists the checks."""
    code = ("import sys; from checks.registry import CATALOGUE; "
            "ids = [c.id for c in CATALOGUE.checks('preflight')]; "
            "print(len(ids), 'checks.owner' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_DIR, check=True,
                         timeout=120).stdout.split()
    assert out == [str(len(CATALOGUE.checks("preflight"))), "True"] and int(out[0]) == 21


def test_each_section_module_says_which_runbook_section_and_checks_it_holds() -> None:
    for section in SECTIONS:
        doc = importlib.import_module(section.module).__doc__ or ""
        assert "runbook" in doc.split(":", 1)[0].lower(), section.module
        ids = [c.id for c in CATALOGUE.checks(section.verb) if c.section == section]
        assert ids and all(check_id in doc for check_id in ids), (section.module, ids)
