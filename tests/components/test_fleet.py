"""Each example stack, rendered by the real program under mocks: resources counted and key inputs checked."""

from __future__ import annotations

import contextvars
import json
from collections import Counter

import pulumi
import pytest

from components import guard, validation
from components.program_config import runtime_config
from preview.run import OFFLINE_SERVER, SECRET, ProgramRun, run_program
from gpu_knowledge import labels
from fleetspec.load import spec_from_config
from tests.conftest import EXAMPLE_STACKS as EXAMPLES
from tests.conftest import aks_image_owned, as_planned, edited, eks_operator_owned, stack_config

AGENT_POOL = "azure-native:containerservice:AgentPool"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NVIDIA_DRIVER = "kubernetes:nvidia.com/v1alpha1:NVIDIADriver"
CLUSTER_POLICY = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
# What a prod stack's in-cluster guard adds (components/guard.py): one of each of its objects, a Role and binding in
# its namespace and in kube-system, its project ConfigMap and its PDB; no monitoring unless declared.
GUARD_OBJECTS = Counter({token: 1 for token in guard.RESOURCE_TYPES if token not in guard.MONITORING_TYPES}) + Counter({
    "kubernetes:rbac.authorization.k8s.io/v1:Role": 1, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": 1,
    CONFIG_MAP: 1, PDB: 1})
K8S_PROVIDER = "pulumi:providers:kubernetes"


def by_name(run: ProgramRun, type_token: str) -> dict[str, dict]:
    return {r.name: r.inputs for r in run.of_type(type_token)}


def parent_type(urn: str) -> str:
    return urn.split("::")[2].split("$")[0]


def type_counts(run: ProgramRun) -> dict[str, int]:
    counts: dict[str, int] = {}
    for resource in run.custom_resources:
        counts[resource.type] = counts.get(resource.type, 0) + 1
    return counts


# ---------------------------------------------------------------- AKS canary


def test_canary_renders_only_what_the_canary_stack_owns(rendered: dict[str, ProgramRun]) -> None:
    # Three canary pools, one per GPU architecture prod runs (Hopper, Ampere, Turing). The validation job's
    # objects (tests/components/test_validation.py): one of each, a DaemonSet per pool, and a second ConfigMap,
    # the validation program.
    validation_job = {**{token: 1 for token in validation.RESOURCE_TYPES}, "kubernetes:apps/v1:DaemonSet": 3}
    assert type_counts(rendered["canary"]) == {AGENT_POOL: 3, NVIDIA_DRIVER: 3, PDB: 1, CONFIG_MAP: 2, K8S_PROVIDER: 1,
                                               **validation_job}
    assert sorted(by_name(rendered["canary"], AGENT_POOL)) == ["canarya100", "canaryt4", "gpucanary"]


def test_canary_pool_is_operator_owned_and_released(rendered: dict[str, ProgramRun]) -> None:
    pool = by_name(rendered["canary"], AGENT_POOL)["gpucanary"]
    assert pool["gpuProfile"] == {"driver": "None"}
    assert pool["mode"] == "User"
    assert pool["vmSize"] == "Standard_NC40ads_H100_v5"
    assert pool["count"] == 3
    assert pool["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert pool["nodeLabels"][labels.POOL] == "gpucanary"
    assert labels.SKIP_UPGRADE not in pool["nodeLabels"]
    assert pool["upgradeSettings"] == {
        "maxSurge": "1",
        "drainTimeoutInMinutes": 30,
        "nodeSoakDurationInMinutes": 10,
        "undrainableNodeBehavior": "Cordon",
    }


def test_canary_driver_selects_its_pool_one_node_at_a_time(rendered: dict[str, ProgramRun]) -> None:
    driver = by_name(rendered["canary"], NVIDIA_DRIVER)["gpu-gpucanary"]
    assert driver["apiVersion"] == "nvidia.com/v1alpha1"
    spec = driver["spec"]
    assert spec["version"] == "580.173.02"
    assert spec["nodeSelector"] == {labels.POOL: "gpucanary"}
    assert spec["default"] is False
    assert spec["upgradePolicy"]["maxParallelUpgrades"] == 1
    assert spec["upgradePolicy"]["autoUpgrade"] is True
    assert "podDeletion" in spec["upgradePolicy"] and "gpuPodDeletion" not in spec["upgradePolicy"]


# ---------------------------------------------------------------- AKS prod


def test_prod_counts(rendered: dict[str, ProgramRun]) -> None:
    # ConfigMaps: the cluster-identity record, the promotion record (components/promotion.py) and the validation
    # job's program; the job validates the one released pool (a DaemonSet).
    validation_job = {token: 1 for token in validation.RESOURCE_TYPES}
    assert type_counts(rendered["prod"]) == dict(Counter({
        AGENT_POOL: 3, CLUSTER_POLICY: 1, NVIDIA_DRIVER: 3, PDB: 4, CONFIG_MAP: 3, K8S_PROVIDER: 1, **validation_job
    }) + GUARD_OBJECTS)


def test_prod_pins_one_driver_per_pool_and_holds_unreleased_pools(rendered: dict[str, ProgramRun]) -> None:
    drivers = by_name(rendered["prod"], NVIDIA_DRIVER)
    assert {name: d["spec"]["version"] for name, d in drivers.items()} == {
        "gpu-gput4": "580.173.02",
        "gpu-gpua100": "570.195.03",
        "gpu-gpuh100": "570.195.03",
    }
    selectors = [d["spec"]["nodeSelector"] for d in drivers.values()]
    assert sorted(s[labels.POOL] for s in selectors) == ["gpua100", "gpuh100", "gput4"]
    pools = by_name(rendered["prod"], AGENT_POOL)
    held = {name for name, p in pools.items() if p["nodeLabels"].get(labels.SKIP_UPGRADE) == "true"}
    assert held == {"gpua100", "gpuh100"}
    assert all(p["gpuProfile"] == {"driver": "None"} for p in pools.values())


def test_prod_patches_the_cluster_policy_with_crd_field_names(rendered: dict[str, ProgramRun]) -> None:
    (patch,) = rendered["prod"].of_type(CLUSTER_POLICY)
    assert patch.inputs["metadata"]["name"] == "cluster-policy"
    assert patch.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    driver = patch.inputs["spec"]["driver"]
    assert driver["enabled"] is True
    assert driver["version"] == "580.173.02"
    assert driver["useNvidiaDriverCRD"] is True
    assert driver["upgradePolicy"] == {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "25%",
        "waitForCompletion": {"podSelector": "workload-class=batch", "timeoutSeconds": 3600},
        "podDeletion": {"force": False, "timeoutSeconds": 900, "deleteEmptyDir": False},
        "drain": {"enable": False, "force": False, "podSelector": "", "timeoutSeconds": 900, "deleteEmptyDir": False},
    }


def test_prod_pdbs_carry_the_model_facts(rendered: dict[str, ProgramRun]) -> None:
    pdbs = by_name(rendered["prod"], PDB)
    assert set(pdbs) == {
        "gpu-rollout-guard",  # the in-cluster guard's own (tests/components/test_guard.py)
        "inference-llm-chat-pdb",
        "inference-embed-triton-pdb",
        "inference-code-tgi-pdb",
        "inference-rerank-sglang-pdb",
    }
    chat = pdbs["inference-llm-chat-pdb"]
    assert chat["metadata"]["namespace"] == "inference"
    assert chat["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {"app": "llm-chat", "track": "stable"}}}
    assert chat["metadata"]["annotations"][labels.ANNOTATION_REPLICAS] == "3"
    assert chat["metadata"]["annotations"][labels.ANNOTATION_CUDA] == "12.8"
    assert pdbs["inference-code-tgi-pdb"]["spec"]["minAvailable"] == "50%"


def test_prod_outputs(rendered: dict[str, ProgramRun]) -> None:
    outputs = rendered["prod"].outputs
    assert outputs["stage"] == "prod"
    assert outputs["driverVersion"] == "580.173.02"
    assert outputs["releasedPools"] == ["gput4"]
    assert outputs["heldPools"] == ["gpua100", "gpuh100"]
    assert outputs["pools"]["gpuh100"]["driverVersion"] == "570.195.03"


def test_children_are_parented_to_their_components(rendered: dict[str, ProgramRun]) -> None:
    promotion = "gpu-driver-upgrade-promotion"
    (record,) = [r for r in rendered["prod"].custom_resources if r.name == promotion]
    assert parent_type(record.urn) == "gpu-driver-upgrade:promotion:CanaryGate"
    parents = {r.type: parent_type(r.urn) for r in rendered["prod"].custom_resources
               if r.name != promotion and parent_type(r.urn) not in (
                   "gpu-driver-upgrade:validation:ValidationJob", "gpu-driver-upgrade:guard:Guard")}
    assert parents == {
        AGENT_POOL: "gpu-driver-upgrade:pools:AksGpuPool",
        CLUSTER_POLICY: "gpu-driver-upgrade:operator:DriverPolicy",
        NVIDIA_DRIVER: "gpu-driver-upgrade:operator:PoolDriver",
        PDB: "gpu-driver-upgrade:disruption:ModelBudget",
        CONFIG_MAP: "gpu-driver-upgrade:cluster:ClusterIdentity",
        K8S_PROVIDER: "gpu-driver-upgrade:fleet:GpuFleet",
    }
    components = {r.type: parent_type(r.urn) for r in rendered["prod"].resources if not r.custom}
    assert components["gpu-driver-upgrade:fleet:GpuFleet"] == "pulumi:pulumi:Stack"
    assert components["gpu-driver-upgrade:pools:AksGpuPool"] == "gpu-driver-upgrade:fleet:GpuFleet"


def test_releasing_a_pool_moves_its_driver_and_drops_the_skip_label() -> None:
    config = edited("prod", "nodePools", lambda pools: pools[1]["rollout"].update(released=True))
    run = run_program(config, "prod")
    assert by_name(run, NVIDIA_DRIVER)["gpu-gpua100"]["spec"]["version"] == "580.173.02"
    assert labels.SKIP_UPGRADE not in by_name(run, AGENT_POOL)["gpua100"]["nodeLabels"]
    assert run.outputs["releasedPools"] == ["gput4", "gpua100"]


def test_operator_before_26_7_gets_no_per_driver_policy() -> None:
    config = edited("prod", "gpuOperator", lambda o: o.update(chartVersion="v26.3.3"))
    run = run_program(config, "prod")
    for driver in by_name(run, NVIDIA_DRIVER).values():
        assert "upgradePolicy" not in driver["spec"] and "default" not in driver["spec"]


def test_helm_mode_installs_the_pinned_chart_with_helm_key_names() -> None:
    config = edited("prod", "gpuOperator", lambda o: o.update(clusterPolicy="helm"))
    run = run_program(config, "prod")
    assert not run.of_type(CLUSTER_POLICY)
    (release,) = run.of_type(HELM_RELEASE)
    assert release.inputs["version"] == "v26.7.0"
    assert release.inputs["chart"] == "gpu-operator"
    driver = release.inputs["values"]["driver"]
    # The chart's default NVIDIADriver stays the fallback owner of GPU nodes outside the stacks' pools.
    assert driver["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": True}
    older = run_program(edited("prod", "gpuOperator", lambda o: o.update(clusterPolicy="helm", chartVersion="v26.3.3")), "prod")
    (release,) = older.of_type(HELM_RELEASE)
    # Before v26.7.0 the chart's "default" CR is an ordinary one that would overlap every pool's driver.
    assert release.inputs["values"]["driver"]["nvidiaDriverCRD"]["deployDefaultCR"] is False
    assert "gpuPodDeletion" in driver["upgradePolicy"] and "podDeletion" not in driver["upgradePolicy"]


def kubernetes_objects_use_the_stack_provider(run: ProgramRun) -> str:
    """Every Kubernetes object names the stack's one explicit provider; returns that provider's URN."""
    (provider,) = run.of_type(K8S_PROVIDER)
    objects = [r for r in run.custom_resources if r.type.startswith("kubernetes:")]
    assert objects
    assert {r.provider.rsplit("::", 1)[0] for r in objects} == {provider.urn}, [(r.name, r.provider) for r in objects]
    return provider.urn


@pytest.mark.parametrize("stack", EXAMPLES)
def test_every_kubernetes_object_goes_through_the_stack_provider(rendered: dict[str, ProgramRun], stack: str) -> None:
    kubernetes_objects_use_the_stack_provider(rendered[stack])


def test_aks_provider_uses_the_clusters_own_user_credentials(rendered: dict[str, ProgramRun]) -> None:
    (provider,) = rendered["prod"].of_type(K8S_PROVIDER)
    # The credentials are a secret; the offline preview answers the lookup with a marker kubeconfig.
    assert provider.inputs == {"kubeconfig": SECRET}


def test_eks_provider_authenticates_with_aws_eks_get_token_in_the_clusters_region(
    rendered: dict[str, ProgramRun],
) -> None:
    (provider,) = rendered["eks-prod"].of_type(K8S_PROVIDER)
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    (cluster,) = kubeconfig["clusters"]
    assert cluster["cluster"]["server"] == OFFLINE_SERVER
    (user,) = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "aws"
    assert user["user"]["exec"]["args"] == [
        "eks", "get-token", "--cluster-name", "eks-inference-use1-1", "--region", "us-east-1", "--output", "json"
    ]
    assert "token" not in user["user"]


def test_eks_node_groups_go_to_the_clusters_region(rendered: dict[str, ProgramRun]) -> None:
    groups = rendered["eks-prod"].of_type(NODE_GROUP)
    assert groups and {g.inputs["region"] for g in groups} == {"us-east-1"}


def test_cluster_identity_record_names_the_cluster(rendered: dict[str, ProgramRun]) -> None:
    (record,) = [r for r in rendered["prod"].of_type(CONFIG_MAP)
                 if r.inputs["metadata"]["labels"].get(labels.RECORD) == labels.RECORD_CLUSTER_IDENTITY]
    assert record.inputs["metadata"]["namespace"] == "kube-system"
    assert record.inputs["metadata"]["name"] == "gpu-driver-upgrade-prod"
    assert record.inputs["metadata"]["labels"] == {labels.RECORD: labels.RECORD_CLUSTER_IDENTITY}
    assert record.inputs["data"]["cluster"] == "inference-weu-1"
    assert record.inputs["data"]["aksClusterName"] == "aks-inference-weu-1"


# ---------------------------------------------------------------- EKS


def test_eks_canary_runs_two_generations_side_by_side(rendered: dict[str, ProgramRun]) -> None:
    # Two canary node groups (Ada, Ampere: the architectures eks-prod moves), each in two generations, and the
    # validation job (a DaemonSet per pool, its program in a second ConfigMap).
    validation_job = {**{token: 1 for token in validation.RESOURCE_TYPES}, "kubernetes:apps/v1:DaemonSet": 2}
    assert type_counts(rendered["eks-canary"]) == {NODE_GROUP: 4, PDB: 1, CONFIG_MAP: 2, K8S_PROVIDER: 1,
                                                   **validation_job}
    groups = by_name(rendered["eks-canary"], NODE_GROUP)
    assert {n: g["releaseVersion"] for n, g in groups.items()} == {
        "gpu-canary-g1": "1.33.5-20251016",
        "gpu-canary-g2": "1.33.5-20251120",
        "gpu-canary-a10g-g1": "1.33.5-20251016",
        "gpu-canary-a10g-g2": "1.33.5-20251120",
    }
    for group in groups.values():
        assert group["amiType"] == "AL2023_x86_64_NVIDIA"
        assert group["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "MINIMAL"}
        assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


def test_eks_prod_drops_retired_generations_and_pins_every_release(rendered: dict[str, ProgramRun]) -> None:
    groups = by_name(rendered["eks-prod"], NODE_GROUP)
    assert sorted(groups) == ["gpu-a10g-g4", "gpu-h100-g1", "gpu-l40s-g1", "gpu-l40s-g2"]
    assert {n: g["releaseVersion"] for n, g in groups.items()} == {
        "gpu-a10g-g4": "1.33.5-20251120", "gpu-h100-g1": "1.33.5-20251016",
        "gpu-l40s-g1": "1.33.5-20251016", "gpu-l40s-g2": "1.33.5-20251120",
    }
    assert groups["gpu-h100-g1"]["labels"][labels.SKIP_UPGRADE] == "true"
    assert groups["gpu-h100-g1"]["capacityType"] == "CAPACITY_BLOCK"
    assert groups["gpu-a10g-g4"]["labels"][labels.GENERATION] == "4"


def test_eks_prod_installs_the_operator_with_driver_and_toolkit_disabled(rendered: dict[str, ProgramRun]) -> None:
    # The validation job (issue 23) on its two released pools, its program in a second ConfigMap.
    validation_job = {**{token: 1 for token in validation.RESOURCE_TYPES}, "kubernetes:apps/v1:DaemonSet": 2}
    assert type_counts(rendered["eks-prod"]) == dict(Counter({
        NODE_GROUP: 4, HELM_RELEASE: 1, PDB: 4, CONFIG_MAP: 3, K8S_PROVIDER: 1, **validation_job}) + GUARD_OBJECTS)
    (release,) = rendered["eks-prod"].of_type(HELM_RELEASE)
    values = release.inputs["values"]
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert values["devicePlugin"] == {"enabled": True}  # AL2023 ships no device plugin; Bottlerocket does


def test_bottlerocket_nvidia_also_disables_the_device_plugin() -> None:
    def bottlerocket(pools: list[dict]) -> None:
        for pool in pools:
            pool["eks"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"

    run = run_program(edited("eks-prod", "nodePools", bottlerocket), "eks-prod")
    (release,) = run.of_type(HELM_RELEASE)
    assert release.inputs["values"]["devicePlugin"] == {"enabled": False}


def test_eks_outputs_show_per_pool_images(rendered: dict[str, ProgramRun]) -> None:
    pools = rendered["eks-prod"].outputs["pools"]
    assert pools["gpu-l40s"]["image"] == "1.33.5-20251120"
    assert pools["gpu-h100"]["driverVersion"] == "570.195.03"
    assert rendered["eks-prod"].outputs["heldPools"] == ["gpu-h100"]


@pytest.mark.parametrize("stack", EXAMPLES)
def test_every_stack_exports_the_contract_outputs(rendered: dict[str, ProgramRun], stack: str) -> None:
    assert set(rendered[stack].outputs) == {
        "stage", "cluster", "driverVersion", "pools", "releasedPools", "heldPools",
        # read back by the next deployment (components/previous.py)
        "cloudPools", "operatorVersion", "perPoolDrivers", "previousDriverVersion",
        "timeline",  # when waves were released and generations first deployed (issue 23)
        "identity",  # which stack and cluster this is: a prod gate compares its canary's (issue 30)
    }
    assert rendered[stack].outputs["cluster"] == stack_spec(stack).cluster.name


def stack_spec(stack: str):
    return spec_from_config(stack_config(stack))


def test_a_cloud_pool_keeps_the_record_of_its_last_deployment() -> None:
    previous = {"cloudPools": {"gpua100": "gpuInstanceProfile=- gpuProfile.driver=None vmSize=Standard_NC8ads_A100_v4"}}
    run = run_program(stack_config("prod"), "prod", previous_outputs=previous)
    pools = by_name(run, AGENT_POOL)
    assert pools["gpua100"]["tags"][labels.TAG_DEPLOYED_WITH] == previous["cloudPools"]["gpua100"]
    # A pool the last deployment did not have records what this one sends.
    assert pools["gput4"]["tags"][labels.TAG_DEPLOYED_WITH] == run.outputs["cloudPools"]["gput4"]


# ---------------------------------------------------------------- ordering: what waits for what


def _waits_for(run: ProgramRun, type_token: str, name: str) -> set[str]:
    (resource,) = [r for r in run.of_type(type_token) if r.name == name]
    return {urn.split("::")[-1] for urn in resource.dependencies}


POOL_TYPES = (AGENT_POOL, NODE_GROUP)


def _pool_resources(run: ProgramRun, spec, pool_name: str) -> list:
    """The cloud pools (or the pool record, on an existing cluster) one pool renders to."""
    pool = spec.pool(pool_name)
    names = {pool.cloud_name(g) for g in (pool.live_generations or [None])}
    found = [r for r in run.resources if r.type in POOL_TYPES and r.name in names]
    return found or [r for r in run.of_type(CONFIG_MAP) if r.name == f"gpu-driver-upgrade-pool-{pool_name}"]


def _model_pdbs(spec, pool_name: str) -> set[str]:
    return {f"{m.namespace}-{m.name}-pdb" for m in spec.models if pool_name in m.nodePools}


@pytest.mark.parametrize("stack", EXAMPLES)
def test_each_pool_waits_for_the_pdbs_of_its_models(rendered: dict[str, ProgramRun], stack: str) -> None:
    # Nothing may evict a model server before its budget exists: a pool update (node image, Kubernetes
    # version, generation) drains nodes, so every cloud pool waits for the PDBs of the models on it.
    run, spec = rendered[stack], stack_spec(stack)
    checked = 0
    for pool in spec.nodePools:
        for resource in _pool_resources(run, spec, pool.name):
            assert _model_pdbs(spec, pool.name) <= _waits_for(run, resource.type, resource.name), resource.name
            checked += 1
    assert checked >= len(spec.nodePools)


@pytest.mark.parametrize("stack", EXAMPLES)
def test_the_driver_policy_waits_for_every_pdb_and_every_pool(rendered: dict[str, ProgramRun], stack: str) -> None:
    # A pool held in the same change must carry its skip label before a new driver version lands.
    run, spec = rendered[stack], stack_spec(stack)
    policies = [*run.of_type(CLUSTER_POLICY), *run.of_type(HELM_RELEASE)]
    if spec.gpuOperator.clusterPolicy.value == "external":
        assert policies == []
        return
    (policy,) = policies
    waits = _waits_for(run, policy.type, policy.name)
    assert {f"{m.namespace}-{m.name}-pdb" for m in spec.models} <= waits
    for pool in spec.nodePools:
        assert {r.name for r in _pool_resources(run, spec, pool.name)} <= waits


@pytest.mark.parametrize("stack", EXAMPLES)
def test_each_pool_driver_waits_for_its_pool_its_pdbs_and_the_driver_policy(
    rendered: dict[str, ProgramRun], stack: str
) -> None:
    run, spec = rendered[stack], stack_spec(stack)
    drivers = {r.name: r for r in run.of_type(NVIDIA_DRIVER)}
    for pool in spec.nodePools if drivers else []:
        waits = _waits_for(run, NVIDIA_DRIVER, f"gpu-{pool.name}")
        assert {r.name for r in _pool_resources(run, spec, pool.name)} <= waits
        assert _model_pdbs(spec, pool.name) <= waits
        if spec.gpuOperator.clusterPolicy.value != "external":
            assert "cluster-policy" in waits
        others = {r.name for p in spec.nodePools if p.name != pool.name for r in _pool_resources(run, spec, p.name)}
        assert not others & waits  # only its own pool: the plan stays linear in the fleet


def test_a_pool_does_not_wait_for_models_on_other_pools(rendered: dict[str, ProgramRun]) -> None:
    run = rendered["prod"]
    waits = _waits_for(run, AGENT_POOL, "gput4")
    assert "inference-rerank-sglang-pdb" in waits and "inference-llm-chat-pdb" not in waits


# ---------------------------------------------------------------- AKS image-owned generations


def test_aks_image_owned_pools_install_the_image_driver_per_generation() -> None:
    run = run_program(aks_image_owned(), "prod")
    pools = by_name(run, AGENT_POOL)
    assert sorted(pools) == ["gpuh100g1", "gpuh100g2"]
    for name, pool in pools.items():
        assert pool["gpuProfile"] == {"driver": "Install"}
        assert pool["agentPoolName"] == name
    assert pools["gpuh100g2"]["tags"][labels.TAG_NODE_IMAGE] == "202511.21.0"
    assert pools["gpuh100g2"]["tags"][labels.TAG_IMAGE_DRIVER] == "580.173.02"
    (patch,) = run.of_type(CLUSTER_POLICY)
    assert patch.inputs["spec"]["driver"] == {"enabled": False}
    assert patch.inputs["spec"]["toolkit"] == {"enabled": True}  # AKS images carry the driver only
    assert not run.of_type(NVIDIA_DRIVER)


def test_eks_capacity_block_pool_uses_its_launch_template(rendered: dict[str, ProgramRun]) -> None:
    group = by_name(rendered["eks-prod"], NODE_GROUP)["gpu-h100-g1"]
    assert group["launchTemplate"] == {"id": "lt-0c4f2a9b7d1e35a60", "version": "3"}
    assert "diskSize" not in group  # EKS refuses diskSize beside a launch template
    assert "instanceTypes" not in group  # the launch template sets the Capacity Block's instance type
    assert "remoteAccess" not in group  # refused beside a launch template too
    assert group["capacityType"] == "CAPACITY_BLOCK"


def test_operator_owned_eks_node_groups_run_the_custom_ami_of_their_launch_template() -> None:
    run = run_program(eks_operator_owned(), "eks-prod")
    groups = by_name(run, NODE_GROUP)
    assert groups
    for group in groups.values():
        # EKS refuses amiType, releaseVersion and version beside a launch template's custom AMI.
        assert not {"amiType", "releaseVersion", "version"} & set(group)
        assert set(group["launchTemplate"]) == {"id", "version"}
        assert group["labels"][labels.POOL_OS] == "ubuntu22.04"


def test_eks_node_group_without_launch_template_gets_the_default_disk(rendered: dict[str, ProgramRun]) -> None:
    group = by_name(rendered["eks-prod"], NODE_GROUP)["gpu-l40s-g2"]
    assert group["instanceTypes"] == ["g6e.12xlarge"]
    assert group["diskSize"] == 200


# ---------------------------------------------------------------- the engine's config path


def test_program_reads_config_the_way_the_engine_passes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python language host hands the program its config as the PULUMI_CONFIG JSON variable."""
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(stack_config("prod")))
    # A fresh context: no config set by an earlier run_program, only what the engine's variable carries.
    seen = contextvars.Context().run(runtime_config)
    assert spec_from_config(seen) == spec_from_config(stack_config("prod"))


def test_capacity_block_generations_split_the_reservation_between_their_node_groups() -> None:
    def move_one_node(pools: list[dict]) -> None:
        pools[2]["generations"] = [
            {"id": 1, "driverVersion": "570.195.03", "releaseVersion": "1.33.5-20251016", "nodeCount": 2},
            {"id": 2, "driverVersion": "570.195.03", "releaseVersion": "1.33.5-20251120", "nodeCount": 1},
        ]

    run = as_planned("eks-prod", edited("eks-prod", "nodePools", move_one_node))
    groups = by_name(run, NODE_GROUP)
    assert groups["gpu-h100-g1"]["scalingConfig"]["desiredSize"] == 2
    assert groups["gpu-h100-g2"]["scalingConfig"]["desiredSize"] == 1
    # The pack counts both generations on the one reservation: no false shortage of spare capacity.
    from policy.evaluate import evaluate, from_registered, load_config, mandatory

    assert mandatory(evaluate(from_registered(run.resources), load_config("prod"))) == []


def test_agent_pools_shed_only_the_sdks_api_version_aliases() -> None:
    from components.node_pools import _without_api_version_aliases

    ours = pulumi.Alias(name="gpua100-old")
    versioned = [pulumi.Alias(type_=f"azure-native:containerservice/v{v}:AgentPool") for v in ("20240101", "20250702preview")]
    opts = pulumi.ResourceOptions(aliases=[ours, *versioned], protect=True)
    result = _without_api_version_aliases(
        pulumi.ResourceTransformationArgs(None, "azure-native:containerservice:AgentPool", "gpua100", {"count": 8}, opts)
    )
    assert result.opts.aliases == [ours]
    assert result.opts.protect is True and result.props == {"count": 8}
    assert len(opts.aliases) == 3  # the caller's options are not changed
