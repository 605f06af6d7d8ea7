"""The catalogue of live checks (checks/metadata.py declares, checks/catalogue.py gathers): each check declared
once, in the module of its runbook section, named by the runner and never by itself; every section module
imported by name, so the import contracts see it; and how a verb of its own (verify, runbook section 5) joins."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types

import grimp
import pytest

import checks
from checks import owner, preflight
from checks.catalogue import CATALOGUE, SECTION_MODULES, Catalogue, declared
from checks.metadata import OWNERSHIP, SECTIONS, Check, Section, check, definition
from checks.results import CheckResult, Finding, Status, failed, passed, warned
from tests.conftest import PROJECT_DIR

RUNBOOK = (PROJECT_DIR / "docs" / "runbook.md").read_text(encoding="utf-8")


def test_every_section_follows_a_heading_of_the_runbook_and_lives_in_its_own_module() -> None:
    headings = {line.lstrip("#").strip() for line in RUNBOOK.splitlines() if line.startswith("#")}
    for section in SECTIONS:
        assert section.runbook in headings, section
    section_of_module = {module.__name__: {c.section for c in declared(module)} for module in SECTION_MODULES}
    assert all(len(found) == 1 for found in section_of_module.values()), section_of_module
    assert [found.pop() for found in section_of_module.values()] == list(SECTIONS)  # one module each, in order


@pytest.mark.parametrize("check", CATALOGUE.checks("preflight"), ids=lambda c: c.id)
def test_each_check_is_declared_in_its_sections_module_and_documented(check: Check) -> None:
    module = sys.modules[check.function.__module__]
    assert module in SECTION_MODULES and {c.section for c in declared(module)} == {check.section}
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


def test_a_module_declares_its_checks_in_the_order_it_writes_them_and_the_decorator_changes_nothing() -> None:
    assert [c.id for c in declared(owner)] == ["cluster-policy", "driver-owner", "per-pool-mode",
                                               "two-driver-owners", "driver-versions", "running-today",
                                               "node-image", "node-os-channel"]
    assert [c.id for c in CATALOGUE.checks("preflight")][4:12] == [c.id for c in declared(owner)]
    elsewhere = types.ModuleType("elsewhere")
    elsewhere.check_driver_owner = owner.check_driver_owner  # type: ignore[attr-defined]  # imported, not declared
    assert declared(elsewhere) == []
    assert definition(owner.check_driver_owner) == Check("driver-owner", OWNERSHIP, owner.check_driver_owner)
    assert definition(owner.operator_driver_targets) is None
    assert inspect.isfunction(owner.check_driver_owner)  # still the plain function: tests call it directly


# ---------------------------------------------------------------- the catalogue's guards

HERE = Section("Here", "Here", "preflight")


def _findings(facts: object) -> list[Finding]:
    return [passed("cluster", f"saw {facts}"), warned("pool-a", "careful")]


def test_the_runner_stamps_the_id_on_every_finding() -> None:
    catalogue = Catalogue([HERE], [Check("example-check", HERE, _findings)])
    assert catalogue.run("preflight", "the facts") == [
        CheckResult("example-check", Status.PASS, "cluster", "saw the facts"),
        CheckResult("example-check", Status.WARN, "pool-a", "careful"),
    ]
    assert catalogue.section_of("example-check") == HERE


def test_a_check_that_names_itself_is_refused() -> None:
    catalogue = Catalogue([HERE], [Check("self-naming", HERE,
                                         lambda facts: [CheckResult("self-naming", Status.PASS, "x", "y")])])
    with pytest.raises(TypeError, match="a check returns Findings"):
        catalogue.run("preflight", None)


@pytest.mark.parametrize(("check_id", "section", "match"), [
    ("example-check", HERE, "registered twice: .*_findings and .*<lambda>"),
    ("Example_Check", HERE, "not kebab-case"),
    ("other-check", Section("Elsewhere", "Elsewhere", "preflight"), "is not one of this catalogue's"),
])
def test_the_catalogue_refuses(check_id: str, section: Section, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Catalogue([HERE], [Check("example-check", HERE, _findings), Check(check_id, section, lambda facts: [])])


@check("driver-owner", OWNERSHIP)
def _driver_owner_again(inventory: object) -> list[Finding]:
    return []


def test_an_id_of_the_catalogue_cannot_be_declared_again() -> None:
    modules = (*SECTION_MODULES, sys.modules[__name__])  # this module declares driver-owner too (above)
    with pytest.raises(ValueError, match="'driver-owner' is registered twice: checks.owner.check_driver_owner and "
                       "tests.checks.test_catalogue._driver_owner_again"):
        Catalogue(SECTIONS, [c for module in modules for c in declared(module)])


# ---------------------------------------------------------------- another verb: verify (runbook section 5)

VALIDATION = Section("5. Validate the canary", "5. Validate the canary", "verify")


def test_verify_checks_join_the_same_catalogue_under_their_own_verb() -> None:
    """What issue 10 does with the real catalogue: list a section with verb="verify" beside the preflight ones,
    declare its checks with @check in the section's module, and run them over verify's own facts."""
    assert "5. Validate the canary" in {line.lstrip("#").strip() for line in RUNBOOK.splitlines()}
    assert [m.__name__ for m in SECTION_MODULES if {c.section.verb for c in declared(m)} == {"verify"}] == [
        "checks.validation"]  # the real one (issue 10)
    assert [s.title for s in CATALOGUE.sections("verify")] == ["5. Validate the canary"]

    @check("canary-soaked", VALIDATION)
    def check_canary_soaked(facts: dict[str, float]) -> list[Finding]:
        hours = facts["hours"]
        return [(passed if hours >= 24 else failed)("canary", f"{hours:.0f} h on the new driver")]

    declared_here = definition(check_canary_soaked)
    assert declared_here is not None
    catalogue = Catalogue([*(s for s in SECTIONS if s.verb == "preflight"), VALIDATION], [declared_here])
    assert catalogue.sections("verify") == [VALIDATION]
    assert [c.id for c in catalogue.checks("verify")] == ["canary-soaked"]
    assert catalogue.checks("preflight") == []  # the preflight checks are the real catalogue's, not this one's
    assert catalogue.run("verify", {"hours": 6}) == [CheckResult("canary-soaked", Status.FAIL, "canary",
                                                                 "6 h on the new driver")]
    assert check_canary_soaked({"hours": 30})[0].status == Status.PASS  # the decorator returns the function


# ---------------------------------------------------------------- every check module, imported by name


def test_the_catalogue_loads_its_section_modules_itself() -> None:
    """A verb gets every check of its sections whoever imported what: importing the catalogue imports each
    section's module."""
    code = ("import sys; from checks.catalogue import CATALOGUE; "
            "ids = [c.id for c in CATALOGUE.checks('preflight')]; "
            "print(len(ids), 'checks.owner' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_DIR, check=True,
                         timeout=120).stdout.split()
    assert out == [str(len(CATALOGUE.checks("preflight"))), "True"] and int(out[0]) == 30


def test_every_module_that_declares_a_check_is_in_the_catalogue_and_none_is_loaded_by_string() -> None:
    modules = [importlib.import_module(f"checks.{info.name}") for info in pkgutil.iter_modules(checks.__path__)]
    assert [m for m in modules if declared(m)] == sorted(SECTION_MODULES, key=lambda m: m.__name__)
    for module in modules:
        source = inspect.getsource(module)
        assert "import_module" not in source and "__import__" not in source, module.__name__


def test_the_import_graph_sees_every_check_module() -> None:
    """What lint-imports checks: every module of checks/ is imported by a module of the product, so the
    layering and the no-Pulumi contracts in pyproject.toml cover it."""
    graph = grimp.build_graph("checks", "rollout", cache_dir=None)  # no cache written into the checkout
    unseen = sorted(m for m in graph.find_children("checks") if not graph.find_modules_that_directly_import(m))
    assert unseen == []
    assert graph.find_shortest_chain("rollout.preflight", "checks.disruption") is not None


def test_each_section_module_says_which_runbook_section_and_checks_it_holds() -> None:
    for module in SECTION_MODULES:
        doc = module.__doc__ or ""
        assert "runbook" in doc.split(":", 1)[0].lower(), module.__name__
        ids = [c.id for c in declared(module)]
        assert ids and all(check_id in doc for check_id in ids), (module.__name__, ids)
