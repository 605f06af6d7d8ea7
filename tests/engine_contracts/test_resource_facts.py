"""engine_contracts.resource_facts: what the program writes on its resources reads back as what the spec says.

The round trip runs the real program under Pulumi's mocks on generated fleets (tests/fleetspec/fleets.py),
decodes every fact from the rendered resources with ``engine_contracts.resource_facts``, and compares it with the
facts stated here straight from the FleetSpec: pool labels, node counts and tags, the operator's driver
objects, the models' PDBs, the records, and the stack-wide stage, change ticket and batch selectors.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, assume, given, settings

from preview.run import ProgramRun, RegisteredResource, run_program
from gpu_knowledge import labels
from renderers import manifests
from gpu_knowledge import replacement
from components import guard, validation
from engine_contracts import resource_facts as rf
from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import Cloud, ClusterPolicyMode, DriverOwner, FleetSpec, NodePool, Stage, UpgradePolicy
from fleetspec.pools import EksPool
from tests.conftest import EXAMPLE_STACKS, edited, stack_config
from tests.fleetspec.fleets import fleets

# ---------------------------------------------------------------- the facts as the spec states them


def expected_pool(spec: FleetSpec, pool: NodePool, generation: Any = None) -> rf.PoolFacts:
    operator = spec.driver.owner == DriverOwner.OPERATOR
    declared_os = None
    if pool.eks is not None and pool.eks.launchTemplate is not None:
        declared_os = pool.eks.launchTemplate.os
    elif pool.existing is not None:
        declared_os = pool.existing.os
    return rf.PoolFacts(
        pool=pool.name, role=pool.role, wave=pool.rollout.wave,
        held=pool.role != "canary" and not pool.rollout.released,
        gpu_product=pool.gpuProduct, gpus_per_node=pool.gpusPerNode, nvswitch=pool.nvswitch, os=declared_os,
        fabric_manager=(pool.fabricManager or ("driver-container" if operator else "image")) if pool.nvswitch else None,
        fabric_manager_version=pool.fabricManagerVersion if pool.nvswitch else None,
        generation=generation.id if generation is not None else None,
        image_driver=generation.driverVersion if generation is not None else None,
    )


def cloud_pools(spec: FleetSpec) -> dict[str, tuple[NodePool, Any]]:
    """Resource name -> (pool, generation) of every pool resource the stack renders."""
    out: dict[str, tuple[NodePool, Any]] = {}
    for pool in spec.nodePools:
        if spec.cluster.cloud == Cloud.EXISTING:
            out[manifests.pool_record_name(pool)] = (pool, None)
        else:
            for generation in (pool.live_generations if pool.generations else [None]):
                out[pool.cloud_name(generation)] = (pool, generation)
    return out


def expected_drivers(spec: FleetSpec) -> dict[str, rf.OperatorDriverFacts]:
    op, operator = spec.gpuOperator, spec.driver.owner == DriverOwner.OPERATOR
    selectors = tuple(op.batchJobSelectors)
    notes = rf.DriverNotes(spec.stage, op.chartVersion, spec.driver.version, None, selectors)
    cluster_wide = {
        "enabled": operator, "version": spec.driver.version if operator else None,
        "precompiled": op.usePrecompiled if operator else False, "selector": None, "default": False,
        "use_crd": op.useNvidiaDriverCrd if operator else False,
        "upgrade_policy": op.upgradePolicy.as_crd() if operator else None,
        "operator_version": op.chartVersion, "role": None,
    }
    out: dict[str, rf.OperatorDriverFacts] = {}
    if op.clusterPolicy == ClusterPolicyMode.PATCH:
        out[manifests.CLUSTER_POLICY_NAME] = rf.OperatorDriverFacts(rf.CLUSTER_POLICY_PATCH, **cluster_wide, notes=notes)
    elif op.clusterPolicy == ClusterPolicyMode.HELM:  # a Release carries no metadata: no annotations
        out["gpu-operator"] = rf.OperatorDriverFacts(rf.HELM_RELEASE, **cluster_wide, notes=rf.DriverNotes(None, None, None))
    if operator and op.useNvidiaDriverCrd:
        for pool in spec.nodePools:
            held = pool.role != "canary" and not pool.rollout.released
            out[manifests.nvidia_driver_name(pool)] = rf.OperatorDriverFacts(
                rf.NVIDIA_DRIVER, True, spec.pool_target(pool).driver, op.usePrecompiled,
                dict(pool.existing.nodeSelector) if pool.existing is not None else {labels.POOL: pool.name},
                False, False, spec.upgrade_policy(pool).as_crd() if op.per_driver_upgrade_policy else None,
                op.chartVersion, pool.role, rf.DriverNotes(spec.stage, op.chartVersion, spec.driver.version, held, selectors),
            )
    return out


def expected_models(spec: FleetSpec) -> dict[str, rf.ModelFacts]:
    return {
        m.name: rf.ModelFacts(
            m.name, spec.stage, m.replicas, m.gpusPerReplica, m.cudaVersion, m.image, tuple(m.nodePools),
            m.cudaForwardCompat, m.minAvailable, None, spec.changeTicket, tuple(spec.gpuOperator.batchJobSelectors),
        )
        for m in spec.models
    }


def expected_identity(spec: FleetSpec) -> rf.IdentityFacts:
    """This deployment: which cluster, and what it runs (the last one is not copied onto the record)."""
    per_pool = spec.driver.owner == DriverOwner.OPERATOR and spec.gpuOperator.useNvidiaDriverCrd
    aks, eks = spec.cluster.aks, spec.cluster.eks
    return rf.IdentityFacts(
        spec.cluster.name, spec.cluster.cloud.value, spec.stage, spec.gpuOperator.chartVersion, per_pool,
        aks.resourceGroup if aks else None, aks.clusterName if aks else None,
        eks.clusterName if eks else None, eks.region if eks else None,
        unpinned_hold_reason=spec.gpuOperator.unpinnedHoldReason, facts_version=rf.FACTS_VERSION,
        wave_dwell_hours=spec.rollout.waveDwellHours, early_release_reason=spec.rollout.earlyReleaseReason,
        serving_before_batch_reason=spec.rollout.servingBeforeBatchReason,
        keep_generation_hours=spec.rollout.keepGenerationHours, early_retire_reason=spec.rollout.earlyRetireReason,
        maintenance_window=(spec.rollout.maintenanceWindow.model_dump_json()
                            if spec.rollout.maintenanceWindow is not None else None),
        validation_job=spec.validation is not None,
    )


# ---------------------------------------------------------------- the facts as the pack reads them back


def custom(run: ProgramRun) -> list[RegisteredResource]:
    return [r for r in run.resources if r.custom]


def check_round_trip(spec: FleetSpec, run: ProgramRun) -> None:
    items = custom(run)
    pool_resources = {r.name: r for r in items if rf.is_pool_resource(r.type, r.inputs)}
    rendered = cloud_pools(spec)
    assert set(pool_resources) == set(rendered)
    for name, (pool, generation) in rendered.items():
        res = pool_resources[name]
        node_labels = rf.pool_node_labels(res.type, res.inputs)
        assert rf.read_pool_labels(node_labels) == expected_pool(spec, pool, generation), name
        assert rf.states_generation(node_labels) == (generation is not None)
        assert rf.node_count(res.type, res.inputs) == pool.generation_nodes(generation)
        if res.type == rf.CONFIG_MAP:
            assert pool.existing is not None and rf.read_node_selector(res.inputs) == pool.existing.nodeSelector
            continue
        tags = rf.read_pool_tags(res.inputs)
        node_image = generation.nodeImageVersion if generation is not None and res.type == rf.AKS_POOL else None
        assert (tags.pool, tags.stage, tags.driver_owner, tags.change_ticket, tags.node_image) == (
            pool.name, spec.stage, spec.driver.owner.value, spec.changeTicket, node_image)
        assert tags.image_driver == (generation.driverVersion if node_image else None)
        sent = (replacement.eks_node_group_fields if res.type == rf.EKS_NODE_GROUP else replacement.aks_agent_pool_fields)
        assert replacement.decode(tags.deployed_with) == sent(res.inputs)  # a first deployment records what it sends
        operator = spec.driver.owner == DriverOwner.OPERATOR
        assert rf.image_owns_driver(res.type, res.inputs) == (not operator)

    drivers = {r.name: rf.read_operator_driver(r.type, r.inputs) for r in items if r.type in rf.DRIVER_TYPES}
    assert drivers == expected_drivers(spec)

    models = [rf.read_model(r.inputs, r.name) for r in items if rf.is_model_budget(r.type, r.inputs)]
    assert {m.name: m for m in models} == expected_models(spec) and len(models) == len(spec.models)

    identities = [r for r in items if rf.record_kind(r.inputs) == labels.RECORD_CLUSTER_IDENTITY]
    assert [rf.read_identity(r.inputs) for r in identities] == [expected_identity(spec)]

    # Stack-wide facts: every resource that states one states the spec's.
    stages = set().union(*(rf.stated_stages(r.inputs) for r in items))
    assert stages == {spec.stage.value}
    tickets = set().union(*(rf.stated_change_tickets(r.inputs) for r in items))
    carriers = bool(spec.models) or spec.cluster.cloud != Cloud.EXISTING  # PDBs, cloud pool tags
    assert tickets == ({spec.changeTicket} if spec.changeTicket and carriers else set())
    stating = [rf.stated_batch_selectors(r.inputs) for r in items]
    assert {s for s in stating if s} <= {tuple(spec.gpuOperator.batchJobSelectors)}
    if spec.gpuOperator.batchJobSelectors and spec.models:
        assert tuple(spec.gpuOperator.batchJobSelectors) in stating  # Helm mode too: the PDBs carry them


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_example_reads_back_as_its_spec(rendered, stack):
    check_round_trip(spec_from_config(stack_config(stack)), rendered[stack])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(fleet=fleets())
def test_generated_fleets_read_back_as_their_spec(fleet: tuple[str, dict[str, str]]) -> None:
    stack, config = fleet
    try:
        spec = spec_from_config(config)
    except SpecError:
        assume(False)
        return
    check_round_trip(spec, run_program(config, stack))


def test_the_last_deployment_reads_back_from_its_component(rendered):
    # Per-pool mode switched on in this change; the last deployment ran the example's prod fleet.
    config = edited("existing-prod", "gpuOperator", lambda op: op.update(useNvidiaDriverCrd=False))
    last = run_program(config, "existing-prod").outputs
    run = run_program(stack_config("existing-prod"), "existing-prod", previous_outputs=last)
    (component,) = [r for r in run.resources if r.type == rf.PREVIOUS_DEPLOYMENT_COMPONENT]
    (reference,) = [r for r in run.resources if r.type == rf.STACK_REFERENCE and r.name == rf.PREVIOUS_DEPLOYMENT]
    assert reference.urn.split("::")[2].endswith(f"{rf.PREVIOUS_DEPLOYMENT_COMPONENT}${rf.STACK_REFERENCE}")
    previous = rf.read_previous_deployment(rf.previous_deployment_outputs(component.outputs))
    (record,) = [r for r in custom(run) if rf.record_kind(r.inputs) == labels.RECORD_CLUSTER_IDENTITY]
    now = rf.read_identity(record.inputs)
    assert previous.per_pool_drivers is False and now.per_pool_drivers is True
    assert previous.operator_version == now.operator_version == "v26.7.0"
    spec = spec_from_config(config)
    assert spec.driver.previousVersion is not None
    # What ran is what the last deployment released its pools to; its held pool's pin (previousVersion) is config.
    assert previous.drivers_ran == frozenset({spec.driver.version})
    assert previous.cloud_pools == last[rf.CLOUD_POOLS]
    # Nothing of the last deployment is copied onto an object of the cluster: a second `pulumi up` with
    # no change must change nothing.
    assert record.inputs == next(r for r in custom(rendered["existing-prod"]) if r.name == record.name).inputs


def test_no_last_deployment_reads_as_empty():
    assert rf.read_previous_deployment({}) == rf.PreviousDeployment()
    assert not rf.read_previous_deployment(None).deployed
    odd = rf.read_previous_deployment({"operatorVersion": 3, "perPoolDrivers": "maybe", "pools": {"a": "x"}})
    assert odd == rf.PreviousDeployment()


# ---------------------------------------------------------------- type tokens


def test_the_type_tokens_are_what_the_program_registers(rendered):
    helm = run_program(edited("prod", "gpuOperator", lambda op: op.update(clusterPolicy="helm")), "prod")
    # Every type the program registers, but its own components.
    registered = {r.type for run in (*rendered.values(), helm) for r in run.resources
                  if not r.type.startswith("gpu-driver-upgrade:")}
    tokens = {rf.AKS_POOL, rf.EKS_NODE_GROUP, rf.CLUSTER_POLICY_PATCH, rf.NVIDIA_DRIVER, rf.HELM_RELEASE, rf.PDB,
              rf.CONFIG_MAP, rf.KUBERNETES_PROVIDER, rf.STACK_REFERENCE,
              *validation.RESOURCE_TYPES,  # the validation job's: the canary examples declare one
              *(t for t in guard.RESOURCE_TYPES if t not in guard.MONITORING_TYPES)}  # the guard's: prod declares one
    assert tokens <= registered  # no token names something the program does not register
    # The whole ClusterPolicy is what the pack sees from a stack that registers the CR itself.
    assert rf.CLUSTER_POLICY_CR in rf.DRIVER_TYPES and rf.CLUSTER_POLICY_CR not in registered


# ---------------------------------------------------------------- per-cloud rules


def test_nvidia_amis_are_the_ones_that_ship_a_driver():
    (ami_types,) = [get_args(a) for a in get_args(EksPool.model_fields["amiType"].annotation) if get_args(a)]
    assert {a for a in ami_types if rf.is_nvidia_ami(a)} == {"AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA"}
    assert rf.EKS_NVIDIA_AMI in ami_types and rf.EKS_BOTTLEROCKET_NVIDIA_AMI in ami_types
    assert not rf.is_nvidia_ami(None) and not rf.is_nvidia_ami(rf.EKS_CUSTOM_AMI)
    assert rf.image_owns_driver(rf.EKS_NODE_GROUP, {"amiType": "AL2023_x86_64_NVIDIA"})
    assert not rf.image_owns_driver(rf.EKS_NODE_GROUP, {})


def test_aks_installs_its_driver_unless_told_none():
    assert rf.aks_gpu_driver(operator_owns_driver=True) == "None"
    assert rf.aks_gpu_driver(operator_owns_driver=False) == "Install"
    for operator in (True, False):
        props = {"gpuProfile": {"driver": rf.aks_gpu_driver(operator)}}
        assert rf.image_owns_driver(rf.AKS_POOL, props) is not operator
    assert rf.image_owns_driver(rf.AKS_POOL, {})  # AKS's default installs the driver
    assert not rf.image_owns_driver(rf.PDB, {"gpuProfile": {"driver": "Install"}})


def test_the_charts_key_names_round_trip():
    policy = UpgradePolicy(podDeletion={"force": True, "timeoutSeconds": 0})
    helm = policy.as_helm_values()
    assert "podDeletion" not in helm and helm["gpuPodDeletion"] == {"force": True, "timeoutSeconds": 0,
                                                                     "deleteEmptyDir": False}
    assert rf.crd_upgrade_policy(helm) == policy.as_crd()
    assert rf.crd_upgrade_policy("fast") is None
    driver = {"enabled": True, "version": "580.173.02", "useNvidiaDriverCRD": True, "upgradePolicy": policy.as_crd()}
    values = rf.helm_driver_values(driver, deploy_default_cr=True)
    assert values["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": True} and "useNvidiaDriverCRD" not in values
    assert rf.helm_driver_values({"enabled": False}, deploy_default_cr=True) == {"enabled": False}


@pytest.mark.parametrize("stack", ["prod", "eks-prod", "existing-prod"])
def test_helm_values_read_back_as_the_cluster_policy_they_replace(stack):
    """The same operator settings, as a patched ClusterPolicy and as the chart's values, read the same."""
    patch, helm = (run_program(edited(stack, "gpuOperator", lambda op, m=mode: op.update(clusterPolicy=m)), stack)
                   for mode in ("patch", "helm"))
    (from_patch,) = [rf.read_operator_driver(r.type, r.inputs) for r in custom(patch) if r.type == rf.CLUSTER_POLICY_PATCH]
    (from_helm,) = [rf.read_operator_driver(r.type, r.inputs) for r in custom(helm) if r.type == rf.HELM_RELEASE]
    settings_of = lambda d: (d.enabled, d.version, d.precompiled, d.use_crd, d.upgrade_policy, d.operator_version)  # noqa: E731
    assert settings_of(from_patch) == settings_of(from_helm)


# ---------------------------------------------------------------- decoding what a hand edit left


def test_missing_or_malformed_facts_read_as_not_visible():
    assert rf.read_pool_labels({}) == rf.PoolFacts(None, None, None, False, None, None, None)
    odd = rf.read_pool_labels({labels.POOL_GPUS_PER_NODE: "eight", labels.POOL_NVSWITCH: "yes",
                               labels.SKIP_UPGRADE: "TRUE", labels.WAVE: "2"})
    assert (odd.gpus_per_node, odd.nvswitch, odd.held, odd.wave) == (None, None, False, 2)
    assert rf.read_node_selector({"metadata": {"annotations": {labels.ANNOTATION_NODE_SELECTOR: "{not json"}}}) == {}
    assert rf.read_stage("staging") is None and rf.read_stage("prod") is Stage.PROD
    model = rf.read_model({"metadata": {"annotations": {labels.ANNOTATION_REPLICAS: "x"}}}, "pdb")
    assert (model.name, model.replicas, model.pools, model.forward_compat) == ("pdb", None, (), False)
    assert rf.read_operator_driver(rf.HELM_RELEASE, {"chart": "other"}) is None
    assert rf.read_pool_tags({"tags": "not-a-map"}).deployed_with is None
    assert rf.stated_batch_selectors({"metadata": {"annotations": "odd"}}) == ()
