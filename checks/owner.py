"""Who owns the driver, and what runs where: pool-membership, cluster-policy, driver-owner,
per-pool-mode, two-driver-owners, driver-versions, node-image, kernel-precompiled, fabric-manager,
mig-timeslicing."""

from __future__ import annotations

from collections import Counter

from checks.compatibility import live_operator_version
from checks.inventory import Inventory, Obj, labels_of, name_of, pool_selectors_text, selector_matches
from checks.nodestate import node_driver_version
from checks.results import CheckResult, failed, passed, warned
from spec import compat, gpu_products, labels, manifests
from spec.membership import CLOUD_POOL_LABELS, Via
from spec.model import Cloud, ClusterPolicyMode, DriverOwner, NodePool, Stage
from spec.versions import parse_chart

KERNEL_LABEL = "feature.node.kubernetes.io/kernel-version.full"


def _short(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def operator_driver_targets(inv: Inventory, node: Obj) -> str | None:
    """Why the operator's containerized driver would run on ``node`` (None: it would not)."""
    if inv.driver_pods_on(name_of(node)):
        return "a driver pod runs on it"
    policy = inv.cluster_policy
    driver = ((policy or {}).get("spec") or {}).get("driver") or {}
    if not policy or driver.get("enabled") is False:
        return None
    node_labels = labels_of(node)
    if labels_of(node).get(labels.DEPLOY_DRIVER) == "false":
        return None
    if driver.get("useNvidiaDriverCRD"):
        for nvd in inv.nvidia_drivers or []:
            selector = (nvd.get("spec") or {}).get("nodeSelector") or {labels.GPU_PRESENT: "true"}
            if selector_matches({"matchLabels": selector}, node_labels):
                return f"NVIDIADriver {name_of(nvd)} selects it"
        return None
    if node_labels.get(labels.GPU_PRESENT) == "true":
        return "ClusterPolicy driver.enabled is true for every GPU node"
    return None


def host_driver(node: Obj) -> bool:
    return labels_of(node).get(labels.DEPLOY_DRIVER) == "pre-installed"


def check_driver_owner(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    declared = spec.driver.owner
    policy = inv.cluster_policy
    driver = ((policy or {}).get("spec") or {}).get("driver") or {}
    policy_text = (
        "no ClusterPolicy (CRD not installed)" if inv.cluster_policies is None
        else f"no ClusterPolicy {manifests.CLUSTER_POLICY_NAME}" if policy is None
        else f"ClusterPolicy driver.enabled={driver.get('enabled', True)} version={driver.get('version', '-')}"
        f" useNvidiaDriverCRD={bool(driver.get('useNvidiaDriverCRD'))}"
    )
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not nodes:
            results.append(failed("driver-owner", pool.name, "no node of the pool found (looked for "
                                  f"{pool_selectors_text(spec, [pool])})"))
            continue
        targeted = [n for n in nodes if operator_driver_targets(inv, n)]
        hosts = [n for n in nodes if host_driver(n)]
        seen = f"{len(targeted)}/{len(nodes)} nodes targeted by the operator's driver, {len(hosts)} with a host driver"
        if declared == DriverOwner.OPERATOR and len(targeted) < len(nodes):
            missing = [name_of(n) for n in nodes if n not in targeted]
            results.append(failed("driver-owner", pool.name, f"stack says operator, but the operator's driver "
                                  f"does not target {_short(missing)} ({policy_text})"))
        elif declared == DriverOwner.IMAGE and targeted:
            results.append(failed("driver-owner", pool.name, f"stack says image, but the operator's driver targets "
                                  f"{_short([name_of(n) for n in targeted])}: set driver.enabled=false ({policy_text})"))
        else:
            results.append(passed("driver-owner", pool.name, f"{declared.value}, as declared: {seen}; {policy_text}"))
    return results


def check_two_driver_owners(inv: Inventory) -> list[CheckResult]:
    both = []
    for node in inv.gpu_nodes:
        reason = operator_driver_targets(inv, node)
        if host_driver(node) and reason:
            both.append(f"{name_of(node)} ({reason})")
    if both:
        return [failed("two-driver-owners", "cluster", f"{len(both)} node(s) have a host driver "
                       f"({labels.DEPLOY_DRIVER}=pre-installed) that the operator's driver also targets: "
                       f"{_short(both, 3)}")]
    return [passed("two-driver-owners", "cluster", f"no node has two driver owners ({len(inv.gpu_nodes)} GPU nodes)")]


def check_driver_versions(inv: Inventory) -> list[CheckResult]:
    """Driver per node; a node of the stack's pools on neither the previous nor the target driver fails."""
    spec = inv.spec
    expected = {v for v in (spec.driver.version, spec.driver.previousVersion) if v}
    results = []
    groups: dict[str, list[Obj]] = {}
    for node in inv.gpu_nodes:
        groups.setdefault(inv.pool_of(node) or "(no pool)", []).append(node)
    ours = {p.name for p in spec.nodePools}
    for pool, nodes in sorted(groups.items()):
        versions = Counter(node_driver_version(n) for n in nodes)
        unlabelled = [name_of(n) for n in nodes if node_driver_version(n) is None]
        text = ", ".join(f"{v} x{c}" for v, c in sorted(versions.items(), key=lambda i: str(i[0])) if v)
        stray = sorted(v for v in versions if v and pool in ours and v not in expected)
        missing = (f"; {len(unlabelled)} node(s) without GFD driver labels (run nvidia-smi there): "
                   f"{_short(unlabelled)}" if unlabelled else "")
        if stray:
            results.append(failed("driver-versions", pool, f"{text}: {', '.join(stray)} is neither the previous "
                                  f"nor the target driver ({', '.join(sorted(expected))}); find out who changed it"
                                  + missing))
        elif unlabelled:
            results.append(warned("driver-versions", pool, f"{text or 'no version'}{missing}"))
        else:
            results.append(passed("driver-versions", pool, text))
    return results


def _precompiled_for(inv: Inventory, nodes: list[Obj]) -> bool:
    """Whether the operator builds the driver for ``nodes`` from precompiled packages.

    With ``useNvidiaDriverCRD`` every NVIDIADriver carries its own ``spec.usePrecompiled`` (the
    ClusterPolicy's driver section is not rendered then); otherwise the ClusterPolicy's applies.
    """
    driver = ((inv.cluster_policy or {}).get("spec") or {}).get("driver") or {}
    if not driver.get("useNvidiaDriverCRD"):
        return bool(driver.get("usePrecompiled"))
    for nvd in inv.nvidia_drivers or []:
        nvd_spec = nvd.get("spec") or {}
        selector = nvd_spec.get("nodeSelector") or {labels.GPU_PRESENT: "true"}
        if nvd_spec.get("usePrecompiled") and any(selector_matches({"matchLabels": selector}, labels_of(n))
                                                  for n in nodes):
            return True
    return False


def check_kernel_precompiled(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    precompiled_ds = [ds for ds in inv.operator_daemonsets if labels_of(ds).get("nvidia.com/precompiled") == "true"]
    covered = set()
    for ds in precompiled_ds:
        selector = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        if KERNEL_LABEL in selector:
            covered.add(selector[KERNEL_LABEL])
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        in_use = spec.gpuOperator.usePrecompiled or bool(precompiled_ds) or _precompiled_for(inv, nodes)
        kernels = sorted({((n.get("status") or {}).get("nodeInfo") or {}).get("kernelVersion", "?") for n in nodes})
        text = ", ".join(kernels) or "no nodes"
        if spec.driver.owner == DriverOwner.IMAGE:
            results.append(passed("kernel-precompiled", pool.name, f"kernel {text}; the node image carries the driver"))
        elif not in_use:
            results.append(passed("kernel-precompiled", pool.name, f"kernel {text}; the driver container compiles "
                                  "against it (needs kernel headers on the node image)"))
        else:
            missing = [kv for kv in kernels if kv not in covered]
            if missing:
                results.append(failed("kernel-precompiled", pool.name, f"precompiled drivers in use but no "
                                      f"precompiled driver DaemonSet for kernel {', '.join(missing)}"))
            else:
                results.append(passed("kernel-precompiled", pool.name, f"kernel {text}; precompiled driver present"))
    return results


def _gpu_count(node: Obj) -> int | None:
    value = labels_of(node).get(labels.GPU_COUNT, "")
    return int(value) if value.isdigit() else None


def _nvswitch_nodes(inv: Inventory, pool: NodePool) -> tuple[list[str], list[str]]:
    """Nodes of the pool that say they are NVSwitch systems: by our pool label, by GFD's product name and
    GPU count (:mod:`spec.gpu_products`: the product names of HGX/DGX and GB200 systems, with sources)."""
    by_label, by_product = [], []
    for node in inv.nodes_of_pool(pool.name):
        node_labels = labels_of(node)
        if node_labels.get(labels.POOL_NVSWITCH) == "true":
            by_label.append(name_of(node))
        elif gpu_products.is_nvswitch_system(node_labels.get(labels.GPU_PRODUCT, ""), _gpu_count(node)):
            by_product.append(name_of(node))
    return by_label, by_product


def check_fabric_manager(inv: Inventory) -> list[CheckResult]:
    spec = inv.spec
    results = []
    for pool in spec.nodePools:
        by_label, by_product = _nvswitch_nodes(inv, pool)
        if not pool.nvswitch:
            if by_label:
                results.append(failed("fabric-manager", pool.name, f"nodes carry {labels.POOL_NVSWITCH}=true "
                                      f"({_short(by_label)}) but the stack says nvswitch: false; declare "
                                      "nvswitch and where Fabric Manager comes from"))
            elif by_product:
                results.append(warned("fabric-manager", pool.name, f"GPU product of {_short(by_product)} is one "
                                      "of an NVSwitch system (HGX/DGX board or GB200) but the stack says "
                                      "nvswitch: false; if it has NVSwitches, Fabric Manager must move with the "
                                      "driver"))
            continue
        source = manifests.fabric_manager_source(spec, pool)
        target = spec.pool_driver_version(pool)
        nodes = len(inv.nodes_of_pool(pool.name))
        if spec.driver.owner == DriverOwner.OPERATOR and source != "driver-container":
            results.append(failed("fabric-manager", pool.name, f"Fabric Manager from '{source}' with an "
                                  "operator-owned driver: FM must match the driver exactly; use the driver "
                                  "container's FM"))
        elif spec.driver.owner == DriverOwner.IMAGE and source == "driver-container":
            results.append(failed("fabric-manager", pool.name, "driver from the node image but Fabric Manager "
                                  "from the driver container, which does not run there"))
        elif source == "host":
            answer = compat.fabric_manager_matches(pool.fabricManagerVersion, target)
            status = passed if answer.yes else failed
            results.append(status("fabric-manager", pool.name, f"{nodes} NVSwitch node(s); host-installed Fabric "
                                  f"Manager: {answer.reason}"))
        else:
            results.append(passed("fabric-manager", pool.name, f"{nodes} NVSwitch node(s); Fabric Manager comes "
                                  f"with the {'driver container' if source == 'driver-container' else source} "
                                  "and moves with the driver"))
    if not results:
        results.append(passed("fabric-manager", "cluster", "no NVSwitch pools in the stack or on its nodes"))
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
    if config and config != "all-disabled":
        return f"MIG layout {labels.MIG_CONFIG}={config}"
    status = node.get("status") or {}
    mig_resources = sorted({key for section in ("allocatable", "capacity") for key in (status.get(section) or {})
                            if key.startswith("nvidia.com/mig-")})
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


def check_mig_timeslicing(inv: Inventory) -> list[CheckResult]:
    found = [f"{name_of(node)} {how}" for node in inv.pool_nodes if (how := _sharing(node)) is not None]
    if found:
        return [warned("mig-timeslicing", "cluster", f"re-check MIG layouts / time-slicing on the new branch "
                       f"(release notes): {_short(found, 3)}")]
    return [passed("mig-timeslicing", "cluster", "whole GPUs on the stack's nodes: no MIG layout in use, no "
                   "time-slicing or MPS")]


# ---------------------------------------------------------------- pool membership


def check_pool_membership(inv: Inventory) -> list[CheckResult]:
    """How each pool's nodes were found; nodes found only by the cloud's pool label warn (not yet labelled)."""
    spec = inv.spec
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not nodes:
            results.append(failed("pool-membership", pool.name, "no node of the pool on this cluster (looked for "
                                  f"{pool_selectors_text(spec, [pool])}); wrong cluster or --context, or the pool "
                                  "does not exist yet"))
            continue
        vias = Counter(membership.via for n in nodes if (membership := inv.membership_of(n)) is not None)
        if spec.cluster.cloud == Cloud.EXISTING:
            selector = ",".join(f"{k}={v}" for k, v in sorted((pool.existing.nodeSelector if pool.existing else {})
                                                              .items()))
            results.append(passed("pool-membership", pool.name, f"{len(nodes)} node(s) by the declared nodeSelector "
                                  f"{selector} (on an existing cluster this project never labels the nodes)"))
        elif vias[Via.CLOUD_LABEL]:
            cloud_label = CLOUD_POOL_LABELS[spec.cluster.cloud]
            held = " and the skip label that holds it" if spec.pool_held(pool) else ""
            results.append(warned("pool-membership", pool.name, f"{vias[Via.CLOUD_LABEL]} of {len(nodes)} node(s) "
                                  f"found by the cloud's {cloud_label}, without {labels.POOL}: the first `pulumi up` "
                                  f"of this stack adds it{held} through the pool's node labels"))
        else:
            results.append(passed("pool-membership", pool.name, f"{len(nodes)} node(s) carry {labels.POOL}={pool.name}"))
    return results


# ---------------------------------------------------------------- the ClusterPolicy, by name


def check_cluster_policy(inv: Inventory) -> list[CheckResult]:
    """The ClusterPolicy the stack patches (and the chart creates) is there, alone."""
    spec = inv.spec
    name = manifests.CLUSTER_POLICY_NAME
    names = sorted(name_of(p) for p in inv.cluster_policies or [])
    installs = spec.gpuOperator.clusterPolicy == ClusterPolicyMode.HELM
    if not names:
        what = "the ClusterPolicy CRD is not installed" if inv.cluster_policies is None else "no ClusterPolicy"
        if installs:
            return [warned("cluster-policy", name, f"{what}: this stack installs the GPU Operator chart, which "
                           f"creates {name}")]
        return [failed("cluster-policy", name, f"{what}: the GPU Operator must be installed (its chart creates "
                       f"ClusterPolicy {name}, which the driver checks read"
                       + (" and this stack patches)" if spec.gpuOperator.clusterPolicy == ClusterPolicyMode.PATCH
                          else ")"))]
    if inv.cluster_policy is None:
        return [failed("cluster-policy", name, f"no ClusterPolicy named {name} (found {', '.join(names)}): the "
                       f"stack patches and the operator's chart creates {name}; checks read only that one")]
    if len(names) > 1:
        others = [n for n in names if n != name]
        return [failed("cluster-policy", name, f"{len(names)} ClusterPolicies ({', '.join(names)}): the operator "
                       f"reconciles only one; remove {', '.join(others)}")]
    state = str(((inv.cluster_policy or {}).get("status") or {}).get("state", "?"))
    return [passed("cluster-policy", name, f"ClusterPolicy {name}, state {state}")]


# ---------------------------------------------------------------- per-pool NVIDIADriver mode


def _needs_operator_driver(node: Obj) -> bool:
    node_labels = labels_of(node)
    return (node_labels.get(labels.GPU_PRESENT) == "true"
            and node_labels.get(labels.DEPLOY_DRIVER) not in ("pre-installed", "false"))


def _is_default(nvd: Obj) -> bool:
    return ((nvd.get("spec") or {}).get("default")) is True


def driver_owner_of(inv: Inventory, node: Obj, default_supported: bool) -> str | None:
    """The NVIDIADriver that owns ``node`` in per-pool mode: a non-default one whose selector matches
    (no selector: every GPU node), else the default one (``spec.default: true``, operator v26.7.0+)."""
    node_labels = labels_of(node)
    drivers = inv.nvidia_drivers or []
    for nvd in drivers:
        if _is_default(nvd):
            continue
        selector = (nvd.get("spec") or {}).get("nodeSelector") or {labels.GPU_PRESENT: "true"}
        if selector_matches({"matchLabels": selector}, node_labels):
            return name_of(nvd)
    defaults = [nvd for nvd in drivers if _is_default(nvd)]
    if default_supported and len(defaults) == 1:
        return name_of(defaults[0])
    return None


def check_per_pool_mode(inv: Inventory) -> list[CheckResult]:
    """A stack with one NVIDIADriver per pool needs the cluster in NVIDIADriver mode; the canary never goes
    first without it, and every GPU node outside the stacks' pools keeps a driver owner."""
    spec = inv.spec
    name = manifests.CLUSTER_POLICY_NAME
    if spec.driver.owner != DriverOwner.OPERATOR:
        return [passed("per-pool-mode", "cluster", "the node image owns the driver: no NVIDIADriver is involved")]
    if not spec.gpuOperator.useNvidiaDriverCrd:
        return [passed("per-pool-mode", "cluster", "the stack drives the ClusterPolicy's driver "
                       "(gpuOperator.useNvidiaDriverCrd: false)")]
    canary = spec.stage == Stage.CANARY
    migrate = ("do the migration step first (docs/runbook.md, 'Per-pool driver mode: the migration'): with the "
               "operator already at v26.7.0, and never in the same change as a chart upgrade, enable "
               "useNvidiaDriverCRD with the default NVIDIADriver as the fallback owner of every GPU node, at the "
               "driver the nodes run now")
    policy = inv.cluster_policy
    if policy is None:
        status = failed if canary else warned
        return [status("per-pool-mode", "cluster", f"no ClusterPolicy {name}: cannot tell whether the cluster "
                       "is in per-pool NVIDIADriver mode" + ("; the canary must not go first without it" if canary
                                                              else ""))]
    driver = (policy.get("spec") or {}).get("driver") or {}
    if driver.get("useNvidiaDriverCRD") is not True:
        live = f"ClusterPolicy {name} spec.driver.useNvidiaDriverCRD is {driver.get('useNvidiaDriverCRD', 'unset')}"
        if canary:
            gets = ("no driver (the ClusterPolicy's driver is disabled)" if driver.get("enabled") is False
                    else f"the ClusterPolicy's driver {driver.get('version', '?')}, not {spec.driver.version}")
            return [failed("per-pool-mode", "cluster", f"the cluster is not in per-pool NVIDIADriver mode ({live}): "
                           f"the operator ignores NVIDIADrivers, so this canary's NVIDIADriver would be ignored "
                           f"and the canary pool would get {gets}. The canary never goes first on such a "
                           f"cluster: {migrate}")]
        return [warned("per-pool-mode", "cluster", f"the cluster is not in per-pool NVIDIADriver mode yet ({live}); "
                       f"this stack's `pulumi up` would switch it together with the pools' NVIDIADrivers: {migrate}")]
    operator = live_operator_version(inv) or spec.gpuOperator.chartVersion
    key = parse_chart(operator)
    default_supported = key is not None and key >= (26, 7, 0)
    defaults = sorted(name_of(nvd) for nvd in inv.nvidia_drivers or [] if _is_default(nvd))
    if default_supported and len(defaults) > 1:
        return [failed("per-pool-mode", "cluster", f"{len(defaults)} default NVIDIADrivers ({', '.join(defaults)}): "
                       "the operator marks them notReady (ReconcileFailed) and stops assigning driver owners; keep "
                       "one")]
    orphans = [name_of(n) for n in inv.gpu_nodes
               if _needs_operator_driver(n) and inv.pool_of(n) is None and driver_owner_of(inv, n, default_supported)
               is None]
    if orphans:
        fallback = ("create the default NVIDIADriver (spec.default: true; the chart's "
                    "driver.nvidiaDriverCRD.deployDefaultCR) at the driver they run now" if default_supported else
                    f"operator {operator} has no default NVIDIADriver (v26.7.0+): give them an NVIDIADriver that "
                    "selects them")
        return [warned("per-pool-mode", "cluster", f"{len(orphans)} GPU node(s) outside this stack's pools have no "
                       f"driver owner in per-pool mode: {_short(orphans)}; {fallback}")]
    owners = Counter(driver_owner_of(inv, n, default_supported) for n in inv.gpu_nodes
                     if _needs_operator_driver(n) and inv.pool_of(n) is None)
    owned = ", ".join(f"{count} by NVIDIADriver {owner}" + (" (the default)" if owner in defaults else "")
                      for owner, count in sorted(owners.items()))
    return [passed("per-pool-mode", "cluster", f"per-pool NVIDIADriver mode ({name} useNvidiaDriverCRD: true); "
                   + (f"GPU nodes outside this stack's pools all have a driver owner: {owned}" if owners
                      else "no GPU node outside this stack's pools"))]


# ---------------------------------------------------------------- node-image generations


def _same_image(reported: str, recorded: str) -> bool:
    """AKS reports ``AKSUbuntu-2204gen2containerd-202510.14.0``; a generation records its version
    (``202510.14.0``) or a longer tail of the name (``2204gen2containerd-202510.14.0``)."""
    return reported == recorded or reported.endswith(f"-{recorded}")


def check_node_image(inv: Inventory) -> list[CheckResult]:
    """Image-owned generations: each node's driver (GFD) against its generation's ``driverVersion``, and on
    AKS the node image it reports (``kubernetes.azure.com/node-image-version``) against ``nodeImageVersion``."""
    spec = inv.spec
    if spec.driver.owner != DriverOwner.IMAGE:
        return [passed("node-image", "stack", "the GPU Operator owns the driver: no node-image generations")]
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not pool.generations:
            results.append(passed("node-image", pool.name, "no generations declared for the pool"))
            continue
        if not nodes:
            results.append(warned("node-image", pool.name, "no node of the pool to compare"))
            continue
        wrong, unknown, matching = [], [], 0
        for node in nodes:
            membership = inv.membership_of(node)
            generation = membership.generation if membership else None
            node_name = name_of(node)
            if generation is None:
                unknown.append(f"{node_name} (generation not told by its labels)")
                continue
            problems = []
            driver = node_driver_version(node)
            if driver is None:
                unknown.append(f"{node_name} (no GFD driver label)")
            elif driver != generation.driverVersion:
                problems.append(f"driver {driver}, g{generation.id} records {generation.driverVersion}")
            if spec.cluster.cloud == Cloud.AKS and generation.nodeImageVersion:
                image = labels_of(node).get(labels.AKS_NODE_IMAGE_VERSION)
                if image is None:
                    unknown.append(f"{node_name} (no {labels.AKS_NODE_IMAGE_VERSION})")
                elif not _same_image(image, generation.nodeImageVersion):
                    problems.append(f"node image {image}, g{generation.id} records {generation.nodeImageVersion}")
            if problems:
                wrong.append(f"{node_name}: {'; '.join(problems)}")
            elif driver is not None:
                matching += 1
        if wrong:
            results.append(failed("node-image", pool.name, f"{len(wrong)} node(s) do not run what their generation "
                                  f"records: {_short(wrong, 3)}; fix the generation's record or replace the nodes"))
        elif unknown:
            results.append(warned("node-image", pool.name, f"{matching} node(s) as recorded; cannot compare "
                                  f"{_short(unknown, 3)}"))
        else:
            what = "driver and node image" if spec.cluster.cloud == Cloud.AKS else "driver"
            results.append(passed("node-image", pool.name, f"{matching} node(s) run the {what} their generation "
                                  "records"))
    return results
