"""Who owns the driver, and what runs where: driver-owner, two-driver-owners, driver-versions,
kernel-precompiled, fabric-manager, mig-timeslicing."""

from __future__ import annotations

from collections import Counter

from checks.inventory import Inventory, Obj, labels_of, name_of, selector_matches
from checks.nodestate import node_driver_version
from checks.results import CheckResult, failed, passed, warned
from spec import compat, labels, manifests
from spec.model import DriverOwner, NodePool

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
        else "no ClusterPolicy" if policy is None
        else f"ClusterPolicy driver.enabled={driver.get('enabled', True)} version={driver.get('version', '-')}"
        f" useNvidiaDriverCRD={bool(driver.get('useNvidiaDriverCRD'))}"
    )
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not nodes:
            results.append(failed("driver-owner", pool.name, f"no node carries {labels.POOL}={pool.name}"))
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


# GFD product names of HGX/DGX baseboards (SXM modules sit on an NVSwitch baseboard in 8-GPU systems).
_NVSWITCH_PRODUCT = ("SXM", "HGX", "DGX")


def _nvswitch_nodes(inv: Inventory, pool: NodePool) -> tuple[list[str], list[str]]:
    """Nodes of the pool that say they are NVSwitch systems: by our pool label, by GFD's product name."""
    by_label, by_product = [], []
    for node in inv.nodes_of_pool(pool.name):
        node_labels = labels_of(node)
        if node_labels.get(labels.POOL_NVSWITCH) == "true":
            by_label.append(name_of(node))
        elif any(mark in node_labels.get(labels.GPU_PRODUCT, "").upper() for mark in _NVSWITCH_PRODUCT):
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
                results.append(warned("fabric-manager", pool.name, f"GPU product of {_short(by_product)} looks like "
                                      "an HGX/SXM system but the stack says nvswitch: false; if it has NVSwitches, "
                                      "Fabric Manager must move with the driver"))
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


def check_mig_timeslicing(inv: Inventory) -> list[CheckResult]:
    found = []
    for node in inv.pool_nodes:
        node_labels = labels_of(node)
        if node_labels.get("nvidia.com/mig.strategy") in ("single", "mixed"):
            found.append(f"{name_of(node)} MIG {node_labels['nvidia.com/mig.strategy']}")
        elif node_labels.get("nvidia.com/mig.config", "all-disabled") != "all-disabled":
            found.append(f"{name_of(node)} mig.config={node_labels['nvidia.com/mig.config']}")
        elif node_labels.get("nvidia.com/gpu.sharing-strategy") in ("time-slicing", "mps"):
            found.append(f"{name_of(node)} {node_labels['nvidia.com/gpu.sharing-strategy']}")
    policy_spec = (inv.cluster_policy or {}).get("spec") or {}
    config = ((policy_spec.get("devicePlugin") or {}).get("config") or {}).get("name")
    if config:
        found.append(f"ClusterPolicy devicePlugin.config {config}")
    if found:
        return [warned("mig-timeslicing", "cluster", f"re-check MIG layouts / time-slicing on the new branch "
                       f"(release notes): {_short(found, 3)}")]
    return [passed("mig-timeslicing", "cluster", "no MIG layout or time-slicing config on the stack's nodes")]
