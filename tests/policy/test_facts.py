"""policy.facts: the stack's facts are read once per evaluation and handed to every stack rule."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st
from pulumi_policy import PolicyResource, StackValidationArgs

from policy import facts, pack
from policy.evaluate import evaluate, load_config
from policy.facts import Pool, StackFacts
from policy.registry import REGISTRY
from gpu_knowledge import labels
from engine_contracts import resource_facts as rf
from tests.policy.rules import of_type, resources


def test_evaluate_reads_the_stack_once_and_hands_every_stack_rule_the_same_facts(rendered, monkeypatch):
    items = resources(rendered["prod"])
    expected = evaluate(items, load_config("prod"))
    seen: list[StackFacts] = []
    for policy in [p for p in REGISTRY.values() if p.stack_rule is not None]:
        def recording(stack, *settings, rule=policy.stack_rule):  # a configured rule takes its settings too
            seen.append(stack)
            return rule(stack, *settings)

        monkeypatch.setitem(REGISTRY, policy.id, replace(policy, stack_rule=recording))
    calls = {"pools": 0, "operator_drivers": 0, "model_budgets": 0}
    for name in calls:
        def counting(resources, original=getattr(facts, name), name=name):  # noqa: B008 - binds this loop turn's function
            calls[name] += 1
            return original(resources)

        monkeypatch.setattr(facts, name, counting)
    assert evaluate(items, load_config("prod")) == expected
    assert len(seen) == len([p for p in REGISTRY.values() if p.stack_rule is not None]) and len({id(s) for s in seen}) == 1
    assert calls == {"pools": 1, "operator_drivers": 1, "model_budgets": 1}


def _stack_args(run) -> StackValidationArgs:
    return StackValidationArgs(
        [PolicyResource(r.type, r.props, r.urn or r.name, r.name, None, None, None, [], {}) for r in resources(run)], {}
    )


def test_the_advice_policy_reads_the_stack_once_for_every_rule(rendered, monkeypatch):
    built: list[StackFacts] = []

    class Counted(StackFacts):
        def __init__(self, resources):
            super().__init__(resources)
            built.append(self)

    monkeypatch.setattr(pack, "StackFacts", Counted)
    reported: list[str] = []
    pack.build_advice_policy().validate(_stack_args(rendered["prod"]), lambda message, urn=None: reported.append(message))
    assert len(built) == 1 and reported  # prod's held pools give advice
    pack.build_policy(REGISTRY["spare-capacity"]).validate(_stack_args(rendered["prod"]), lambda *a: None)
    assert len(built) == 2


def test_facts_are_kept_once_read(rendered):
    stack = StackFacts(resources(rendered["prod"]))
    assert stack.pools is stack.pools and stack.drivers is stack.drivers and stack.models is stack.models
    assert set(stack.pools) == {"gput4", "gpua100", "gpuh100"}
    assert stack.stage == "prod" and stack.stage_stated and stack.change_ticket == "CHG-20261209-0077"
    assert stack.batch_selectors == ["workload-class=batch"]
    assert stack.has(rf.CLUSTER_POLICY_PATCH) and not stack.has(rf.HELM_RELEASE)
    (patch,) = of_type(list(stack.resources), rf.CLUSTER_POLICY_PATCH)
    assert stack.operator_driver(patch) is next(d for d in stack.drivers if d.resource is patch)
    (pdb, *_) = of_type(list(stack.resources), rf.PDB)
    assert stack.operator_driver(pdb) is None
    # A driver object from elsewhere is read on the spot.
    other = replace(patch, name="another")
    assert stack.operator_driver(other).resource is other


def test_a_pool_only_a_model_names_has_its_name_and_nothing_else():
    pool = Pool("named-only")
    assert pool.labels == {labels.POOL: "named-only"} and pool.nodes is None and pool.image_drivers == []
    assert StackFacts([]).pool("named-only").resources == []


def test_rules_read_resources_in_one_order_whatever_order_they_arrive_in(rendered):
    # The engine hands a stack policy its resources in the order they registered, which is the SDK's.
    items = resources(rendered["eks-prod"])
    forward, backward = StackFacts(items), StackFacts(list(reversed(items)))
    assert forward.resources == backward.resources
    assert list(forward.pools) == sorted(forward.pools)
    for name, pool in forward.pools.items():
        assert [r.name for r in pool.resources] == [r.name for r in backward.pools[name].resources]
    assert [d.resource.name for d in forward.drivers] == [d.resource.name for d in backward.drivers]


def test_a_pools_generations_are_oldest_first_by_id_not_by_name():
    def group(generation: int) -> facts.Resource:
        node_labels = {labels.POOL: "gpu-l40s", labels.GENERATION: str(generation)}
        return facts.Resource(rf.EKS_NODE_GROUP, f"gpu-l40s-g{generation}", {"labels": node_labels})

    (pool,) = facts.pools([group(10), group(2), group(9)]).values()
    assert [r.name for r in pool.resources] == ["gpu-l40s-g2", "gpu-l40s-g9", "gpu-l40s-g10"]


_LABEL_KEYS = ("pool", "tier", "zone")
_LABEL_VALUES = ("a", "b", "c")


@settings(max_examples=150, deadline=None)
@given(
    pools=st.lists(st.dictionaries(st.sampled_from(_LABEL_KEYS), st.sampled_from(_LABEL_VALUES)), max_size=6),
    selectors=st.lists(st.tuples(
        st.dictionaries(st.sampled_from(_LABEL_KEYS), st.one_of(st.sampled_from(_LABEL_VALUES), st.integers(0, 1))),
        st.booleans()), max_size=5),
)
def test_the_pools_a_driver_selects_are_found_by_index_as_by_matching_each(pools, selectors):
    # The label index (StackFacts.pools_selected_by, drivers_of) answers what matching every pool would.
    items = [facts.Resource(rf.EKS_NODE_GROUP, f"p{i}-g1", {"labels": {labels.POOL: f"p{i}", **extra}})
             for i, extra in enumerate(pools)]
    items += [facts.Resource(rf.NVIDIA_DRIVER, f"d{i}", {"spec": {"nodeSelector": selector, "default": default}})
              for i, (selector, default) in enumerate(selectors)]
    stack = StackFacts(items)
    for driver in stack.drivers:
        assert stack.pools_selected_by(driver) == [p for p in stack.pools.values() if driver.selects(p.labels)]
    for pool in [*stack.pools.values(), Pool("named-only")]:
        assert stack.drivers_of(pool) == facts.drivers_for_pool(pool, stack.drivers)
