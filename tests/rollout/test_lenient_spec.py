"""The FleetSpec's names and defaults over a config the spec may refuse (pulumi_backend/lenient_spec.py), which is
how rollback reads the configs of old updates."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pulumi_backend.lenient_spec import LenientView, config_key, fleet, is_present, value_of, with_fields
from pulumi_backend.pulumi_config import Entry
from fleetspec.load import SpecError, read_stack_file, spec_from_config
from fleetspec.operator import UpgradePolicy
from fleetspec.pools import EksPool, Generation

CHECKOUT = Path(__file__).resolve().parents[2]
KEY = "gpu-driver-upgrade:"


def example(name: str) -> dict[str, Any]:
    return {k: json.loads(v) if v[:1] in "{[" else v for k, v in read_stack_file(CHECKOUT / f"Pulumi.{name}.yaml").items()}


def entries(values: dict[str, Any], secret: frozenset[str] = frozenset()) -> dict[str, Entry]:
    return {k: Entry(v, k in secret) for k, v in values.items()}


def test_a_config_the_spec_accepts_reads_as_the_spec_reads_it() -> None:
    values = example("eks-prod")
    spec = spec_from_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()})
    view = fleet(entries(values))
    assert (view.stage, view.driver.version, view.driver.owner) == (spec.stage, spec.driver.version, spec.driver.owner)
    assert [p.name for p in view.nodePools] == [p.name for p in spec.nodePools]
    assert [[(g.id, g.driverVersion, g.retired) for g in p.generations] for p in view.nodePools] == [
        [(g.id, g.driverVersion, g.retired) for g in p.generations or []] for p in spec.nodePools]
    assert [p.eks.maxUnavailable for p in view.nodePools] == [p.eks.maxUnavailable for p in spec.nodePools if p.eks]


def test_a_config_the_spec_refuses_still_reads() -> None:
    values = copy.deepcopy(example("existing-canary"))
    values[KEY + "driver"]["version"] = "not-a-driver"
    values[KEY + "nodePools"][0]["retiredField"] = True  # an old release's key
    values[KEY + "nodePools"].append("not a pool")
    with pytest.raises(SpecError):
        spec_from_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()})
    view = fleet(entries(values))
    assert view.driver.version == "not-a-driver"
    assert [is_present(p) for p in view.nodePools][-2:] == [True, False]
    assert value_of(view.nodePools[-1]) == "not a pool" and view.nodePools[-1].name is None
    assert value_of(view.nodePools[0])["retiredField"] is True  # kept as written, though no name reads it


def test_what_the_config_leaves_out_reads_as_the_model_s_default() -> None:
    values = copy.deepcopy(example("existing-canary"))
    del values[KEY + "gpuOperator"]["upgradePolicy"]
    policy = fleet(entries(values)).gpuOperator.upgradePolicy
    assert (policy.maxParallelUpgrades, policy.maxUnavailable) == (
        UpgradePolicy().maxParallelUpgrades, UpgradePolicy().maxUnavailable)
    assert is_present(policy)  # the model's default is a block: it stands as one


def test_an_absent_block_is_not_present_and_reads_its_model_s_defaults() -> None:
    pool = fleet(entries(example("existing-canary"))).nodePools[0]
    assert not is_present(pool.eks) and value_of(pool.eks) is None
    assert pool.eks.maxUnavailable == EksPool.model_fields["maxUnavailable"].default
    assert pool.eks.launchTemplate.version is None  # required by its model: no default to read
    assert pool.generations == []


def test_a_secret_and_another_project_s_key_are_not_read() -> None:
    values = example("existing-canary")
    view = fleet(entries({**values, "kubernetes:context": "x"}, secret=frozenset({KEY + "driver"})))
    assert view.driver.version is None and not is_present(view.driver)
    assert view.stage == values[KEY + "stage"]


def test_a_name_the_model_lacks_is_an_error_not_an_absent_value() -> None:
    view = fleet(entries(example("existing-canary")))
    with pytest.raises(AttributeError, match="Driver has no field 'versoin'"):
        _ = view.driver.versoin
    with pytest.raises(AttributeError, match="Generation has no field 'nodecount'"):
        with_fields(LenientView(Generation, {"id": 1}), nodecount=0)
    with pytest.raises(AttributeError, match="FleetSpec has no field 'nodepools'"):
        config_key("nodepools")


def test_with_fields_sets_fields_on_the_config_s_own_object() -> None:
    raw = {"id": 2, "driverVersion": "580.173.02", "future": "kept"}
    assert with_fields(LenientView(Generation, raw), nodeCount=0) == {**raw, "nodeCount": 0}
    assert raw == {"id": 2, "driverVersion": "580.173.02", "future": "kept"}
    assert config_key("nodePools") == KEY + "nodePools"
