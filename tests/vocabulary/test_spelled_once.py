"""Each vocabulary of vocabulary/ spelled once: the trigger kinds, the ``--json`` error kinds, the policy ids and the
check ids. The registries hold exactly the ids their enums list, and no product module spells a word of a
vocabulary outside its home, but where listed below (the same spelling naming another thing)."""

from __future__ import annotations

import ast

import pytest

from checks.catalogue import CATALOGUE
from fleetspec.fleet_file import HALT_SIGNS
from policy.registry import POLICY_IDS, RULE_MODULES, declared
from tests.vocabulary.spellings import Hit, spellings, stray, unexplained
from vocabulary.check_ids import CheckId
from vocabulary.errors import ErrorKind
from vocabulary.policy_ids import ADVICE_POLICY_ID, PolicyId
from vocabulary.triggers import BAD_SIGNS, TriggerKind

def _judge(found: list[Hit], elsewhere: dict[tuple[str, str], str]) -> None:
    left, stale = unexplained(found, elsewhere)
    assert left == [], f"spelled outside its home: {left}"
    assert [key for key in stale if key in elsewhere] == [], "an allowance no spelling uses: remove it"


# ---------------------------------------------------------------- trigger kinds

TRIGGER_HOMES = {"vocabulary/triggers.py", "gpu_knowledge/labels.py"}  # upgrade-failed is the operator's state
TRIGGER_ELSEWHERE = {("checks/verify_read.py", "not-ready"): "a model probe's outcome: the pod is not Ready"}


def _trigger_hits() -> list[Hit]:
    return stray({str(kind) for kind in TriggerKind}, TRIGGER_HOMES)


def test_every_trigger_kind_is_spelled_in_its_home_only() -> None:
    _judge(_trigger_hits(), TRIGGER_ELSEWHERE)


def test_the_bad_signs_are_every_kind_but_outside_window() -> None:
    assert len(TriggerKind) == 10  # slo-no-data (issue 36) and validation-missing (issue 35) among them
    assert set(BAD_SIGNS) == set(TriggerKind) - {TriggerKind.OUTSIDE_WINDOW} == set(HALT_SIGNS)
    assert TriggerKind.UPGRADE_FAILED == "upgrade-failed" and f"{TriggerKind.STUCK}" == "stuck"


# ---------------------------------------------------------------- error kinds

DISTINCT_ERROR_KINDS = {ErrorKind.INVALID_INPUT, ErrorKind.WRONG_CLUSTER}  # words that name nothing else
ERROR_CALLS = frozenset({"refused", "refuse", "error_document"})  # (code, kind, message, ...)


def _error_kind_places(tree: ast.AST) -> set[int]:
    """Where a word names an error kind: the kind argument of the calls that write an error document, and a
    Literal that lists error kinds."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) > 1:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ERROR_CALLS:
                found.add(id(node.args[1]))
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            words = [c for c in ast.walk(node.slice) if isinstance(c, ast.Constant)]
            if any(c.value in DISTINCT_ERROR_KINDS for c in words):
                found.update(id(c) for c in words)
    return found


def _error_hits() -> list[Hit]:
    homes = {"vocabulary/errors.py"}
    return sorted(set(stray({str(k) for k in DISTINCT_ERROR_KINDS}, homes)
                      + stray({str(k) for k in ErrorKind}, homes, where=_error_kind_places)))


def test_every_error_kind_is_spelled_in_its_home_only() -> None:
    _judge(_error_hits(), {})


@pytest.mark.parametrize(("source", "found"), [
    ('refused(Exit.INVALID, "invalid-input", "x", as_json=True)', ["invalid-input"]),
    ('documents.refused(code, "backend", "x", as_json=True)', ["backend"]),
    ('kind: Literal["invalid-input", "cluster"]', ["invalid-input", "cluster"]),
    ('say("cluster", "backend")', []),  # the words, naming something else
    ('refused(Exit.INVALID, ErrorKind.INVALID_INPUT, "x", as_json=True)', []),
])
def test_the_search_finds_an_error_kind_where_it_names_one(source: str, found: list[str]) -> None:
    hits = spellings(source, "m.py", {str(k) for k in ErrorKind}, _error_kind_places)
    assert [value for _, _, value in hits] == found


# ---------------------------------------------------------------- policy ids

def _policy_hits() -> list[Hit]:
    # An id may be a check's too (spare-capacity): vocabulary/check_ids.py spells it for the check.
    return stray({str(p) for p in PolicyId} | {ADVICE_POLICY_ID}, {"vocabulary/policy_ids.py", "vocabulary/check_ids.py"})


def test_the_registry_holds_exactly_the_policy_ids_in_their_order() -> None:
    assert list(POLICY_IDS) == [str(p) for p in PolicyId]
    assert [p.id for module in RULE_MODULES for p in declared(module)] == list(PolicyId)
    assert all(type(p) is str for p in POLICY_IDS)  # the registry keeps plain strings: output is unchanged


def test_every_policy_id_is_spelled_in_its_home_only() -> None:
    _judge(_policy_hits(), {})


# ---------------------------------------------------------------- check ids

CHECK_ELSEWHERE = {
    ("gpu_knowledge/labels.py", "cluster-identity"): "the identity record's label value (RECORD_CLUSTER_IDENTITY)",
    ("components/fleet.py", "cluster-identity"): "the identity ConfigMap's resource name",
    ("components/validation.py", "validation-job"): "an admission policy's match condition name",
    ("renderers/manifests.py", "cluster-policy"): "the ClusterPolicy's name (CLUSTER_POLICY_NAME)",
    ("checks/validation.py", "driver-version"): "the validation job's own check (workload.result.CHECKS)",
}


def _check_hits() -> list[Hit]:
    return stray({str(c) for c in CheckId}, {"vocabulary/check_ids.py", "vocabulary/policy_ids.py"})


def test_the_catalogue_holds_exactly_the_check_ids_in_their_order() -> None:
    ids = [c.id for verb in ("preflight", "verify") for c in CATALOGUE.checks(verb)]
    assert ids == [str(c) for c in CheckId]
    assert all(type(c) is str for c in ids)  # plain strings: the JSON and tables are unchanged


def test_every_check_id_is_spelled_in_its_home_only() -> None:
    _judge(_check_hits(), CHECK_ELSEWHERE)
