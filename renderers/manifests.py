"""Pure builders: the Kubernetes objects, labels and values the components send, from a FleetSpec.

No Pulumi here. Components wrap these in resources; policy rules and tests read the same shapes, so
what is reviewed in a plan is exactly what `pulumi up` sends. The facts the policy pack reads back (pool
labels, driver and PDB annotations, records, cloud pool tags) are derived from the spec here and written
through ``engine_contracts.resource_facts``, which owns their encoding and decoding.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from gpu_knowledge import labels
from gpu_knowledge import replacement
from engine_contracts import attestation
from engine_contracts import resource_facts as rf
from fleetspec.model import PROJECT, Cloud, DriverOwner, FleetSpec, Generation, Model, NodePool, kubernetes_name
from fleetspec.pools import DEFAULT_EKS_DISK_GIB
from fleetspec.notifications import WEBHOOK_NAMESPACE, WEBHOOK_SECRET_KEY
from gpu_knowledge.platform import aks_os, eks_os

CLUSTER_POLICY_NAME = "cluster-policy"
OPERATOR_CHART = "gpu-operator"
OPERATOR_CHART_REPO = "https://helm.ngc.nvidia.com/nvidia"


# ---------------------------------------------------------------- node pools


def pool_facts(spec: FleetSpec, pool: NodePool, generation: Generation | None = None) -> rf.PoolFacts:
    """What every node of the pool (of one generation of it) carries: its rollout and declared hardware."""
    return rf.PoolFacts(
        pool=pool.name,
        role=pool.role,
        wave=pool.rollout.wave,
        held=spec.pool_held(pool),
        gpu_product=pool.gpuProduct,
        gpus_per_node=pool.gpusPerNode,
        nvswitch=pool.nvswitch,
        os=declared_pool_os(pool),
        fabric_manager=fabric_manager_source(spec, pool) if pool.nvswitch else None,
        fabric_manager_version=pool.fabricManagerVersion if pool.nvswitch else None,
        generation=generation.id if generation is not None else None,
        image_driver=generation.driverVersion if generation is not None else None,
        mig_config=pool.migConfig,
    )


def pool_labels(spec: FleetSpec, pool: NodePool, generation: Generation | None = None) -> dict[str, str]:
    """Node labels every node of the pool carries; a held pool also carries the operator's skip label."""
    return rf.pool_labels(pool_facts(spec, pool, generation))


def fabric_manager_source(spec: FleetSpec, pool: NodePool) -> str:
    """Where the pool's Fabric Manager comes from: as configured, else with whoever owns the driver."""
    if pool.fabricManager is not None:
        return pool.fabricManager
    return "driver-container" if spec.driver.owner == DriverOwner.OPERATOR else "image"


def declared_pool_os(pool: NodePool) -> str | None:
    """The OS a pool declares where no cloud field says it: a custom AMI's launch template, an existing pool."""
    if pool.eks is not None and pool.eks.launchTemplate is not None:
        return pool.eks.launchTemplate.os
    if pool.existing is not None:
        return pool.existing.os
    return None


def driver_notes(spec: FleetSpec, pool: NodePool | None = None) -> rf.DriverNotes:
    """Facts the policy pack needs on the operator's driver objects (ClusterPolicy; NVIDIADriver: ``pool``)."""
    return rf.DriverNotes(
        stage=spec.stage,
        operator_version=spec.gpuOperator.chartVersion,
        target_driver=spec.driver.version,
        held=spec.pool_held(pool) if pool is not None else None,
        batch_selectors=tuple(spec.gpuOperator.batchJobSelectors),
        dcgm_exporter=spec.gpuOperator.dcgmExporterVersion,
    )


def driver_annotations(spec: FleetSpec, pool: NodePool | None = None) -> dict[str, str]:
    return rf.driver_annotations(driver_notes(spec, pool))


def gpu_taint() -> tuple[str, str, str]:
    return (labels.GPU_TAINT_KEY, labels.GPU_TAINT_VALUE, labels.GPU_TAINT_EFFECT)


def eks_ami_type(spec: FleetSpec, pool: NodePool) -> str | None:
    """AMI by driver owner: the NVIDIA AMI carries the driver; an operator-owned pool runs a custom Ubuntu AMI
    from its launch template, and EKS refuses an amiType beside a custom AMI (None: not sent)."""
    assert pool.eks is not None
    if pool.eks.amiType is not None:
        return pool.eks.amiType
    return rf.EKS_NVIDIA_AMI if spec.driver.owner == DriverOwner.IMAGE else None


def aks_gpu_driver(spec: FleetSpec) -> str:
    """AKS gpuProfile.driver: "None" whenever the operator owns the driver (two drivers never mix)."""
    return rf.aks_gpu_driver(spec.driver.owner == DriverOwner.OPERATOR)


def cloud_pool_tags(
    spec: FleetSpec, pool: NodePool, deployed_with: Any, generation: Generation | None = None
) -> dict[str, Any]:
    """Tags on a cloud pool: its pool, stage, driver owner and change, the record of its replace-only fields
    as last deployed (``deployed_with``), and an AKS generation's node image with the driver it ships."""
    node_image = generation.nodeImageVersion if generation is not None else None
    return rf.pool_tags(rf.PoolTags(
        pool=pool.name,
        stage=spec.stage,
        driver_owner=spec.driver.owner.value,
        change_ticket=spec.changeTicket,
        deployed_with=deployed_with,
        node_image=node_image,
        image_driver=generation.driverVersion if generation is not None and node_image else None,
    ))


def pool_generations(pool: NodePool) -> list[Generation | None]:
    """The cloud pools a pool renders to: one per live generation, or the pool itself."""
    return list(pool.live_generations) if pool.generations else [None]


def eks_launch_template(pool: NodePool) -> dict[str, str] | None:
    assert pool.eks is not None
    template = pool.eks.launchTemplate
    return {"id": template.id, "version": template.version} if template is not None else None


def eks_disk_size(pool: NodePool) -> int | None:
    """EKS refuses diskSize beside a launch template: the template's block devices decide (None: not sent)."""
    assert pool.eks is not None
    return (pool.eks.diskSize or DEFAULT_EKS_DISK_GIB) if pool.eks.launchTemplate is None else None


def eks_release_version(pool: NodePool, generation: Generation | None) -> str | None:
    """The AMI release a node group is pinned to: its generation's, else the pool's."""
    assert pool.eks is not None
    return generation.releaseVersion if generation is not None else pool.eks.releaseVersion


def cloud_pool_record(spec: FleetSpec, pool: NodePool, generation: Generation | None) -> str:
    """The replace-only and version fields (``gpu_knowledge.replacement``) the cloud pool of ``pool`` (and
    ``generation``) is sent with, encoded: what its tag records and the stack output ``cloudPools`` states."""
    return replacement.encode(_cloud_pool_fields(spec, pool, generation))


def _cloud_pool_fields(spec: FleetSpec, pool: NodePool, generation: Generation | None) -> dict[str, str]:
    if pool.aks is not None:
        return replacement.aks_agent_pool_fields({"vmSize": pool.aks.vmSize, "gpuProfile": {"driver": aks_gpu_driver(spec)}})
    assert pool.eks is not None and spec.cluster.eks is not None
    return replacement.eks_node_group_fields({
        "amiType": eks_ami_type(spec, pool), "capacityType": pool.eks.capacityType, "diskSize": eks_disk_size(pool),
        "instanceTypes": pool.eks.instanceTypes, "launchTemplate": eks_launch_template(pool),
        "nodeRoleArn": spec.cluster.eks.nodeRoleArn, "subnetIds": spec.cluster.eks.subnetIds,
        "releaseVersion": eks_release_version(pool, generation),
    })


def cloud_pool_records(spec: FleetSpec) -> dict[str, str]:
    """Cloud pool name -> the record of its replace-only fields, for every cloud pool the stack creates (none
    on an existing cluster), in the order the pools and their generations are declared."""
    if spec.cluster.cloud == Cloud.EXISTING:
        return {}
    return {
        pool.cloud_name(generation): cloud_pool_record(spec, pool, generation)
        for pool in spec.nodePools
        for generation in pool_generations(pool)
    }


# ---------------------------------------------------------------- GPU Operator


def _operator_ships_toolkit(spec: FleetSpec) -> bool:
    """The EKS NVIDIA AMIs ship the container toolkit; the operator must not install a second one."""
    if spec.driver.owner != DriverOwner.IMAGE or spec.cluster.cloud != Cloud.EKS:
        return True
    return not all(rf.is_nvidia_ami(eks_ami_type(spec, p)) for p in spec.nodePools)


def _operator_ships_device_plugin(spec: FleetSpec) -> bool:
    """Bottlerocket's NVIDIA variant also ships the device plugin."""
    if spec.driver.owner != DriverOwner.IMAGE or spec.cluster.cloud != Cloud.EKS:
        return True
    return not all(eks_ami_type(spec, p) == rf.EKS_BOTTLEROCKET_NVIDIA_AMI for p in spec.nodePools)


def cluster_policy_spec(spec: FleetSpec) -> dict[str, Any]:
    """The part of ClusterPolicy.spec this project owns, spelled as the CRD spells it."""
    op = spec.gpuOperator
    if spec.driver.owner == DriverOwner.IMAGE:
        driver: dict[str, Any] = {"enabled": False}
    else:
        driver = {
            "enabled": True,
            "repository": op.driverRepository,
            "image": "driver",
            "version": spec.driver.version,
            "usePrecompiled": op.usePrecompiled,
            "kernelModuleType": op.kernelModuleType,
            "useNvidiaDriverCRD": op.useNvidiaDriverCrd,
            "upgradePolicy": op.upgradePolicy.as_crd(),
        }
    out: dict[str, Any] = {
        "driver": driver,
        "toolkit": {"enabled": _operator_ships_toolkit(spec)},
        "devicePlugin": {"enabled": _operator_ships_device_plugin(spec)},
    }
    if op.dcgmExporterVersion is not None:
        # The exporter the stack declares is the one the operator runs (its image tag: CRD spec.dcgmExporter.version).
        out["dcgmExporter"] = {"version": op.dcgmExporterVersion}
    return out


def helm_values(spec: FleetSpec) -> dict[str, Any]:
    """The same settings as chart values: the chart renames a few keys (gpuPodDeletion, nvidiaDriverCRD)."""
    crd = cluster_policy_spec(spec)
    # From v26.7.0 the chart's default NVIDIADriver (spec.default: true) owns every GPU node no per-pool
    # NVIDIADriver selects, so no GPU node is left without a driver owner (NVIDIA's migration guide).
    # Before, it was an ordinary CR that overlapped the per-pool drivers.
    driver = rf.helm_driver_values(crd["driver"], deploy_default_cr=spec.gpuOperator.default_driver_is_fallback)
    values = {"driver": driver, "toolkit": crd["toolkit"], "devicePlugin": crd["devicePlugin"]}
    if "dcgmExporter" in crd:
        values["dcgmExporter"] = crd["dcgmExporter"]  # the chart's value has the CRD's name
    return values


def nvidia_driver_name(pool: NodePool) -> str:
    return f"gpu-{kubernetes_name(pool.name)}"


def driver_node_selector(pool: NodePool) -> dict[str, str]:
    """The nodes a pool's NVIDIADriver installs on: the project's pool label, which the cloud pool puts on
    every node, or on a ``cloud: existing`` cluster (no cloud pool of ours) the pool's declared selector."""
    if pool.existing is not None:
        return dict(pool.existing.nodeSelector)
    return {labels.POOL: pool.name}


def nvidia_driver_spec(spec: FleetSpec, pool: NodePool) -> dict[str, Any]:
    """One NVIDIADriver per operator-owned pool, selecting that pool's nodes only; from v26.7.0 with the pool's
    upgrade policy (``FleetSpec.upgrade_policy``: the stack's, with the pool's own keys in their place)."""
    op = spec.gpuOperator
    body: dict[str, Any] = {
        "driverType": "gpu",
        "image": f"{op.driverRepository}/driver",
        "version": spec.pool_target(pool).driver,
        "usePrecompiled": op.usePrecompiled,
        "kernelModuleType": op.kernelModuleType,
        "nodeSelector": driver_node_selector(pool),
        "tolerations": [
            {"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": labels.GPU_TAINT_EFFECT},
        ],
    }
    if op.per_driver_upgrade_policy:
        # From v26.7.0 each NVIDIADriver rolls its own nodes by its own policy (its CRD default is
        # autoUpgrade: true, so the policy is always sent in full, false values included).
        body["default"] = False
        body["upgradePolicy"] = spec.upgrade_policy(pool).as_crd()
    return body


def nvidia_driver_labels(spec: FleetSpec, pool: NodePool) -> dict[str, str]:
    return rf.pool_driver_labels(pool_facts(spec, pool))


# ---------------------------------------------------------------- disruption budgets


def pdb_name(model: Model) -> str:
    return f"{model.name}-pdb"


def model_facts(spec: FleetSpec, model: Model) -> rf.ModelFacts:
    """A model's declared facts, and the stack-wide ones its PDB carries (stage, change, batch selectors)."""
    return rf.ModelFacts(
        name=model.name,
        stage=spec.stage,
        replicas=model.replicas,
        gpus_per_replica=model.gpusPerReplica,
        cuda=model.cudaVersion,
        image=model.image,
        pools=tuple(model.nodePools),
        forward_compat=model.cudaForwardCompat,
        min_available=model.minAvailable,
        change_ticket=spec.changeTicket,
        batch_selectors=tuple(spec.gpuOperator.batchJobSelectors),
        owners=tuple(model.owners),
    )


def pdb_metadata(spec: FleetSpec, model: Model) -> dict[str, Any]:
    """PDB metadata: the model's declared facts ride along as annotations so the policy pack sees them."""
    facts = model_facts(spec, model)
    return {
        "name": pdb_name(model),
        "namespace": model.namespace,
        "labels": rf.model_labels(facts),
        "annotations": rf.model_annotations(facts),
    }


def pdb_spec(model: Model) -> dict[str, Any]:
    return {"minAvailable": model.minAvailable, "selector": {"matchLabels": dict(model.matchLabels)}}


# ---------------------------------------------------------------- records the stack keeps in the cluster

RECORD_NAMESPACE = "kube-system"  # exists in every cluster, before any stack runs


def owned_per_pool(spec: FleetSpec) -> bool:
    """The operator's driver is owned per pool by NVIDIADrivers (useNvidiaDriverCRD)."""
    return spec.driver.owner == DriverOwner.OPERATOR and spec.gpuOperator.useNvidiaDriverCrd


def identity_name(spec: FleetSpec) -> str:
    """One identity record per stage, so a canary and a prod stack on one cluster never share it."""
    return f"{PROJECT}-{spec.stage.value}"


def identity_metadata(spec: FleetSpec) -> dict[str, Any]:
    return {
        "name": identity_name(spec),
        "namespace": RECORD_NAMESPACE,
        "labels": rf.identity_labels(),
        "annotations": rf.identity_annotations(spec.stage),
    }


def identity_facts(spec: FleetSpec) -> rf.IdentityFacts:
    """Which cluster this is, as the stack knows it, and what this deployment runs (read back next time as
    the previous deployment, by the transition rules). The last deployment's facts come from its outputs."""
    aks, eks = spec.cluster.aks, spec.cluster.eks
    return rf.IdentityFacts(
        cluster=spec.cluster.name,
        cloud=spec.cluster.cloud.value,
        stage=spec.stage,
        operator_version=spec.gpuOperator.chartVersion,
        per_pool_drivers=owned_per_pool(spec),
        aks_resource_group=aks.resourceGroup if aks is not None else None,
        aks_cluster_name=aks.clusterName if aks is not None else None,
        eks_cluster_name=eks.clusterName if eks is not None else None,
        eks_region=eks.region if eks is not None else None,
        unpinned_hold_reason=spec.gpuOperator.unpinnedHoldReason,
        facts_version=rf.FACTS_VERSION,
        wave_dwell_hours=spec.rollout.waveDwellHours,
        early_release_reason=spec.rollout.earlyReleaseReason,
        serving_before_batch_reason=spec.rollout.servingBeforeBatchReason,
        keep_generation_hours=spec.rollout.keepGenerationHours,
        early_retire_reason=spec.rollout.earlyRetireReason,
        maintenance_window=(spec.rollout.maintenanceWindow.model_dump_json()
                            if spec.rollout.maintenanceWindow is not None else None),
        validation_job=spec.validation is not None,
    )


# ---------------------------------------------------------------- the stack's identity (the prod gate's binding)

# The organization a stack's bare name is qualified with where nothing else says: the file (DIY) backend's, and
# the offline preview's. A Pulumi Cloud org is given to the live verbs in GPU_ROLLOUT_ORGANIZATION.
DEFAULT_ORGANIZATION = "organization"
ORGANIZATION_ENV = "GPU_ROLLOUT_ORGANIZATION"


def qualified_stack(stack: str, organization: str | None = None) -> str:
    """``org/project/stack`` as the backend names the stack; a bare name is this project's, in ``organization``
    (default: ``$GPU_ROLLOUT_ORGANIZATION``, else the file backend's ``organization``)."""
    org = organization or os.environ.get(ORGANIZATION_ENV) or DEFAULT_ORGANIZATION
    return attestation.qualified_stack(stack, org, PROJECT)


def cluster_cloud_id(spec: FleetSpec) -> str | None:
    """The cluster's cloud identity as the stack declares it: the AKS managed cluster's resource ID (from
    ``/resourceGroups/``: stacks do not declare the subscription) or the EKS cluster's ARN (the node role's
    account); None for a cluster this project does not create."""
    aks, eks = spec.cluster.aks, spec.cluster.eks
    if aks is not None:
        return attestation.aks_resource_id(aks.resourceGroup, aks.clusterName)
    if eks is not None:
        return attestation.eks_cluster_arn(eks.clusterName, eks.region, eks.nodeRoleArn)
    return None


def stack_identity(spec: FleetSpec, stack: str, kube_system_uid: str | None) -> rf.StackIdentity:
    """The ``identity`` output: the stack as the engine names it (``org/project/stack``), its stage, its
    cluster's name and cloud identity, and the kube-system Namespace's UID as the engine read it (None: not read,
    offline). A prod gate compares its canary's with the canary's attestation."""
    return rf.StackIdentity(stack=stack, stage=spec.stage.value, cluster=spec.cluster.name,
                            cloud_id=cluster_cloud_id(spec), kube_system_uid=kube_system_uid,
                            cluster_read=kube_system_uid is not None)


def pool_operating_systems(pool: NodePool) -> tuple[str, ...]:
    """The OS a pool's nodes boot, as far as the stack declares it (AKS osSku, EKS amiType or the custom AMI's
    declared OS, an existing pool's ``os``); two for AKS's plain "Ubuntu", none where nothing says."""
    if pool.aks is not None:
        return aks_os(pool.aks.osSku)
    if pool.eks is not None:
        return eks_os(pool.eks.amiType, pool.eks.launchTemplate.os if pool.eks.launchTemplate else None)
    return (pool.existing.os,) if pool.existing is not None and pool.existing.os else ()


def install_facts(spec: FleetSpec) -> rf.InstallFacts:
    """How the stack installs the driver, as the prod gate compares it with the attested canary's."""
    image = spec.driver.owner == DriverOwner.IMAGE
    newest = {pool.name: pool.newest_generation for pool in spec.nodePools}
    return rf.InstallFacts(
        driver_mode="image" if image else "nvidiadriver" if owned_per_pool(spec) else "clusterpolicy",
        kernel_module_type=None if image else spec.gpuOperator.kernelModuleType,
        precompiled=not image and spec.gpuOperator.usePrecompiled,
        pools={pool.name: {"os": ",".join(pool_operating_systems(pool)) or None,
                           "nodeImage": generation.image if (generation := newest[pool.name]) else None}
               for pool in spec.nodePools},
    )


def identity_data(spec: FleetSpec) -> dict[str, str]:
    """Which cluster this is, as the stack knows it; the live verbs refuse a cluster whose record differs."""
    return rf.identity_data(identity_facts(spec))


def pool_record_name(pool: NodePool) -> str:
    return f"{PROJECT}-pool-{kubernetes_name(pool.name)}"


def pool_record_metadata(spec: FleetSpec, pool: NodePool) -> dict[str, Any]:
    """A pool of a ``cloud: existing`` cluster: its declared facts and selector, where the policy pack sees them."""
    assert pool.existing is not None
    return {
        "name": pool_record_name(pool),
        "namespace": RECORD_NAMESPACE,
        "labels": rf.pool_record_labels(pool_facts(spec, pool)),
        "annotations": rf.pool_record_annotations(spec.stage, pool.existing.nodeSelector),
    }


def pool_record_data(pool: NodePool) -> dict[str, str]:
    return rf.pool_record_data(pool.nodeCount)


def eks_kubeconfig(cluster_name: str, region: str, endpoint: str, certificate_authority: str) -> dict[str, Any]:
    """A kubeconfig for one EKS cluster that authenticates with `aws eks get-token` (no token is stored)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority}}
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }


# ---------------------------------------------------------------- the stack outputs


def pool_summary(spec: FleetSpec, pool: NodePool) -> rf.PoolSummary:
    """What a reviewer wants per pool (its ``FleetSpec.pool_target``): the driver it moves to or stays
    pinned to, its node image, whether it is held, and its generations, retired ones too."""
    target = spec.pool_target(pool)
    return rf.PoolSummary(
        role=pool.role,
        wave=pool.rollout.wave,
        held=target.held,
        driver_version=target.driver,
        image=target.image,
        generations=tuple(
            rf.GenerationSummary(id=g.id, driver_version=g.driverVersion, image=g.image, retired=g.retired)
            for g in pool.generations or []
        ),
    )


def released_waves(spec: FleetSpec) -> set[int]:
    """The waves with a released prod pool (canary pools are never held and keep no wave discipline)."""
    return {p.rollout.wave for p in spec.nodePools if p.role != rf.CANARY_ROLE and not spec.pool_held(p)}


def timeline(spec: FleetSpec, last: rf.StackOutputs, now: datetime | None) -> rf.Timeline:
    """What this deployment records (``rf.Timeline``): what the last deployment recorded, unchanged, for every
    wave still released and every generation still live; ``now`` for a wave this deployment releases and a
    generation it deploys first. ``now`` is None when the program cannot know when its changes take effect (a
    preview deploys nothing): those get no entry. A wave or generation that the last deployment already ran
    without a record of when keeps none (its time is not now)."""
    was_released = {s.wave for s in last.pools.values()
                    if s.held is False and s.role != rf.CANARY_ROLE and s.wave is not None}
    waves: dict[int, datetime] = {}
    for wave in sorted(released_waves(spec)):
        if wave in last.timeline.waves_released:
            waves[wave] = last.timeline.waves_released[wave]
        elif wave not in was_released and now is not None:
            waves[wave] = now
    generations: dict[str, dict[int, datetime]] = {}
    for pool in spec.nodePools:
        recorded = last.timeline.generations_deployed.get(pool.name, {})
        summary = last.pools.get(pool.name)
        was_live = {g.id for g in summary.generations if not g.retired} if summary is not None else set()
        times: dict[int, datetime] = {}
        for gen in pool.live_generations:
            if gen.id in recorded:
                times[gen.id] = recorded[gen.id]
            elif gen.id not in was_live and now is not None:
                times[gen.id] = now
        if times:
            generations[pool.name] = times
    return rf.Timeline(waves, generations, drivers_run(spec, last), held_on_declared(spec, last))


def held_on_declared(spec: FleetSpec, last: rf.StackOutputs) -> dict[str, str]:
    """Per pool, the driver ``promotion.runningToday`` declares where this deployment or an earlier one held the
    pool pinned to it (``rf.Timeline.held_on_declared``): not a run, the driver the pool ran before the stack, which
    it may go back to after moving away through the gate. Forgotten once the declaration names another driver or
    none."""
    declared = spec.promotion.runningToday.driver if spec.promotion and spec.promotion.runningToday else None
    if declared is None:
        return {}
    out: dict[str, str] = {}
    for pool in spec.nodePools:
        target = spec.pool_target(pool)
        if last.timeline.held_on_declared.get(pool.name) == declared or (target.held and target.driver == declared):
            out[pool.name] = declared
    return out


def drivers_run(spec: FleetSpec, last: rf.StackOutputs) -> dict[str, tuple[str, ...]]:
    """Per pool, the drivers it ran that still count (docs/validation.md, What "ran" means): what the last
    deployment recorded, then the driver this deployment releases the pool to (a released pool's target, which the
    prod gate judged: admitted by an attestation, or one the pool ran before); the most recent
    ``rf.DRIVERS_REMEMBERED`` kept, each driver at its latest place. A held pool's pin, an older live generation's
    driver and ``promotion.runningToday`` are config, so they never add one: a held pool keeps only what it ran
    (a first deployment's held pools ran nothing recorded). A last deployment made before this record existed
    counts what it released each pool to (its pool summary). A pool moved back to a driver it ran is a rollback,
    and the driver it leaves is forgotten: it was rolled back from, so taking it again is a promotion that its
    attestation judges again. A redeployment records the same again. Not a time: a preview states it."""
    out: dict[str, tuple[str, ...]] = {}
    for pool in spec.nodePools:
        summary = last.pools.get(pool.name)
        ran = list(last.timeline.drivers_run.get(pool.name, ()))
        if summary is not None and summary.held is False and pool.name not in last.timeline.drivers_run:
            ran += [summary.driver_version] if summary.driver_version else []
        target = spec.pool_target(pool)
        left = summary.driver_version if summary is not None else None
        if target.driver is not None and left is not None and target.driver != left and target.driver in ran:
            ran = [d for d in ran if d != left]  # rolled back from
        if not target.held and target.driver:
            ran.append(target.driver)
        remembered: list[str] = []
        for driver in reversed(ran):  # the most recent run of each driver counts
            if driver not in remembered:
                remembered.insert(0, driver)
        out[pool.name] = tuple(remembered[-rf.DRIVERS_REMEMBERED:])
    return out


def stack_outputs(spec: FleetSpec, recorded: rf.Timeline | None = None) -> rf.StackOutputs:
    """Everything the program exports (``engine_contracts.resource_facts.outputs``), from the spec and what this
    deployment records (``timeline``; none by default)."""
    targets = [spec.pool_target(pool) for pool in sorted(spec.nodePools, key=lambda p: (p.rollout.wave, p.name))]
    return rf.StackOutputs(
        stage=spec.stage,
        cluster=spec.cluster.name,
        driver_version=spec.driver.version,
        pools={pool.name: pool_summary(spec, pool) for pool in spec.nodePools},
        released_pools=tuple(t.pool for t in targets if not t.held),
        held_pools=tuple(t.pool for t in targets if t.held),
        cloud_pools=cloud_pool_records(spec),
        operator_version=spec.gpuOperator.chartVersion,
        per_pool_drivers=owned_per_pool(spec),
        previous_driver_version=spec.driver.previousVersion or "",
        timeline=recorded if recorded is not None else rf.Timeline(),
    )


# ---------------------------------------------------------------- the webhook's Secret (announcements/)

OFFLINE_SECRET = "(a Pulumi secret: only the engine decrypts it)"  # the webhook URL where the engine is not at hand


def webhook_secret(spec: FleetSpec) -> tuple[dict[str, str], dict[str, str]] | None:
    """The Secret (metadata, stringData) that holds the webhook URL the stack gives as a Pulumi secret
    (``notifications.webhook.url``), where the deploy step and the in-cluster guard read it; None where the stack
    gives none (the team fills the Secret). Offline the URL is ciphertext, which only the engine decrypts: a
    placeholder stands in for it."""
    webhook = spec.notifications.webhook if spec.notifications is not None else None
    if webhook is None or webhook.url is None:
        return None
    url = webhook.url if isinstance(webhook.url, str) else OFFLINE_SECRET
    return {"name": webhook.secret, "namespace": WEBHOOK_NAMESPACE}, {WEBHOOK_SECRET_KEY: url}
