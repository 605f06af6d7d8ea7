"""Compatibility against the live cluster (runbook section 1): gpu-supported-by-driver, serving-images-cuda,
operator-supports-driver, kernel-precompiled, attested-kernel, fabric-manager, mig-timeslicing, dcgm-exporter,
change-ticket.

The answers come from :mod:`gpu_knowledge.compat` (driver, CUDA, operator and Fabric Manager tables, each with its
source); this module finds what the cluster runs: GPU products, serving images, the operator's release,
kernels, NVSwitch systems, MIG and GPU sharing.
"""

from __future__ import annotations

import re

from checks import precompiled
from checks.inventory import Inventory
from checks.objects import (
    Obj,
    labels_of,
    name_of,
    pod_containers,
    status_of,
    template_containers,
)
from checks.metadata import COMPATIBILITY, check
from checks.registry import Presence, RegistryAnswers
from checks.results import Finding, failed, few, inconclusive, passed, warned
from engine_contracts import attestation
from gpu_knowledge import compat, gpu_products, labels
from renderers import manifests
from fleetspec import serving
from fleetspec.discipline import utc_now
from fleetspec.model import DriverOwner, NodePool, Stage
from vocabulary.check_ids import CheckId

# CUDA in common image tags: "cu126" (12.6), "cuda12.8", "cuda-12.4.1".
_CU_TAG = re.compile(r"(?:^|[^a-z])cu(\d{2})(\d)(?:[^0-9]|$)")
_CUDA_TAG = re.compile(r"cuda-?(\d{1,2}\.\d{1,2}(?:\.\d{1,3})?)")


def image_cuda(image: str, declared: dict[str, str]) -> str | None:
    """CUDA of an image: as the stack declares it, else read from the tag; None when unknown."""
    if image in declared:
        return declared[image]
    tag = image.rsplit("/", 1)[-1].partition(":")[2].lower()
    match = _CUDA_TAG.search(tag)
    if match:
        return match.group(1)
    match = _CU_TAG.search(tag)
    if match:
        return f"{match.group(1)}.{match.group(2)}"
    return None


def _images(inv: Inventory) -> set[str]:
    declared = {m.image for m in inv.spec.models}
    found = set()
    for containers in [pod_containers(p) for p in inv.pods] + [template_containers(d) for d in inv.deployments]:
        for container in containers:
            image = container.get("image", "")
            if image in declared or serving.is_model_server(image):
                found.add(image)
    return found | declared


@check(CheckId.GPU_SUPPORTED_BY_DRIVER, COMPATIBILITY)
def check_gpu_supported_by_driver(inv: Inventory) -> list[Finding]:
    spec = inv.spec
    by_product: dict[tuple[str, str], list[Obj]] = {}
    unlabelled = []
    for node in inv.pool_nodes:
        product = labels_of(node).get(labels.GPU_PRODUCT)
        if not product:
            unlabelled.append(name_of(node))
            continue
        # Every pool ends on the stack's target driver (held pools in a later wave), so check that one.
        by_product.setdefault((product, spec.driver.version), []).append(node)
    results = []
    for (product, driver), nodes in sorted(by_product.items()):
        answer = compat.supports(driver, product)
        status = passed if answer.yes else failed if answer.no else warned
        results.append(status(product, f"{answer.reason} ({len(nodes)} node(s))"))
    if unlabelled:
        results.append(warned("unlabelled nodes", f"{len(unlabelled)} node(s) without "
                              f"{labels.GPU_PRODUCT}: {', '.join(sorted(unlabelled)[:5])}"))
    return results


@check(CheckId.SERVING_IMAGES_CUDA, COMPATIBILITY)
def check_serving_images_cuda(inv: Inventory) -> list[Finding]:
    spec = inv.spec
    target = spec.driver.version
    declared = {m.image: m.cudaVersion for m in spec.models}
    forward = {m.image for m in spec.models if m.cudaForwardCompat}
    results = []
    for image in sorted(_images(inv)):
        cuda = image_cuda(image, declared)
        if cuda is None:
            results.append(warned(image, "CUDA version unknown (not declared in the stack, "
                                  "not in the tag): check it before the upgrade"))
            continue
        answer = compat.cuda_runs_on(cuda, target)
        if answer.yes:
            results.append(passed(image, f"CUDA {cuda}: {answer.reason}"))
        elif answer.no and image in forward:
            bridge = compat.forward_compat_supported(cuda, target)
            status = passed if bridge.yes else failed
            results.append(status(image, f"CUDA {cuda} through cuda-compat: {bridge.reason}"))
        elif answer.no:
            results.append(failed(image, f"CUDA {cuda}: {answer.reason}"))
        else:
            results.append(warned(image, f"CUDA {cuda}: {answer.reason}"))
    return results


@check(CheckId.OPERATOR_SUPPORTS_DRIVER, COMPATIBILITY)
def check_operator_supports_driver(inv: Inventory) -> list[Finding]:
    spec = inv.spec
    live = inv.operator_version
    version = live or spec.gpuOperator.chartVersion
    where = f"running {live}" if live else f"operator Deployment not found; using the stack's {version}"
    if live and live.lstrip("v") != spec.gpuOperator.chartVersion.lstrip("v"):
        where += f" (the stack declares {spec.gpuOperator.chartVersion})"
    answer = compat.operator_lists(version, spec.driver.version)
    status = {
        compat.OperatorSupport.LISTED: passed,
        compat.OperatorSupport.BRANCH_ONLY: warned,
        compat.OperatorSupport.UNSUPPORTED: failed,
        compat.OperatorSupport.UNKNOWN: warned,
    }[answer.support]
    return [status(f"gpu-operator {version}", f"{answer.reason}; {where}")]


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status_of(pod).get("conditions") or [])


@check(CheckId.KERNEL_PRECOMPILED, COMPATIBILITY)
def check_kernel_precompiled(inv: Inventory) -> list[Finding]:
    """The nodes' kernels against the driver the pool moves to: with precompiled drivers, an image tagged
    ``<branch>-<kernel>-<os>`` of the target branch for each kernel and OS the nodes report
    (``status.nodeInfo.kernelVersion``, ``osImage``), running now or found in the registry
    (:mod:`checks.precompiled`); otherwise the driver container compiles at start, which needs the kernel's
    headers: a driver pod Ready on a node of that kernel shows they were there."""
    spec = inv.spec
    images = precompiled.needed(inv)
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        kernels = precompiled.by_kernel(nodes)
        text = ", ".join(sorted({kernel for kernel, _ in kernels})) or "no nodes"
        if spec.driver.owner == DriverOwner.IMAGE:
            results.append(passed(pool.name, f"kernel {text}; the node image carries the driver"))
        elif pool.name not in images:
            results.append(_built_against(inv, pool.name, kernels))
        else:
            results.append(_precompiled_for_target(images[pool.name], inv.registry))
    return results


@check(CheckId.ATTESTED_KERNEL, COMPATIBILITY)
def check_attested_kernel(inv: Inventory) -> list[Finding]:
    """A prod pool's nodes' kernels against the kernels the canary attested the pool's driver on: the same
    release series (``5.15.0-*-azure``), the same kernel exactly where modules are precompiled (an image is
    built per kernel). The pack compares every install factor the stack states; the running kernel only the
    nodes show, so it is judged here, before the train's `up` (a gating check). A difference passes only
    where the pool's waiver accepts ``kernel`` for this driver, with its ticket, until it expires."""
    spec = inv.spec
    attested = inv.attested
    if spec.stage != Stage.PROD or spec.promotion is None:
        return [passed("stack", "not a prod stack with a canary: no attestation to compare kernels with")]
    if spec.driver.owner == DriverOwner.IMAGE:
        return [passed("stack", "the node image carries the driver and the kernel it was built for; the gate "
                                "compares node images")]
    if attested.folder is None:
        return [inconclusive("stack", "no project folder was given to read the canary's attestations from: the "
                                      "nodes' kernels are not compared with the attested ones")]
    precompiled = spec.gpuOperator.usePrecompiled
    results = []
    for pool in spec.nodePools:
        target = spec.pool_target(pool).driver
        if spec.pool_held(pool) or target is None:
            results.append(passed(pool.name, "held: it takes no driver in this change"))
            continue
        sealed = attested.by_driver.get(target)
        if sealed is None:
            why = attested.unreadable.get(target, "not read")
            results.append(inconclusive(pool.name, f"no readable attestation of driver {target} ({why}); the gate "
                                                   "refuses the promotion without one"))
            continue
        results.append(_kernels_against(inv, pool, target, sealed, precompiled))
    return results


def _kernels_against(inv: Inventory, pool: NodePool, driver: str, sealed: attestation.Attestation,
                     precompiled: bool) -> Finding:
    arch = compat.architecture(pool.gpuProduct or "").value
    canary_pools = [p for p in sealed.pools if p.architecture == arch]
    attested_kernels = sorted(frozenset().union(*(p.kernels for p in canary_pools)))
    if not attested_kernels:
        return inconclusive(pool.name, f"the attestation of {driver} records no kernel for a {arch or 'known'} "
                                       "canary pool: nothing to compare the nodes' kernels with")
    running: dict[str, list[str]] = {}
    for node in inv.nodes_of_pool(pool.name):
        kernel = (status_of(node).get("nodeInfo") or {}).get("kernelVersion")
        running.setdefault(kernel or "?", []).append(name_of(node))
    if not running:
        return inconclusive(pool.name, "no node of the pool to compare with the attested kernels")
    if precompiled:
        how, allowed = "exactly (precompiled modules are built per kernel)", set(attested_kernels)
        other = {k: nodes for k, nodes in running.items() if k not in allowed}
    else:
        how = "by release series (the driver container builds against the running kernel)"
        series = {attestation.kernel_series(k) for k in attested_kernels}
        other = {k: nodes for k, nodes in running.items() if attestation.kernel_series(k) not in series}
    canary = ", ".join(sorted(p.name for p in canary_pools))
    evidence = {"attested": attested_kernels, "running": sorted(running), "compared": how}
    if not other:
        return passed(pool.name, f"kernel {', '.join(sorted(running))} matches the kernel canary pool {canary} ran "
                                 f"{driver} on ({', '.join(attested_kernels)}), {how}", evidence)
    seen = "; ".join(f"{k} on {few(nodes, 3)}" for k, nodes in sorted(other.items()))
    waiver = inv.spec.promotion.waivers.get(pool.name) if inv.spec.promotion is not None else None
    if waiver is not None and "kernel" in waiver.accept and waiver.holds_for(driver, utc_now().date()):
        return passed(pool.name, f"kernel {seen} differs from the attested {', '.join(attested_kernels)}, accepted "
                                 f"by promotion.waivers.{pool.name} (ticket {waiver.ticket}): {waiver.reason}", evidence)
    return failed(pool.name, f"the nodes run kernel {seen}; the canary attested {driver} on "
                             f"{', '.join(attested_kernels)} (canary pool {canary}), compared {how}: let the canary "
                             "run this kernel and re-attest, or accept the difference with a reasoned "
                             f"promotion.waivers.{pool.name} that accepts kernel", evidence)


def _built_against(inv: Inventory, pool: str, by_kernel: dict[tuple[str, str | None], list[Obj]]) -> Finding:
    """The build path: each kernel needs its headers, and a Ready driver pod on a node of that kernel built
    against them (the container compiles the modules at every start)."""
    unproven = sorted(kernel for (kernel, _), nodes in by_kernel.items()
                      if not any(_ready(p) for n in nodes for p in inv.driver_pods_on(name_of(n))))
    kernels = ", ".join(sorted(kernel for kernel, _ in by_kernel)) or "no nodes"
    if unproven:
        return warned(pool, f"the driver container compiles against the kernel at start, and no driver pod is Ready "
                      f"on a node of kernel {', '.join(unproven)}: make sure its headers install (linux-headers-"
                      f"{unproven[0]} from the OS's package repositories, or a repoConfig mirror), or use a "
                      "precompiled driver")
    return passed(pool, f"kernel {kernels}; the driver container compiles against it, and a Ready driver pod on each "
                  "kernel shows its headers install")


def _precompiled_for_target(images: precompiled.PoolImages, registry: RegistryAnswers) -> Finding:
    """Precompiled drivers: for each kernel and OS of the pool's nodes, the target branch's image, running now or
    in the registry; one the registry does not have fails, naming the kernel."""
    pool, branch = images.pool, images.branch
    missing, unknown_os, unsure, present = [], [], [], []
    for item in images.kernels:
        if item.image is None:
            unknown_os.append(item.kernel)
            continue
        answer = registry.answers.get(str(item.image))
        if item.running:
            present.append(f"{item.image.tag} (running)")
        elif answer is not None and answer.presence == Presence.FOUND:
            present.append(f"{item.image.tag} ({answer.detail})")
        elif answer is not None and answer.presence == Presence.MISSING:
            missing.append(f"kernel {item.kernel} ({item.nodes} node(s)): {item.image}: {answer.detail}")
        else:
            why = answer.detail if answer is not None else "the registry was not asked"
            unsure.append(f"kernel {item.kernel}: {item.image}: {why}")
    notes = f" ({'; '.join(registry.notes)})" if registry.notes else ""  # a pull secret not read, say
    if missing:
        return failed(pool, f"the target branch {branch} has no precompiled driver for {'; '.join(missing)}: the "
                      "operator would leave those nodes without a driver; move them to a kernel NVIDIA publishes an "
                      "image for, or build the driver (usePrecompiled: false)" + notes)
    if unknown_os:
        return warned(pool, f"precompiled drivers in use; the OS of the nodes of kernel {', '.join(unknown_os)} is no "
                      "Ubuntu or RHEL release: no precompiled image is named for it")
    if unsure:
        return warned(pool, f"could not confirm the target branch {branch}'s precompiled driver for {'; '.join(unsure)}"
                      ": confirm the registry has it before the change (a missing one leaves the node without a "
                      "driver)" + notes)
    return passed(pool, f"precompiled driver of branch {branch} present for every kernel: {', '.join(present)}")


def _gpu_count(node: Obj) -> int | None:
    value = labels_of(node).get(labels.GPU_COUNT, "")
    return int(value) if value.isdigit() else None


def _nvswitch_nodes(inv: Inventory, pool: NodePool) -> tuple[list[str], list[str]]:
    """Nodes of the pool that say they are NVSwitch systems: by our pool label, by GFD's product name and
    GPU count (:mod:`gpu_knowledge.gpu_products`: the product names of HGX/DGX and GB200 systems, with sources)."""
    by_label, by_product = [], []
    for node in inv.nodes_of_pool(pool.name):
        node_labels = labels_of(node)
        if node_labels.get(labels.POOL_NVSWITCH) == "true":
            by_label.append(name_of(node))
        elif gpu_products.is_nvswitch_system(node_labels.get(labels.GPU_PRODUCT, ""), _gpu_count(node)):
            by_product.append(name_of(node))
    return by_label, by_product


@check(CheckId.FABRIC_MANAGER, COMPATIBILITY)
def check_fabric_manager(inv: Inventory) -> list[Finding]:
    spec = inv.spec
    results = []
    for pool in spec.nodePools:
        by_label, by_product = _nvswitch_nodes(inv, pool)
        if not pool.nvswitch:
            if by_label:
                results.append(failed(pool.name, f"nodes carry {labels.POOL_NVSWITCH}=true "
                                      f"({few(by_label)}) but the stack says nvswitch: false; declare "
                                      "nvswitch and where Fabric Manager comes from"))
            elif by_product:
                results.append(warned(pool.name, f"GPU product of {few(by_product)} is one "
                                      "of an NVSwitch system (HGX/DGX board or GB200) but the stack says "
                                      "nvswitch: false; if it has NVSwitches, Fabric Manager must move with the "
                                      "driver"))
            continue
        source = manifests.fabric_manager_source(spec, pool)
        target = spec.pool_target(pool).driver
        nodes = len(inv.nodes_of_pool(pool.name))
        if spec.driver.owner == DriverOwner.OPERATOR and source != "driver-container":
            results.append(failed(pool.name, f"Fabric Manager from '{source}' with an "
                                  "operator-owned driver: FM must match the driver exactly; use the driver "
                                  "container's FM"))
        elif spec.driver.owner == DriverOwner.IMAGE and source == "driver-container":
            results.append(failed(pool.name, "driver from the node image but Fabric Manager "
                                  "from the driver container, which does not run there"))
        elif source == "host":
            answer = compat.fabric_manager_matches(pool.fabricManagerVersion, target)
            status = passed if answer.yes else failed
            results.append(status(pool.name, f"{nodes} NVSwitch node(s); host-installed Fabric "
                                  f"Manager: {answer.reason}"))
        else:
            results.append(passed(pool.name, f"{nodes} NVSwitch node(s); Fabric Manager comes "
                                  f"with the {'driver container' if source == 'driver-container' else source} "
                                  "and moves with the driver"))
    if not results:
        results.append(passed("cluster", "no NVSwitch pools in the stack or on its nodes"))
    return results


def _sharing(node: Obj) -> str | None:
    """How the node's GPUs are split or shared, or None when they are whole GPUs, one pod each.

    GFD labels ``nvidia.com/mig.strategy`` on every node under the operator's default ``single``
    strategy, MIG or not, so the strategy alone says nothing; MIG is in use where a layout other than
    ``all-disabled`` is configured, MIG devices are advertised (``nvidia.com/mig-*`` resources, the
    ``mixed`` strategy) or GFD names a MIG slice as the product (``single``: ``...-MIG-1g.5gb``).
    Time-slicing or MPS shows as ``nvidia.com/gpu.replicas`` above 1 or a sharing strategy."""
    node_labels = labels_of(node)
    config = node_labels.get(labels.MIG_CONFIG)
    if config and config != labels.MIG_CONFIG_DISABLED:
        return f"MIG layout {labels.MIG_CONFIG}={config}"
    status = status_of(node)
    mig_resources = sorted({key for section in ("allocatable", "capacity") for key in (status.get(section) or {})
                            if key.startswith(labels.MIG_RESOURCE_PREFIX)})
    if mig_resources:
        return f"MIG devices advertised ({', '.join(mig_resources[:2])})"
    strategy = node_labels.get(labels.MIG_STRATEGY)
    if strategy == "mixed":
        return f"{labels.MIG_STRATEGY}=mixed"
    product = node_labels.get(labels.GPU_PRODUCT, "")
    if strategy == "single" and "-MIG-" in product:
        return f"MIG single: {labels.GPU_PRODUCT}={product}"
    replicas = node_labels.get(labels.GPU_REPLICAS, "")
    if replicas.isdigit() and int(replicas) > 1:
        return f"{labels.GPU_REPLICAS}={replicas}"
    sharing = node_labels.get(labels.GPU_SHARING_STRATEGY)
    if sharing and sharing != "none":
        return f"{labels.GPU_SHARING_STRATEGY}={sharing}"
    return None


@check(CheckId.MIG_TIMESLICING, COMPATIBILITY)
def check_mig_timeslicing(inv: Inventory) -> list[Finding]:
    found = [f"{name_of(node)} {how}" for node in inv.pool_nodes if (how := _sharing(node)) is not None]
    if found:
        return [warned("cluster", f"re-check MIG layouts / time-slicing on the new branch "
                       f"(release notes): {few(found, 3)}; after the upgrade verify's gpu-count compares what each "
                       "upgraded node advertises with its pool's declaration (migConfig) and its nodes not yet "
                       "upgraded")]
    return [passed("cluster", "whole GPUs on the stack's nodes: no MIG layout in use, no "
                   "time-slicing or MPS")]


def _dcgm_exporter_images(inv: Inventory) -> set[str]:
    """DCGM Exporter images the cluster runs: the operator's DaemonSet, or a standalone install's pods."""
    containers = [c for ds in inv.operator_daemonsets for c in template_containers(ds)]
    containers += [c for p in inv.pods for c in pod_containers(p)]
    return {c.get("image", "") for c in containers
            if c.get("image", "").split("@", 1)[0].rpartition(":")[0].endswith("/dcgm-exporter")}


def _image_tag(image: str) -> str:
    return image.split("@", 1)[0].rpartition(":")[2]


@check(CheckId.DCGM_EXPORTER, COMPATIBILITY)
def check_dcgm_exporter(inv: Inventory) -> list[Finding]:
    """Before the change, the DCGM Exporter the cluster runs against the one the stack declares
    (``gpuOperator.dcgmExporterVersion``: a different one fails, the pack judged the declared one) and its DCGM
    against the target branch (runbook: "DCGM Exporter still works on the new branch"): at least the DCGM an
    operator release listing that branch ships (gpu_knowledge.compat)."""
    target = inv.spec.driver.version
    declared = inv.spec.gpuOperator.dcgmExporterVersion
    images = sorted(_dcgm_exporter_images(inv))
    if not images:
        if declared is not None:
            return [warned("cluster", f"the stack declares DCGM Exporter {declared} (gpuOperator.dcgmExporterVersion), "
                           "but none runs on the cluster: verify's dcgm-metrics needs one")]
        return [passed("cluster", "no DCGM Exporter runs on the cluster: no GPU metrics exporter to keep working "
                       "(verify's dcgm-metrics needs one)")]
    results = []
    for image in images:
        tag = _image_tag(image)
        if declared is not None and tag != declared:
            results.append(failed(image, f"runs tag '{tag}', the stack declares gpuOperator.dcgmExporterVersion "
                                  f"'{declared}': the pack judged the declared exporter against driver {target}, not "
                                  "this one; declare what runs, or roll the exporter to the declaration"))
            continue
        dcgm = compat.dcgm_of_exporter_tag(tag)
        if dcgm is None:
            results.append(warned(image, f"cannot read DCGM's version from the tag (<DCGM>-<exporter>-<os>): check "
                                  f"it supports R{target.split('.')[0]} before the change"))
            continue
        answer = compat.dcgm_validated(dcgm, target)
        undeclared = "" if declared is not None else "; the stack declares no gpuOperator.dcgmExporterVersion"
        if answer.yes:
            results.append(passed(image, answer.reason + undeclared))
        else:
            results.append(warned(image, f"{answer.reason}: upgrade the DCGM Exporter (the operator chart pins it: "
                                  "dcgmExporter.version) before the driver, or its metrics may stop on the new "
                                  f"branch{undeclared}"))
    return results


@check(CheckId.CHANGE_TICKET, COMPATIBILITY)
def check_change_ticket(inv: Inventory) -> list[Finding]:
    spec = inv.spec
    if spec.changeTicket:
        return [passed("stack", f"change ticket {spec.changeTicket}")]
    # A canary's change reaches a production cluster too: every stage needs its approved change.
    return [failed("stack", f"the {spec.stage.value} stack needs changeTicket set (and model owners told)")]

