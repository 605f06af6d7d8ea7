"""FleetSpec loading: the example stacks load; every kind of bad input fails naming its key path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetspec.load import SpecError, SpecProblem, config_strings, load_stack_file, read_stack_file, spec_from_config
from fleetspec.model import ClusterPolicyMode, DriverOwner, Stage
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR, aks_image_owned, change, edited, eks_operator_owned, stack_config


def problems_of(config: dict[str, str]) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec_from_config(config)
    return [f"{p.path}: {p.message}" for p in info.value.problems]  # the item names: test_item_names


def assert_problem(config: dict[str, str], path: str, *fragments: str) -> None:
    found = problems_of(config)
    matching = [p for p in found if p.startswith(f"{path}: ")]
    assert matching, f"no problem at {path}; got {found}"
    for fragment in fragments:
        assert any(fragment in p for p in matching), f"{fragment!r} not in {matching}"


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_example_stacks_load(stack: str) -> None:
    spec = load_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml")
    assert spec.stage == (Stage.CANARY if "canary" in stack else Stage.PROD)
    assert spec.driver.version == "580.173.02"
    assert spec.driver.owner == (DriverOwner.IMAGE if stack.startswith("eks") else DriverOwner.OPERATOR)


def test_prod_stack_spells_upgrade_policy_as_the_crd() -> None:
    spec = load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")
    crd = spec.gpuOperator.upgradePolicy.as_crd()
    assert set(crd) == {"autoUpgrade", "maxParallelUpgrades", "maxUnavailable", "waitForCompletion", "podDeletion", "drain"}
    assert crd["podDeletion"] == {"force": False, "timeoutSeconds": 900, "deleteEmptyDir": False}
    helm = spec.gpuOperator.upgradePolicy.as_helm_values()
    assert "gpuPodDeletion" in helm and "podDeletion" not in helm


def test_held_pools_pin_previous_driver() -> None:
    spec = load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")
    assert {p.name: spec.pool_target(p).driver for p in spec.nodePools} == {
        "gput4": "580.173.02",
        "gpua100": "570.195.03",
        "gpuh100": "570.195.03",
    }
    assert [p.name for p in spec.nodePools if spec.pool_held(p)] == ["gpua100", "gpuh100"]


# ---------------------------------------------------------------- driver versions


@pytest.mark.parametrize("bad", ["latest", "stable", "LATEST", "580.x", "v580.173.02", "580.173.02.1", "58"])
def test_driver_version_must_be_an_exact_release(bad: str) -> None:
    config = edited("prod", "driver", lambda d: d.update(version=bad))
    assert_problem(config, "gpu-driver-upgrade:driver.version", bad)


def test_driver_branch_only_is_refused_without_precompiled() -> None:
    config = edited("prod", "driver", lambda d: d.update(version="580"))
    assert_problem(config, "gpu-driver-upgrade:driver.version", "branch", "usePrecompiled")


def test_driver_branch_only_is_accepted_with_precompiled() -> None:
    config = edited("prod", "driver", lambda d: d.update(version="580", previousVersion="570"))
    op = json.loads(config["gpu-driver-upgrade:gpuOperator"])
    op["usePrecompiled"] = True
    config["gpu-driver-upgrade:gpuOperator"] = json.dumps(op)
    spec = spec_from_config(config)
    assert spec.driver.version == "580"
    assert spec.gpuOperator.usePrecompiled is True


@pytest.mark.parametrize("number", [580.105, 570.26, 580])
def test_unquoted_version_numbers_are_refused_not_coerced(number: float) -> None:
    config = edited("prod", "driver", lambda d: d.update(version=number))
    assert_problem(config, "gpu-driver-upgrade:driver.version", "quoted string", "as a number")


def test_unquoted_cuda_version_from_yaml_is_refused(tmp_path: Path) -> None:
    text = (PROJECT_DIR / "Pulumi.prod.yaml").read_text().replace('cudaVersion: "12.6"', "cudaVersion: 12.10")
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_stack_file(path)
    message = str(info.value)
    # YAML read 12.10 as 12.1: the message must not pretend it was 12.10 or accept 12.1.
    assert "gpu-driver-upgrade:models[3].cudaVersion" in message
    assert "12.1" in message and "quoted" in message


def test_chart_version_must_be_exact() -> None:
    config = edited("prod", "gpuOperator", lambda o: o.update(chartVersion="latest"))
    assert_problem(config, "gpu-driver-upgrade:gpuOperator.chartVersion", "moving target")


# ---------------------------------------------------------------- keys and structure


def test_unknown_top_level_key() -> None:
    config = stack_config("prod")
    config["gpu-driver-upgrade:nodepools"] = "[]"
    assert_problem(config, "gpu-driver-upgrade:nodepools", "unknown key")


def test_unknown_nested_key() -> None:
    config = edited("prod", "gpuOperator", lambda o: o["upgradePolicy"].update(gpuPodDeletion={"force": False}))
    assert_problem(config, "gpu-driver-upgrade:gpuOperator.upgradePolicy.gpuPodDeletion", "unknown key")


def test_other_namespaces_are_not_ours() -> None:
    config = stack_config("prod")
    config["azure-native:location"] = "westeurope"
    config["kubernetes:context"] = "aks-inference"
    assert spec_from_config(config).stage == Stage.PROD


def test_missing_required_key() -> None:
    config = stack_config("prod")
    del config["gpu-driver-upgrade:driver"]
    assert_problem(config, "gpu-driver-upgrade:driver", "required")


def test_every_problem_is_reported_at_once() -> None:
    config = edited("prod", "driver", lambda d: d.update(version="latest"))
    config["gpu-driver-upgrade:stage"] = "staging"
    found = problems_of(config)
    assert any(p.startswith("gpu-driver-upgrade:stage:") for p in found)
    assert any(p.startswith("gpu-driver-upgrade:driver.version:") for p in found)


def test_invalid_json_names_the_key() -> None:
    config = stack_config("prod")
    config["gpu-driver-upgrade:models"] = "[{"
    assert_problem(config, "gpu-driver-upgrade:models", "not valid JSON")


# ---------------------------------------------------------------- pools


def test_duplicate_pool_names() -> None:
    config = edited("prod", "nodePools", lambda pools: pools.append(dict(pools[0])))
    assert_problem(config, "gpu-driver-upgrade:nodePools[3].name", "duplicate pool name 'gput4'")


@pytest.mark.parametrize("bad", ["GPUA100", "gpu-a100", "gpuverylongname", "1gpu", "gpu_a100"])
def test_aks_pool_names_follow_aks_rules(bad: str) -> None:
    config = edited("prod", "nodePools", lambda pools: pools[1].update(name=bad))
    models = json.loads(config["gpu-driver-upgrade:models"])
    for model in models:
        model["nodePools"] = [bad if p == "gpua100" else p for p in model["nodePools"]]
    config["gpu-driver-upgrade:models"] = json.dumps(models)
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].name", "AKS", "12 characters")


def test_eks_generation_suffix_counts_toward_name_rules() -> None:
    # 61 characters are a valid node group name; with the generation suffix "-g4" they are not.
    long_name = "gpu-a10g-" + "x" * 52
    models = lambda ms: [m.update(nodePools=[long_name if p == "gpu-a10g" else p for p in m["nodePools"]]) for m in ms]
    config = edited("eks-prod", "nodePools", lambda pools: pools[0].update(name=long_name))
    config = change(config, "models", models)
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].name", "EKS node group name", long_name + "-g4")


def test_aks_generation_suffix_counts_toward_the_12_characters() -> None:
    config = aks_image_owned()
    spec_from_config(config)  # "gpuh100" + "g2" fits
    config = change(config, "nodePools", lambda pools: pools[0].update(name="gpuh100abcd"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].name", "AKS", "gpuh100abcdg1")


@pytest.mark.parametrize("field", ["nodeCount", "gpusPerNode"])
@pytest.mark.parametrize("value", [0, -1])
def test_pool_counts_must_be_positive(field: str, value: int) -> None:
    config = edited("prod", "nodePools", lambda pools: pools[0].update({field: value}))
    assert_problem(config, f"gpu-driver-upgrade:nodePools[0].{field}", "greater than 0")


def test_aks_pool_needs_its_cloud_block() -> None:
    config = edited("prod", "nodePools", lambda pools: pools[2].pop("aks"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].aks", "every pool needs its 'aks' block")


def test_eks_block_on_aks_cluster_is_refused() -> None:
    eks = {"instanceTypes": ["p5.48xlarge"]}
    config = edited("prod", "nodePools", lambda pools: pools[2].update(eks=eks))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].eks", "'eks' block on a pool of a 'aks' cluster")


def test_cluster_needs_fields_of_its_cloud() -> None:
    config = edited("eks-prod", "cluster", lambda c: c.pop("eks"))
    assert_problem(config, "gpu-driver-upgrade:cluster.eks", "cluster.eks must be set")
    config = edited("eks-prod", "cluster", lambda c: c["eks"].pop("nodeRoleArn"))
    assert_problem(config, "gpu-driver-upgrade:cluster.eks.nodeRoleArn", "required")


def test_image_owned_pools_need_generations() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[0].pop("generations"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].generations", "image-owned pools move by generations")


def test_newest_generation_cannot_be_retired() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[1]["generations"][1].update(retired=True))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].generations", "newest generation g2")


def test_eks_generation_needs_release_version() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[1]["generations"][0].pop("releaseVersion"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].generations[0].releaseVersion", "required")


def test_generations_are_refused_on_operator_owned_pools() -> None:
    gens = [{"id": 1, "driverVersion": "580.173.02", "nodeImageVersion": "202511.07.0"}]
    config = edited("prod", "nodePools", lambda pools: pools[0].update(generations=gens))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].generations", "image-owned")


def test_canary_stage_needs_a_canary_pool() -> None:
    config = edited("canary", "nodePools", lambda pools: [pool.update(role="serving") for pool in pools])
    assert_problem(config, "gpu-driver-upgrade:nodePools", "role: canary")


# ---------------------------------------------------------------- models


def test_model_naming_an_unknown_pool() -> None:
    config = edited("prod", "models", lambda models: models[1].update(nodePools=["gpua10"]))
    assert_problem(config, "gpu-driver-upgrade:models[1].nodePools[0]", "'gpua10'", "not in nodePools")


@pytest.mark.parametrize("field", ["replicas", "gpusPerReplica"])
@pytest.mark.parametrize("value", [0, -2])
def test_model_counts_must_be_positive(field: str, value: int) -> None:
    config = edited("prod", "models", lambda models: models[0].update({field: value}))
    assert_problem(config, f"gpu-driver-upgrade:models[0].{field}", "greater than 0")


@pytest.mark.parametrize(
    ("bad", "reason"),
    [("half", "an integer or a percentage"), ("150%", "a percentage from 0% to 100%"), (1.5, "an integer or a percentage"),
     (-1, "must not be negative"), ("", "an integer or a percentage"), (True, "an integer or a percentage"),
     ("-10%", "an integer or a percentage")],
)
def test_min_available_is_an_int_or_a_percentage(bad: object, reason: str) -> None:
    config = edited("prod", "models", lambda models: models[0].update(minAvailable=bad))
    assert_problem(config, "gpu-driver-upgrade:models[0].minAvailable", reason, repr(bad) if reason != "must not be negative" else "-1")


@pytest.mark.parametrize("zero", [0, "0%"])
def test_min_available_of_zero_protects_nothing(zero: object) -> None:
    config = edited("prod", "models", lambda models: models[0].update(minAvailable=zero))
    assert_problem(config, "gpu-driver-upgrade:models[0].minAvailable", "protects nothing")


def test_min_available_equal_to_replicas_loads_for_the_policy_to_judge() -> None:
    # Valid config, unsafe rollout: the pdb-allows-drain policy reports it with the PDB in view.
    config = edited("prod", "models", lambda models: models[0].update(minAvailable=3))
    assert spec_from_config(config).models[0].minAvailable == 3


def test_model_image_must_be_pinned() -> None:
    config = edited("prod", "models", lambda models: models[0].update(image="vllm/vllm-openai:latest"))
    assert_problem(config, "gpu-driver-upgrade:models[0].image", "explicit tag")


def test_model_labels_must_be_valid() -> None:
    config = edited("prod", "models", lambda models: models[0].update(matchLabels={"app name": "x"}))
    assert_problem(config, "gpu-driver-upgrade:models[0].matchLabels", "not a valid label key")


# ---------------------------------------------------------------- stack files


def test_stack_file_conversion_matches_the_pulumi_cli() -> None:
    # The Pulumi CLI hands a program structured config as Go's encoding/json writes it: compact, map keys
    # sorted (json.Marshal of the map); scalars as their YAML text. Written out here, not produced by json.dumps.
    strings = config_strings(
        {"config": {"p:s": "canary", "p:n": 3, "p:b": True, "p:o": {"z": [1, "x"], "a": {"y": 2, "b": None}},
                    "p:x": {"secure": "AAAB"}}}
    )
    assert strings == {"p:s": "canary", "p:n": "3", "p:b": "true", "p:o": '{"a":{"b":null,"y":2},"z":[1,"x"]}'}


def test_unreadable_stack_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is unreadable: No such file"):
        read_stack_file(tmp_path / "Pulumi.nope.yaml")
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        read_stack_file(bad)


def test_cluster_policy_mode_of_examples() -> None:
    modes = {s: load_stack_file(PROJECT_DIR / f"Pulumi.{s}.yaml").gpuOperator.clusterPolicy for s in EXAMPLE_STACKS}
    assert modes == {
        "canary": ClusterPolicyMode.EXTERNAL,
        "prod": ClusterPolicyMode.PATCH,
        "eks-canary": ClusterPolicyMode.EXTERNAL,
        "eks-prod": ClusterPolicyMode.HELM,
        "existing-canary": ClusterPolicyMode.EXTERNAL,
        "existing-prod": ClusterPolicyMode.PATCH,
    }


# ---------------------------------------------------------------- review findings: real-cloud constraints


@pytest.mark.parametrize("bad", ["gput4x\n", "gpu\nt4"])
def test_names_with_newlines_are_refused(bad: str) -> None:
    config = edited("prod", "nodePools", lambda pools: pools[0].update(name=bad))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].name", "AKS")


@pytest.mark.parametrize("bad", ["25%\n", "1\n"])
def test_min_available_with_a_newline_is_refused(bad: str) -> None:
    config = edited("prod", "models", lambda models: models[0].update(minAvailable=bad))
    assert_problem(config, "gpu-driver-upgrade:models[0].minAvailable", "an integer or a percentage", repr(bad))


def test_capacity_block_needs_a_launch_template() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[2]["eks"].pop("launchTemplate"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].eks.launchTemplate", "CAPACITY_BLOCK")


def test_capacity_block_refuses_instance_types_its_launch_template_sets() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[2]["eks"].update(instanceTypes=["p5.48xlarge"]))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].eks.instanceTypes", "launch template", "remove instanceTypes")


def test_disk_size_is_refused_beside_a_launch_template() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[2]["eks"].update(diskSize=500))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].eks.diskSize", "block device mappings")


def test_instance_types_are_required_without_a_launch_template() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[0]["eks"].pop("instanceTypes"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.instanceTypes", "required without a launch template")


def test_launch_template_version_is_pinned() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[2]["eks"]["launchTemplate"].update(version="$Latest"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].eks.launchTemplate.version", "pattern")


def test_operator_owned_eks_pools_run_a_custom_ubuntu_ami() -> None:
    spec = spec_from_config(eks_operator_owned())
    assert {p.eks.launchTemplate.os for p in spec.nodePools if p.eks and p.eks.launchTemplate} == {"ubuntu22.04"}


@pytest.mark.parametrize(
    ("ami", "fragment"),
    [
        ("AL2023_x86_64_STANDARD", "no driver container for Amazon Linux 2023"),
        ("BOTTLEROCKET_x86_64", "no driver container for Bottlerocket"),
        ("AL2023_x86_64_NVIDIA", "carries its own NVIDIA driver"),
    ],
)
def test_operator_owned_eks_pools_refuse_eks_optimized_amis(ami: str, fragment: str) -> None:
    config = change(eks_operator_owned(), "nodePools", lambda pools: pools[0]["eks"].update(amiType=ami))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.amiType", fragment, "custom Ubuntu EKS AMI")


def test_operator_owned_eks_pools_need_a_launch_template_with_its_os() -> None:
    config = change(eks_operator_owned(), "nodePools", lambda pools: pools[0]["eks"].pop("launchTemplate"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.launchTemplate", "custom Ubuntu EKS AMI")
    config = change(eks_operator_owned(), "nodePools", lambda pools: pools[0]["eks"]["launchTemplate"].pop("os"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.launchTemplate.os", "required")


def test_custom_ami_node_groups_take_no_release_version() -> None:
    config = change(eks_operator_owned(), "nodePools", lambda p: p[0]["eks"].update(releaseVersion="1.33.5-20251120"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.releaseVersion", "custom AMI")


@pytest.mark.parametrize(("chart", "os_id", "fragment"), [
    ("v26.7.0", "ubuntu20.04", "not ubuntu20.04"),
    ("v25.10.1", "ubuntu26.04", "not ubuntu26.04"),
    ("v26.7.0", "bottlerocket", "no driver container for Bottlerocket"),
])
def test_operator_owned_pools_only_on_an_os_the_operator_supports(chart: str, os_id: str, fragment: str) -> None:
    config = change(eks_operator_owned(), "gpuOperator", lambda o: o.update(chartVersion=chart))
    config = change(config, "nodePools", lambda pools: pools[1]["eks"]["launchTemplate"].update(os=os_id))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].eks.launchTemplate.os", "driver.owner is operator", fragment)


@pytest.mark.parametrize("sku", ["AzureLinux", "AzureLinux3"])
def test_operator_owned_aks_pools_refuse_azure_linux(sku: str) -> None:
    config = edited("prod", "nodePools", lambda pools: pools[0]["aks"].update(osSku=sku))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].aks.osSku", "no driver container for Azure Linux")


def test_image_owned_aks_pools_may_run_azure_linux() -> None:
    config = change(aks_image_owned(), "nodePools", lambda pools: pools[0]["aks"].update(osSku="AzureLinux3"))
    assert spec_from_config(config).nodePools[0].aks.osSku == "AzureLinux3"


def test_existing_pool_declaring_an_unsupported_os_is_refused() -> None:
    config = edited("existing-prod", "nodePools", lambda pools: pools[0]["existing"].update(os="amazonlinux2023"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].existing.os", "no driver container for Amazon Linux 2023")


def test_image_owned_pool_on_a_plain_ami_has_no_driver_at_all() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[0]["eks"].update(amiType="AL2023_x86_64_STANDARD"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.amiType", "no driver would be installed")


def test_precompiled_drivers_are_pinned_by_branch() -> None:
    config = edited("prod", "gpuOperator", lambda o: o.update(usePrecompiled=True))
    assert_problem(config, "gpu-driver-upgrade:driver.version", "tagged by branch", '"580"')


def test_generation_driver_must_be_an_exact_release() -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[1]["generations"][0].update(driverVersion="570"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].generations[0].driverVersion", "exact release")


def test_fabric_manager_version_must_be_an_exact_release() -> None:
    config = edited("prod", "nodePools", lambda pools: pools[2].update(fabricManager="host", fabricManagerVersion="570"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].fabricManagerVersion", "give a release")


def test_held_pools_need_a_previous_version() -> None:
    config = edited("prod", "driver", lambda d: d.pop("previousVersion"))
    assert_problem(config, "gpu-driver-upgrade:driver.previousVersion", "gpua100, gpuh100")


def test_an_unpinned_hold_reason_is_refused_where_held_pools_are_pinned() -> None:
    # prod runs per-pool NVIDIADrivers: its held pools are pinned, so there is nothing to accept.
    config = edited("prod", "gpuOperator", lambda op: op.update(unpinnedHoldReason="fixed-size pools"))
    assert_problem(config, "gpu-driver-upgrade:gpuOperator.unpinnedHoldReason", "useNvidiaDriverCrd: false", "remove it")
    config = edited("prod", "gpuOperator", lambda op: op.update(useNvidiaDriverCrd=False, unpinnedHoldReason=""))
    assert_problem(config, "gpu-driver-upgrade:gpuOperator.unpinnedHoldReason", "at least 1 character")
    accepted = edited("prod", "gpuOperator", lambda op: op.update(useNvidiaDriverCrd=False, unpinnedHoldReason="fixed-size pools"))
    assert spec_from_config(accepted).gpuOperator.unpinnedHoldReason == "fixed-size pools"


def test_held_image_pool_cannot_already_run_the_target() -> None:
    def new_generation(pools: list[dict]) -> None:
        pools[2]["generations"].append({"id": 2, "driverVersion": "580.173.02", "releaseVersion": "1.33.5-20251120"})

    config = edited("eks-prod", "nodePools", new_generation)
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].generations", "is held", "580.173.02")


@pytest.mark.parametrize("surge", ["0", 0, "0%"])
def test_aks_surge_of_zero_is_refused(surge: object) -> None:
    config = edited("prod", "nodePools", lambda pools: pools[0]["aks"].update(maxSurge=surge))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].aks.maxSurge", "at least 1")


def test_pools_whose_kubernetes_names_collide() -> None:
    def twin(pools: list[dict]) -> None:
        pools.append({**pools[1], "name": "gpu_l40s"})

    config = edited("eks-prod", "nodePools", twin)
    assert_problem(config, "gpu-driver-upgrade:nodePools[3].name", "'gpu-l40s' and 'gpu_l40s'")


def test_models_whose_budget_names_collide() -> None:
    def twins(models: list[dict]) -> None:
        models.append({**models[0], "namespace": "inference-llm", "name": "chat"})
        models.append({**models[0], "namespace": "inference", "name": "llm-chat"})

    config = edited("prod", "models", twins)
    found = problems_of(config)
    assert any("collide" in p for p in found), found


def test_the_same_model_twice_is_refused() -> None:
    # Found by the resource-facts round trip (tests/engine_contracts/test_resource_facts.py): two PDBs of one name.
    config = edited("prod", "models", lambda models: models.append(dict(models[0])))
    assert_problem(config, "gpu-driver-upgrade:models[4].name", "duplicate model 'inference/llm-chat'")


def test_yaml_dates_stay_strings(tmp_path: Path) -> None:
    text = (PROJECT_DIR / "Pulumi.prod.yaml").read_text().replace("changeTicket: CHG-20261209-0077", "changeTicket: 2026-12-09")
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text)
    assert load_stack_file(path).changeTicket == "2026-12-09"


def test_a_scalar_that_looks_like_json_is_a_string() -> None:
    config = stack_config("prod")
    config["gpu-driver-upgrade:changeTicket"] = "[CHG-1] window"
    assert spec_from_config(config).changeTicket == "[CHG-1] window"


@pytest.mark.parametrize("value", [0, 101])
def test_eks_max_unavailable_is_within_what_eks_accepts(value: int) -> None:
    config = edited("eks-prod", "nodePools", lambda pools: pools[0]["eks"].update(maxUnavailable=value))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].eks.maxUnavailable", "")


# ---------------------------------------------------------------- existing clusters


def test_existing_cluster_needs_its_context() -> None:
    config = edited("existing-prod", "cluster", lambda c: c["existing"].pop("context"))
    assert_problem(config, "gpu-driver-upgrade:cluster.existing.context", "required key is missing")


def test_existing_cluster_needs_its_existing_block() -> None:
    config = edited("existing-prod", "cluster", lambda c: c.pop("existing"))
    assert_problem(config, "gpu-driver-upgrade:cluster.existing", "cluster.existing must be set")


def test_existing_block_on_a_cloud_cluster_is_refused() -> None:
    config = edited("prod", "cluster", lambda c: c.update(existing={"context": "lab"}))
    assert_problem(config, "gpu-driver-upgrade:cluster.existing", "cloud is 'aks'")


def test_kube_context_is_gone_in_favour_of_the_clusters_own_credentials() -> None:
    config = edited("prod", "cluster", lambda c: c.update(kubeContext="aks-inference-weu-1"))
    assert_problem(config, "gpu-driver-upgrade:cluster.kubeContext", "unknown key")


def test_existing_pools_need_a_node_selector() -> None:
    config = edited("existing-prod", "nodePools", lambda pools: pools[1].pop("existing"))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].existing", "every pool needs its 'existing' block")


def test_existing_pool_node_selector_is_not_empty() -> None:
    config = edited("existing-prod", "nodePools", lambda pools: pools[1]["existing"].update(nodeSelector={}))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].existing.nodeSelector", "at least 1 item")


@pytest.mark.parametrize(("selector", "fragment"), [({"bad key!": "x"}, "not a valid nodeSelector key"),
                                                     ({"pool": "a b"}, "not a valid nodeSelector value")])
def test_existing_pool_node_selector_must_be_labels(selector: dict[str, str], fragment: str) -> None:
    config = edited("existing-prod", "nodePools", lambda pools: pools[1]["existing"].update(nodeSelector=selector))
    assert_problem(config, "gpu-driver-upgrade:nodePools[1].existing.nodeSelector", fragment)


def test_existing_pools_whose_selectors_nest_are_refused() -> None:
    def nest(pools: list[dict]) -> None:
        pools[1]["existing"]["nodeSelector"] = {**pools[0]["existing"]["nodeSelector"], "gpu.example.com/tier": "a"}

    config = edited("existing-prod", "nodePools", nest)
    assert_problem(
        config, "gpu-driver-upgrade:nodePools[1].existing.nodeSelector", "pool 'l40s-serving'", "single out its own nodes"
    )


def test_existing_block_on_an_aks_pool_is_refused() -> None:
    config = edited("prod", "nodePools", lambda pools: pools[0].update(existing={"nodeSelector": {"a": "b"}}))
    assert_problem(config, "gpu-driver-upgrade:nodePools[0].existing", "'existing' block on a pool of a 'aks' cluster")


def test_capacity_block_generations_share_the_reservation() -> None:
    def two(pools: list[dict]) -> None:
        pools[2]["generations"].append({"id": 2, "driverVersion": "570.195.03", "releaseVersion": "1.33.5-20251120"})

    config = edited("eks-prod", "nodePools", two)
    assert_problem(config, "gpu-driver-upgrade:nodePools[2].generations", "reserves nodeCount (3)", "ask for 6")

    def shared(pools: list[dict]) -> None:
        two(pools)
        pools[2]["generations"][0]["nodeCount"] = 2
        pools[2]["generations"][1]["nodeCount"] = 1

    spec = spec_from_config(edited("eks-prod", "nodePools", shared))
    pool = spec.nodePools[2]
    assert [pool.generation_nodes(g) for g in pool.live_generations] == [2, 1]


@pytest.mark.parametrize("canary", ["x" * 101, "canary/..", "org/project/..", "a/b/c/d", "org//canary", "can ary"])
def test_the_canary_stack_must_be_a_stack_name(canary: str) -> None:
    # Its own name names Pulumi.<name>.yaml and attestations/<name>/: a path or an overlong name is refused here.
    config = change(stack_config("prod"), "promotion", lambda p: p.update(canaryStack=canary))
    assert_problem(config, "gpu-driver-upgrade:promotion.canaryStack", "is not a stack", "at most 100 characters")


def test_the_canary_stack_may_be_named_fully() -> None:
    config = change(stack_config("prod"), "promotion", lambda p: p.update(canaryStack="acme/gpu-driver-upgrade/canary"))
    assert spec_from_config(config).promotion.canaryStack == "acme/gpu-driver-upgrade/canary"


# ---------------------------------------------------------------- errors that say what to do (issue 24 point 6)


def _only_problem(config: dict[str, str]) -> SpecProblem:
    with pytest.raises(SpecError) as info:
        spec_from_config(config)
    (problem,) = info.value.problems
    return problem


def test_item_names() -> None:
    # The path stays what `pulumi config set --path` takes; the pool's name rides beside it.
    problem = _only_problem(edited("prod", "nodePools", lambda pools: pools[1].update(nodeCount=0)))
    assert problem.path == "gpu-driver-upgrade:nodePools[1].nodeCount"
    assert problem.item == "gpua100" and str(problem).startswith("gpu-driver-upgrade:nodePools[1].nodeCount (gpua100): ")
    # A bad name is not repeated as the item's name.
    bad_name = _only_problem(edited("prod", "nodePools", lambda pools: pools[1].update(name="GPU_A100")))
    assert bad_name.item == "" and "GPU_A100" in bad_name.message
    # A key outside any list names no item.
    outside = _only_problem(edited("prod", "driver", lambda driver: driver.update(version=580)))
    assert outside.item == ""


@pytest.mark.parametrize(("value", "shown"), [("3", "'3'"), (True, "True"), ({"n": 3}, "a mapping"), ([3], "a list"),
                                              ("x" * 500, "'xxxx")])
def test_a_type_error_echoes_the_bad_value(value: object, shown: str) -> None:
    problem = _only_problem(edited("prod", "nodePools", lambda pools: pools[0].update(gpusPerNode=value)))
    assert problem.path == "gpu-driver-upgrade:nodePools[0].gpusPerNode"
    assert f"(got {shown}" in problem.message and len(problem.message) < 160


@pytest.mark.parametrize(("edit", "path", "suggested"), [
    (lambda config: config.update({"gpu-driver-upgrade:nodepools": "[]"}), "gpu-driver-upgrade:nodepools", "nodePools"),
    (lambda config: config.update({"gpu-driver-upgrade:promoton": "{}"}), "gpu-driver-upgrade:promoton", "promotion"),
])
def test_an_unknown_top_level_key_gets_the_nearest_key(edit: Callable[[dict[str, str]], None], path: str,
                                                      suggested: str) -> None:
    config = stack_config("prod")
    edit(config)
    problem = _only_problem(config)
    assert problem.path == path and f"did you mean '{suggested}'?" in problem.message and "docs/config.md" in problem.message


@pytest.mark.parametrize(("key", "edit", "path", "suggested"), [
    ("gpuOperator", lambda op: op["upgradePolicy"].update(podDeleton={}),
     "gpu-driver-upgrade:gpuOperator.upgradePolicy.podDeleton", "podDeletion"),
    ("nodePools", lambda pools: pools[2].update(gpusPerNod=8), "gpu-driver-upgrade:nodePools[2].gpusPerNod", "gpusPerNode"),
    ("models", lambda models: models[0].update(Replicas=3), "gpu-driver-upgrade:models[0].Replicas", "replicas"),
])
def test_an_unknown_nested_key_gets_the_nearest_key_of_its_own_block(key: str, edit: Callable[[Any], None], path: str,
                                                                    suggested: str) -> None:
    problem = _only_problem(edited("prod", key, edit))
    assert problem.path == path and f"did you mean '{suggested}'?" in problem.message


def test_a_key_like_no_other_suggests_nothing() -> None:
    problem = _only_problem(edited("prod", "driver", lambda driver: driver.update(zzzqqq=1)))
    assert "unknown key" in problem.message and "did you mean" not in problem.message


def test_a_near_miss_of_the_project_namespace_is_named() -> None:
    config = stack_config("prod")
    config["gpu-driver-upgrad:rollout"] = config.pop("gpu-driver-upgrade:rollout")
    problem = _only_problem(config)
    assert problem.path == "gpu-driver-upgrad:rollout" and "did you mean 'gpu-driver-upgrade:rollout'?" in problem.message
    config = stack_config("prod")
    config["azure-native:location"] = "westeurope"  # another provider's namespace stays its own
    spec_from_config(config)


def test_a_percentage_over_100_says_the_range() -> None:
    problem = _only_problem(edited("prod", "gpuOperator", lambda op: op["upgradePolicy"].update(maxUnavailable="125%")))
    assert problem.path.endswith("maxUnavailable") and "from 0% to 100%, got '125%'" in problem.message


def test_a_pool_block_of_another_cloud_is_said_once() -> None:
    # An AKS pool written with an eks: block fails on every AKS key inside it; the problem is the block.
    problem = _only_problem(edited("prod", "nodePools", lambda pools: pools[0].update(eks=pools[0].pop("aks"))))
    assert problem.path == "gpu-driver-upgrade:nodePools[0].eks" and problem.item == "gput4"
    assert "'eks' block on a pool of a 'aks' cluster" in problem.message and "needs its 'aks' block" in problem.message
