"""The pack reads what the engine really hands it.

Stack policies get every resource's *outputs* (what the provider, the cloud or the API server returned,
with defaults filled in: tests/policy/engine_outputs.py), resource policies the inputs; both arrive as a
protobuf Struct (every number a double) read back through pulumi_policy's own deserialisation into its
unknown-checking proxies (a map is a Mapping, not a dict; a list a Sequence, not a list). These tests run
the real ``policy.pack`` validators on exactly that, with real ``pulumi_policy`` argument objects.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import _DictProxy, _ListProxy

from policy import facts, pack
from policy.evaluate import enforcement, load_config, settings_entry
from policy.findings import Level
from policy.registry import REGISTRY
from preview.run import ProgramRun, run_program
from gpu_knowledge import labels
from engine_contracts import resource_facts as rf
from tests.conftest import EXAMPLE_STACKS, SHARED_CRDS, aks_image_owned, as_planned, eks_operator_owned, stack_config
from tests.conftest import change as change_config
from tests.policy import engine_outputs as eo
from tests.policy.attested import attested_prod
from tests.policy.engine_outputs import EngineResource, edit
from tests.policy.variants import VARIANTS

ADVICE = pack.ADVICE_POLICY
STACK_POLICIES = {p.id for p in REGISTRY.values() if p.stack_rule is not None}


@dataclass(frozen=True)
class Report:
    policy: str
    level: str
    message: str


def _options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], False, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def stack_reports(resources: list[EngineResource], stage: str | None) -> list[Report]:
    """Every stack policy of the pack, the advice policy included, as the engine runs them."""
    config = load_config(stage)
    policy_resources = [r.policy_resource() for r in resources]
    reports: list[Report] = []
    for built in pack.build_policies():
        if not isinstance(built, StackValidationPolicy):
            continue
        level = Level.ADVISORY if built.name == ADVICE else enforcement(REGISTRY[built.name], config)
        if level == Level.DISABLED:
            continue
        args = StackValidationArgs(policy_resources, settings_entry(built.name, config))  # as the engine hands it
        built.validate(args, lambda message, urn=None, name=built.name, lvl=level: reports.append(
            Report(name, lvl.value, message)))
    return reports


def resource_reports(resources: list[EngineResource], stage: str | None) -> list[Report]:
    """Every resource policy of the pack on each resource's inputs, as the engine runs them."""
    config = load_config(stage)
    reports: list[Report] = []
    for built in pack.build_policies():
        if not isinstance(built, ResourceValidationPolicy):
            continue
        level = enforcement(REGISTRY[built.name], config)
        if level == Level.DISABLED:
            continue
        for res in resources:
            args = ResourceValidationArgs(res.type, eo.wire(res.props), res.urn, res.name, _options(), None, {})
            built.validate(args, lambda message, urn=None, name=built.name, lvl=level: reports.append(
                Report(name, lvl.value, message)))
    return reports


@pytest.fixture(scope="module")
def runs(rendered, tmp_path_factory) -> dict[str, ProgramRun]:
    """The example stacks, the AKS prod stack with image-owned drivers (node-image generations) and the EKS
    prod stack with operator-owned drivers (node groups on custom Ubuntu AMIs from launch templates), and the
    existing-cluster prod stack with the attestation of its canary (tests/policy/attested.py)."""
    return {**rendered, "aks-image-owned": as_planned("prod", aks_image_owned()),
            "existing-prod-attested": attested_prod(tmp_path_factory.mktemp("attested") / "project"),
            "eks-operator-owned": as_planned("eks-prod", eks_operator_owned()),
            "aks-cluster-policy-mode": as_planned(
                "prod", change_config(stack_config("prod"), "gpuOperator", lambda op: op.update(
                    useNvidiaDriverCrd=False, unpinnedHoldReason="fixed-size pools, auto-repair off (CHG-1)")))}


def _stage(run: ProgramRun) -> str:
    return run.outputs["stage"]


# ---------------------------------------------------------------- the wire format itself


def test_the_wire_hands_proxies_and_doubles():
    props = eo.wire({"spec": {"minAvailable": 1, "items": [{"n": 2}, 3]}})
    assert isinstance(props, _DictProxy) and not isinstance(props, dict)
    assert isinstance(props["spec"]["items"], _ListProxy) and not isinstance(props["spec"]["items"], list)
    assert props["spec"]["minAvailable"] == 1.0 and isinstance(props["spec"]["minAvailable"], float)
    assert isinstance(props["spec"]["items"][1], float)


def test_engine_values_read_numbers_inside_lists_as_ints():
    # Integral doubles read back as ints at any depth, lists included (they arrive as _ListProxy objects).
    props = facts.EngineProps(eo.wire({
        "status": {"conditions": [{"observedGeneration": 3}]},
        "generations": [{"id": 1, "ratio": 0.5}, [2, 3]],
        "zones": ["1", "2"],
    }))
    condition = props["status"]["conditions"][0]
    assert condition["observedGeneration"] == 3 and type(condition["observedGeneration"]) is int
    first, pair = props["generations"]
    assert type(first["id"]) is int and first["ratio"] == 0.5
    assert list(pair) == [2, 3] and all(type(n) is int for n in pair)
    assert list(props["zones"]) == ["1", "2"]
    assert isinstance(props["generations"], list)  # rules may test lists as lists, as in `gpu-rollout plan`


# ---------------------------------------------------------------- the output shapes follow the real ones

needs_crds = pytest.mark.skipif(not SHARED_CRDS.is_dir(), reason="shared/reference/crds is not beside this checkout")


def _crd(plural: str) -> dict[str, Any]:
    document = yaml.safe_load(Path(SHARED_CRDS / f"nvidia.com_{plural}.yaml").read_text())
    (version,) = [v for v in document["spec"]["versions"] if v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def _crd_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, sub in (schema.get("properties") or {}).items():
        if "default" in sub and sub.get("type") != "object":
            out[key] = sub["default"]
        elif sub.get("type") == "object" and sub.get("properties"):
            nested = _crd_defaults(sub)
            if nested:
                out[key] = nested
    return out


def _unknown_keys(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys the CRD schema does not know (the API server would prune them)."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema:
            inner = schema.get("additionalProperties")
            return [u for k, v in value.items() for u in (_unknown_keys(v, inner, f"{path}.{k}") if isinstance(inner, dict) else [])]
        known = schema.get("properties") or {}
        return [f"{path}.{k}" for k in value if k not in known] + [
            u for k, v in value.items() if k in known for u in _unknown_keys(v, known[k], f"{path}.{k}")
        ]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [u for i, v in enumerate(value) for u in _unknown_keys(v, schema["items"], f"{path}[{i}]")]
    return []


@needs_crds
def test_nvidiadriver_defaults_are_the_crds():
    schema = _crd("nvidiadrivers")
    assert eo.NVIDIADRIVER_DEFAULTS == _crd_defaults(schema["properties"]["spec"])


@needs_crds
def test_output_shaped_operator_objects_fit_the_crds(runs):
    for plural, type_token, stack in (("nvidiadrivers", rf.NVIDIA_DRIVER, "prod"),
                                      ("clusterpolicies", rf.CLUSTER_POLICY_PATCH, "prod"),
                                      ("clusterpolicies", rf.CLUSTER_POLICY_PATCH, "aks-image-owned")):
        schema = _crd(plural)
        objects = [r.props for r in eo.stack_outputs(runs[stack]) if r.type == type_token]
        assert objects
        for obj in objects:
            body = {k: v for k, v in obj.items() if k != "metadata"}
            jsonschema.Draft7Validator(schema).validate(body)
            assert _unknown_keys(body, schema) == []


def test_output_shaped_pdbs_and_config_maps_validate_against_kubernetes_openapi(runs):
    for res in eo.stack_outputs(runs["existing-prod"]):
        if res.type in (rf.PDB, rf.CONFIG_MAP):
            kind = "PodDisruptionBudget" if res.type == rf.PDB else "ConfigMap"
            version = "policy/v1" if res.type == rf.PDB else "v1"
            kubernetes_validate.validate({**res.props, "apiVersion": version, "kind": kind}, "1.33.0", strict=True)


def test_node_group_outputs_carry_both_limits_as_the_bridge_stores_them(runs):
    groups = [r for r in eo.stack_outputs(runs["eks-prod"]) if r.type == rf.EKS_NODE_GROUP]
    assert groups
    for group in groups:
        update = group.props["updateConfig"]
        assert set(update) == {"maxUnavailable", "maxUnavailablePercentage", "updateStrategy"}
        assert sorted([update["maxUnavailable"], update["maxUnavailablePercentage"]])[0] == 0


# ---------------------------------------------------------------- no false violations

EXAMPLES = [*EXAMPLE_STACKS, "aks-image-owned", "eks-operator-owned", "existing-prod-attested"]


@pytest.mark.parametrize("stack", EXAMPLES)
def test_examples_have_no_mandatory_violation_on_engine_outputs(runs, stack):
    run = runs[stack]
    outputs = eo.stack_outputs(run)
    reports = stack_reports(outputs, _stage(run)) + resource_reports(eo.stack_inputs(run), _stage(run))
    assert [r for r in reports if r.level == "mandatory"] == []
    # Every custom resource and component the program registers is there, with its output shape; the
    # engine hands stack policies no StackReference (a read).
    assert {r.type for r in outputs} >= {r.type for r in run.resources} - {rf.STACK_REFERENCE}
    assert rf.STACK_REFERENCE not in {r.type for r in outputs}


def test_the_prod_gate_admits_an_attested_driver_on_engine_outputs(runs):
    run = runs["existing-prod-attested"]
    assert [r for r in stack_reports(eo.stack_outputs(run), "prod") if r.policy == "canary-attested"] == []


@pytest.mark.parametrize("stack", EXAMPLES)
def test_outputs_give_the_findings_the_inputs_give(runs, stack):
    # What the provider fills in never changes a finding on the examples: the stack policies (advice
    # included) report the same on the outputs as on the inputs `gpu-rollout plan` reads.
    run = runs[stack]
    on_outputs = sorted(stack_reports(eo.stack_outputs(run), _stage(run)), key=repr)
    on_inputs = sorted(stack_reports(eo.stack_inputs(run), _stage(run)), key=repr)
    assert on_outputs == on_inputs


# ---------------------------------------------------------------- every rule still finds its violation


def _updates(group: str, **update: Any) -> tuple[str, str | None, Callable[[dict], object]]:
    return rf.EKS_NODE_GROUP, group, lambda p: p["updateConfig"].update(update)


def _label(type_token: str, name: str | None, key: str, value: str, where: str) -> tuple[str, str | None, Callable[[dict], object]]:
    def change(props: dict) -> None:
        target = props
        for part in where.split("."):
            target = target[part]
        target[key] = value

    return type_token, name, change


def _pool_driver(name: str, **spec: Any) -> tuple[str, str, Callable[[dict], object]]:
    return rf.NVIDIA_DRIVER, name, lambda p: p["spec"].update(spec)


def _set(path: str, value: Any) -> Callable[[dict], object]:
    def change(props: dict) -> None:
        *parents, leaf = path.split(".")
        target = props
        for part in parents:
            target = target[part]
        target[leaf] = value

    return change


def _drop_change_ticket(props: dict) -> None:
    props.get("tags", {}).pop(labels.TAG_CHANGE_TICKET, None)
    props.get("tagsAll", {}).pop(labels.TAG_CHANGE_TICKET, None)
    (props.get("metadata", {}).get("annotations") or {}).pop(labels.ANNOTATION_CHANGE_TICKET, None)


# name -> (stack, [(type, resource name or None for all, change of its output props)], policy, message part)
# Each changes only output-shaped props: the bridge's 0 beside a set limit stays where EKS would leave it.
OUTPUT_VARIANTS: dict[str, tuple[str, list[tuple[str, str | None, Callable[[dict], object]]], str, str]] = {
    "canary-node-group-two-at-once": (
        "eks-canary", [_updates("gpu-canary-g2", maxUnavailable=2)],
        "canary-one-node-at-a-time", "maxUnavailable=2 takes 2",
    ),
    "canary-node-group-percentage": (
        "eks-canary", [_updates("gpu-canary-g2", maxUnavailable=0, maxUnavailablePercentage=100)],
        "canary-one-node-at-a-time", "maxUnavailablePercentage=100 takes 2",
    ),
    "capacity-block-group-two-at-once": (
        "eks-prod", [_updates("gpu-h100-g1", maxUnavailable=2)],
        "parallelism-within-spare-capacity", "updateConfig.maxUnavailable=2 lets 2 of 3 nodes update at once",
    ),
    "capacity-block-group-percentage": (
        "eks-prod", [_updates("gpu-h100-g1", maxUnavailable=0, maxUnavailablePercentage=100)],
        "parallelism-within-spare-capacity", "maxUnavailablePercentage=100 lets 3 of 3 nodes",
    ),
    "node-group-both-limits": (
        "eks-prod", [_updates("gpu-h100-g1", maxUnavailable=1, maxUnavailablePercentage=50)],
        "parallelism-within-spare-capacity", "not both",
    ),
    "node-group-v100-on-r595": (
        "eks-canary", [
            _label(rf.EKS_NODE_GROUP, None, labels.POOL_GPU_PRODUCT, "Tesla-V100-SXM2-16GB", "labels"),
            _label(rf.EKS_NODE_GROUP, "gpu-canary-g2", labels.POOL_IMAGE_DRIVER, "595.91.07", "labels"),
        ],
        "gpu-supported-by-driver", "595.91.07",
    ),
    "node-group-capacity-block-short": (
        "eks-prod", [(rf.EKS_NODE_GROUP, "gpu-h100-g1", _set("scalingConfig.desiredSize", 2))],
        "spare-capacity", "pool gpu-h100",
    ),
    "nvidiadriver-on-a-driver-the-operator-does-not-list": (
        "prod", [(rf.NVIDIA_DRIVER, "gpu-gput4", _set("spec.version", "590.48.01"))],
        "operator-supports-driver", "lists no R590 driver",
    ),
    "agent-pool-installs-its-driver": (
        "prod", [(rf.AKS_POOL, "gpuh100", _set("gpuProfile.driver", "Install"))],
        "single-driver-owner", "gpuProfile.driver 'Install'",
    ),
    "agent-pool-host-fabric-manager": (
        "prod", [_label(rf.AKS_POOL, "gpuh100", labels.POOL_FABRIC_MANAGER, "host", "nodeLabels")],
        "fabric-manager-matches", "must pin its version",
    ),
    # Issue 30: the agent pool as the engine reports it, on a size whose GPUs are not the declared ones.
    "agent-pool-on-another-size": (
        "prod", [(rf.AKS_POOL, "gpuh100", _set("vmSize", "Standard_NC40ads_H100_v5"))], "pool-hardware-matches-size",
        "vmSize Standard_NC40ads_H100_v5 carries 1 x NVIDIA-H100-NVL without NVSwitch",
    ),
    "node-group-on-another-type": (
        "eks-canary", [(rf.EKS_NODE_GROUP, "gpu-canary-a10g-g2", _set("instanceTypes", ["g5.12xlarge"]))],
        "pool-hardware-matches-size", "gpusPerNode 1 is not its 4",
    ),
    "agent-pool-one-node-short": (
        "prod", [(rf.AKS_POOL, "gpua100", _set("count", 7))], "spare-capacity", "pool gpua100",
    ),
    "agent-pool-without-ticket": ("prod", [(None, None, _drop_change_ticket)], "change-ticket", "change ticket"),
    "cluster-policy-rolls-every-pool-unlimited": (
        "prod", [(rf.CLUSTER_POLICY_PATCH, "cluster-policy", lambda p: p["spec"]["driver"].update(
            useNvidiaDriverCRD=False, upgradePolicy={**p["spec"]["driver"]["upgradePolicy"], "maxParallelUpgrades": 0}))],
        "parallelism-within-spare-capacity", "cluster-policy: maxParallelUpgrades=0",
    ),
    "cluster-policy-waits-for-no-batch-job": (
        "prod", [(rf.CLUSTER_POLICY_PATCH, "cluster-policy",
                  _set("spec.driver.upgradePolicy.waitForCompletion.podSelector", ""))],
        "wait-for-batch-jobs", "cluster-policy: waitForCompletion.podSelector ''",
    ),
    "helm-release-with-driver-over-nvidia-amis": (
        "eks-prod", [(rf.HELM_RELEASE, "gpu-operator", lambda p: p["values"]["driver"].update(
            enabled=True, version="580.173.02"))],
        "single-driver-owner", "and from the operator (gpu-operator)",
    ),
    "nvidiadriver-canary-two-at-once": (
        "canary", [_pool_driver("gpu-gpucanary", upgradePolicy={"maxParallelUpgrades": 2, "autoUpgrade": True})],
        "canary-one-node-at-a-time", "maxParallelUpgrades must be 1, not 2",
    ),
    "nvidiadriver-selectors-overlap": (
        "prod", [_pool_driver("gpu-gpua100", nodeSelector={labels.POOL: "gpuh100"})],
        "nvidiadriver-selectors-disjoint", "can select the same node",
    ),
    "nvidiadriver-too-old-for-cuda": (
        "canary", [_pool_driver("gpu-gpucanary", version="535.288.01")], "cuda-driver-compatible", "535.288.01",
    ),
    "pdb-cuda-too-new": (
        "canary", [_label(rf.PDB, "inference-llm-chat-canary-pdb", labels.ANNOTATION_CUDA, "13.1",
                          "metadata.annotations")],
        "cuda-driver-compatible", "13.1",
    ),
    "pdb-more-replicas": (
        "prod", [_label(rf.PDB, "inference-embed-triton-pdb", labels.ANNOTATION_REPLICAS, "12",
                        "metadata.annotations")],
        "spare-capacity", "spare GPUs",
    ),
    "agent-pool-on-azure-linux": (
        "prod", [(rf.AKS_POOL, "gpua100", _set("osSKU", "AzureLinux"))], "operator-supports-os",
        "no driver container for Azure Linux",
    ),
    "custom-ami-group-on-amazon-linux": (
        "eks-operator-owned", [_label(rf.EKS_NODE_GROUP, None, labels.POOL_OS, "amazonlinux2023", "labels")],
        "operator-supports-os", "no driver container for Amazon Linux 2023",
    ),
    # The promotion record as the API server returns it, its attestation changed after verify sealed it.
    "promotion-record-with-a-changed-attestation": (
        "existing-prod-attested", [(rf.CONFIG_MAP, "gpu-driver-upgrade-promotion", lambda p: p["data"].update(
            attestations=p["data"]["attestations"].replace("l40s-canary", "l40s-serving")))],
        "canary-attested", "attestations/existing-canary/580.173.02.json: digest mismatch",
    ),
    "pool-record-on-amazon-linux": (
        "existing-prod", [_label(rf.CONFIG_MAP, "gpu-driver-upgrade-pool-l40s-serving", labels.POOL_OS,
                                 "amazonlinux2023", "metadata.labels")],
        "operator-supports-os", "no driver container for Amazon Linux 2023",
    ),
    # The last deployment (the outputs its component registers) ran v26.3.3 in ClusterPolicy mode.
    "identity-per-pool-mode-with-operator-upgrade": (
        "eks-prod", [
            (rf.CONFIG_MAP, "gpu-driver-upgrade-prod", lambda p: p["data"].update(perPoolDrivers="true")),
            (rf.PREVIOUS_DEPLOYMENT_COMPONENT, None, lambda p: p["outputs"].update(
                {rf.OPERATOR_VERSION: "v26.3.3", rf.PER_POOL_DRIVERS: "false"})),
        ],
        "per-pool-mode-own-change", "switched on in the same change",
    ),
    # One ClusterPolicy driver for every node, held pools accepted by a stated reason: without it (issue 20
    # point 5: a repaired or replaced node installs the new driver, whatever the pool's size) it is enforced.
    "held-pool-without-a-reason": (
        "aks-cluster-policy-mode", [(rf.CONFIG_MAP, "gpu-driver-upgrade-prod", lambda p: p["data"].pop("unpinnedHoldReason"))],
        "held-pool-pinned", "pool gpuh100 is held",
    ),
    # A program newer than the pack enforced on it (the protected base's): facts of a version it does not read.
    "identity-record-with-newer-facts": (
        "prod", [(rf.CONFIG_MAP, "gpu-driver-upgrade-prod", lambda p: p["data"].update(
            factsVersion=str(rf.READABLE_FACTS_VERSION + 1)))],
        "facts-readable", f"the program wrote resource facts version {rf.READABLE_FACTS_VERSION + 1} (cluster-identity "
        f"record gpu-driver-upgrade-prod); this pack reads facts up to version {rf.READABLE_FACTS_VERSION}",
    ),
    "pool-record-one-node-short": (
        "existing-prod", [(rf.CONFIG_MAP, "gpu-driver-upgrade-pool-l40s-serving", _set("data.nodeCount", "1"))],
        "spare-capacity", "pool l40s-serving",
    ),
    # Issue 23: the rollout's discipline, read from the identity record, the pool labels and the last deployment.
    "agent-pool-of-wave-3-released-before-wave-2": (
        "prod", [(rf.AKS_POOL, "gpuh100", lambda p: p["nodeLabels"].pop(labels.SKIP_UPGRADE))],
        "waves-in-order", "wave 3 (gpuh100) is released while an earlier wave is held",
    ),
    "generation-retired-an-hour-after-the-newest-came": (
        "eks-prod", [(rf.PREVIOUS_DEPLOYMENT_COMPONENT, None, lambda p: p["outputs"].update(_l40s_ran_g0_to_g2()))],
        "old-generation-kept", "pool gpu-l40s: g0 retired after g2 ran 1.0 h",
    ),
    "identity-record-without-the-validation-job": (
        "prod", [(rf.CONFIG_MAP, "gpu-driver-upgrade-prod", lambda p: p["data"].update(validationJob="false"))],
        "validation-job-required", "prod declares no validation job",
    ),
    "promotion-record-asking-half-a-day": (
        "prod", [(rf.CONFIG_MAP, "gpu-driver-upgrade-promotion", lambda p: p["data"].update(minSoakHours="12"))],
        "soak-floor", "promotion.minSoakHours is 12",
    ),
    # Issue 35: prod's in-cluster guard, as the engine hands its Deployment over.
    "guard-deployment-running-a-tag": (
        "prod", [(rf.DEPLOYMENT, "gpu-rollout-guard", lambda p: p["spec"]["template"]["spec"]["containers"][0].update(
            image="ghcr.io/example-org/gpu-driver-upgrade:v1.4.0"))],
        "guard-image-digest", "guard image 'ghcr.io/example-org/gpu-driver-upgrade:v1.4.0' carries no digest",
    ),
    "identity-record-without-a-window": (
        "prod", [(rf.CONFIG_MAP, "gpu-driver-upgrade-prod", lambda p: p["data"].pop("maintenanceWindow"))],
        "maintenance-window", "prod declares no maintenance window",
    ),
}


def _l40s_ran_g0_to_g2() -> dict[str, Any]:
    """A last deployment that ran generations 0, 1 and 2 of gpu-l40s, the newest first deployed an hour ago."""
    an_hour_ago = rf.timestamp(datetime.now(UTC) - timedelta(hours=1))
    return {
        rf.OPERATOR_VERSION: "v26.7.0",
        rf.POOLS: {"gpu-l40s": {"role": "serving", "wave": 2, "held": False,
                                "generations": [{"id": g, "retired": False} for g in (0, 1, 2)]}},
        rf.TIMELINE: {"generationsDeployed": {"gpu-l40s": {"2": an_hour_ago}}},
    }


def _apply(run: ProgramRun, changes) -> list[EngineResource]:
    resources = eo.stack_outputs(run)
    for type_token, name, change in changes:
        if type_token is None:
            resources = [EngineResource(r.type, r.name, r.urn, _changed(r.props, change)) for r in resources]
        else:
            resources = edit(resources, type_token, name, change)
    return resources


def _changed(props: dict, change) -> dict:
    props = copy.deepcopy(props)
    change(props)
    return props


@pytest.mark.parametrize("name", sorted(OUTPUT_VARIANTS))
def test_bad_output_variant_is_found(runs, name):
    stack, changes, policy_id, fragment = OUTPUT_VARIANTS[name]
    run = runs[stack]
    assert [r for r in stack_reports(eo.stack_outputs(run), _stage(run)) if r.policy == policy_id
            and r.level != "advisory"] == []
    found = [r for r in stack_reports(_apply(run, changes), _stage(run)) if r.policy == policy_id]
    assert any(fragment in r.message for r in found), found
    assert any(r.level == REGISTRY[policy_id].level.value for r in found if fragment in r.message)


def test_every_stack_policy_and_resource_type_has_an_output_variant():
    policies = {policy for _, _, policy, _ in OUTPUT_VARIANTS.values()}
    assert policies == STACK_POLICIES, f"stack policies without an output variant: {STACK_POLICIES - policies}"
    types = {t for _, changes, _, _ in OUTPUT_VARIANTS.values() for t, _, _ in changes if t}
    assert types >= {rf.EKS_NODE_GROUP, rf.AKS_POOL, rf.CLUSTER_POLICY_PATCH, rf.HELM_RELEASE,
                     rf.NVIDIA_DRIVER, rf.PDB, rf.CONFIG_MAP}


# ---------------------------------------------------------------- resource policies keep reading inputs

RESOURCE_VARIANTS = sorted(p for p in VARIANTS if REGISTRY[p].resource_rule is not None)


@pytest.mark.parametrize("policy_id", RESOURCE_VARIANTS)
def test_resource_policies_find_their_variant_on_engine_inputs(policy_id):
    stack, build, level = VARIANTS[policy_id]
    run = run_program(build(), stack)
    found = [r for r in resource_reports(eo.stack_inputs(run), _stage(run)) + stack_reports(
        eo.stack_inputs(run), _stage(run)) if r.policy in (policy_id, ADVICE)]
    assert any(r.policy == policy_id and r.level == level for r in found), found
