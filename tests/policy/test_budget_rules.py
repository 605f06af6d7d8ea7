"""policy.budget_rules called directly: PodDisruptionBudgets, model redundancy, forced eviction."""

from __future__ import annotations

from dataclasses import replace

from policy import budget_rules, capacity_rules
from preview.run import run_program
from engine_contracts import resource_facts as rf
from tests.conftest import stack_config
from tests.policy.rules import of_type, resources, spec_edit, stack
from tests.policy.variants import change, upgrade_policy


# ---------------------------------------------------------------- eviction-respects-pdb


def test_malformed_eviction_values_are_findings_not_exceptions(rendered):
    (patch,) = of_type(resources(rendered["prod"]), rf.CLUSTER_POLICY_PATCH)
    odd_deletion = spec_edit(patch, ("spec", "driver", "upgradePolicy"), podDeletion="force")
    (finding,) = budget_rules.eviction_respects_pdb(odd_deletion)
    assert "podDeletion must be an object" in finding.message and not finding.advisory
    not_a_policy = spec_edit(patch, ("spec", "driver"), upgradePolicy="fast")
    (finding,) = budget_rules.eviction_respects_pdb(not_a_policy)
    assert "upgradePolicy must be an object" in finding.message


def test_zero_eviction_timeout_is_advice_not_mandatory():
    config = change(stack_config("prod"), "gpuOperator", upgrade_policy(podDeletion__timeoutSeconds=0))
    items = resources(run_program(config, "prod"))
    found = [f for r in items for f in budget_rules.eviction_respects_pdb(r)]
    assert found and all(f.advisory for f in found)


# ---------------------------------------------------------------- pdb-allows-drain


def test_resource_with_missing_facts_is_advice(rendered):
    (pdb, *_) = of_type(resources(rendered["prod"]), rf.PDB)
    bare = replace(pdb, props={**pdb.props, "metadata": {"name": "x"}})
    (finding,) = budget_rules.pdb_allows_drain(bare)
    assert finding.advisory and "not visible" in finding.message


def test_malformed_pdb_is_a_finding_and_capacity_rules_stay_quiet_about_it(rendered):
    items = resources(rendered["prod"])
    pdb = next(r for r in of_type(items, rf.PDB) if "embed-triton" in r.name)
    bad = replace(pdb, props={**pdb.props, "spec": {**pdb.props["spec"], "minAvailable": "most"}})
    (finding,) = budget_rules.pdb_allows_drain(bad)
    assert not finding.advisory and "malformed" in finding.message
    swapped = [bad if r is pdb else r for r in items]
    spare = list(capacity_rules.spare_capacity(stack(swapped)))
    assert spare and all(f.advisory for f in spare)


def test_pdb_with_max_unavailable_uses_the_disruption_controller_arithmetic(rendered):
    pdb = next(r for r in of_type(resources(rendered["prod"]), rf.PDB) if "embed-triton" in r.name)
    spec = {k: v for k, v in pdb.props["spec"].items() if k != "minAvailable"}
    allows = replace(pdb, props={**pdb.props, "spec": {**spec, "maxUnavailable": "1%"}})  # 1% of 4 rounds up to 1
    assert list(budget_rules.pdb_allows_drain(allows)) == []
    blocks = replace(pdb, props={**pdb.props, "spec": {**spec, "maxUnavailable": 0}})
    (finding,) = budget_rules.pdb_allows_drain(blocks)
    assert "maxUnavailable 0 lets no pod go" in finding.message


# ---------------------------------------------------------------- model-redundancy


def test_model_redundancy_without_visible_replicas_is_advice(rendered):
    (pdb, *_) = of_type(resources(rendered["prod"]), rf.PDB)
    bare = replace(pdb, props={**pdb.props, "metadata": {"name": "x"}})
    (finding,) = budget_rules.model_redundancy(bare)
    assert finding.advisory and "replicas are not visible" in finding.message
