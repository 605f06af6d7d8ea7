"""Who owns the driver (runbook section 1, first half): cluster-policy, driver-owner, per-pool-mode,
two-driver-owners, driver-versions, running-today, node-image, node-os-channel.

Which of the GPU Operator (ClusterPolicy or per-pool NVIDIADrivers), a host-installed driver or the node
image drives each node, against what the stack declares, and which driver each node runs now.
"""

from __future__ import annotations

from collections import Counter

from checks.inventory import Inventory, pool_selectors_text
from checks.nodestate import node_driver_version
from checks.objects import Obj, labels_of, name_of, node_selector_matches, spec_of, status_of
from checks.metadata import OWNERSHIP, check
from checks.results import Finding, failed, few, passed, warned
from cloud_credentials.azure_management import NO_CHANNEL
from gpu_knowledge import labels
from renderers import manifests
from fleetspec.model import Cloud, ClusterPolicyMode, DriverOwner, FleetSpec, Stage
from fleetspec.pools import Generation
from gpu_knowledge.versions import is_branch_only, parse_chart
from vocabulary.check_ids import CheckId


def operator_driver_targets(inv: Inventory, node: Obj) -> str | None:
    """Why the operator's containerized driver would run on ``node`` (None: it would not)."""
    if inv.driver_pods_on(name_of(node)):
        return "a driver pod runs on it"
    policy = inv.cluster_policy
    driver = spec_of(policy or {}).get("driver") or {}
    if not policy or driver.get("enabled") is False:
        return None
    node_labels = labels_of(node)
    if node_labels.get(labels.DEPLOY_DRIVER) == "false":
        return None
    if driver.get("useNvidiaDriverCRD"):
        for nvd in inv.nvidia_drivers or []:
            selector = spec_of(nvd).get("nodeSelector") or {labels.GPU_PRESENT: "true"}
            if node_selector_matches(selector, node_labels):
                return f"NVIDIADriver {name_of(nvd)} selects it"
        return None
    if node_labels.get(labels.GPU_PRESENT) == "true":
        return "ClusterPolicy driver.enabled is true for every GPU node"
    return None


def host_driver(node: Obj) -> bool:
    return labels_of(node).get(labels.DEPLOY_DRIVER) == "pre-installed"


def _needs_operator_driver(node: Obj) -> bool:
    node_labels = labels_of(node)
    return (node_labels.get(labels.GPU_PRESENT) == "true"
            and node_labels.get(labels.DEPLOY_DRIVER) not in ("pre-installed", "false"))


def _is_default(nvd: Obj) -> bool:
    return spec_of(nvd).get("default") is True


def driver_owner_of(inv: Inventory, node: Obj, default_supported: bool) -> str | None:
    """The NVIDIADriver that owns ``node`` in per-pool mode: a non-default one whose selector matches
    (no selector: every GPU node), else the default one (``spec.default: true``, operator v26.7.0+)."""
    return driver_owner_among(inv.nvidia_drivers or [], node, default_supported)


def driver_owner_among(drivers: list[Obj], node: Obj, default_supported: bool) -> str | None:
    """:func:`driver_owner_of` over NVIDIADrivers as read (the guard's, from its watch)."""
    node_labels = labels_of(node)
    for nvd in drivers:
        if _is_default(nvd):
            continue
        selector = spec_of(nvd).get("nodeSelector") or {labels.GPU_PRESENT: "true"}
        if node_selector_matches(selector, node_labels):
            return name_of(nvd)
    defaults = [nvd for nvd in drivers if _is_default(nvd)]
    if default_supported and len(defaults) == 1:
        return name_of(defaults[0])
    return None


@check(CheckId.CLUSTER_POLICY, OWNERSHIP)
def check_cluster_policy(inv: Inventory) -> list[Finding]:
    """The ClusterPolicy the stack patches (and the chart creates) is there, alone."""
    spec = inv.spec
    name = manifests.CLUSTER_POLICY_NAME
    names = sorted(name_of(p) for p in inv.cluster_policies or [])
    installs = spec.gpuOperator.clusterPolicy == ClusterPolicyMode.HELM
    if not names:
        what = "the ClusterPolicy CRD is not installed" if inv.cluster_policies is None else "no ClusterPolicy"
        if installs:
            return [warned(name, f"{what}: this stack installs the GPU Operator chart, which creates {name}")]
        return [failed(name, f"{what}: the GPU Operator must be installed (its chart creates "
                       f"ClusterPolicy {name}, which the driver checks read"
                       + (" and this stack patches)" if spec.gpuOperator.clusterPolicy == ClusterPolicyMode.PATCH
                          else ")"))]
    if inv.cluster_policy is None:
        return [failed(name, f"no ClusterPolicy named {name} (found {', '.join(names)}): the "
                       f"stack patches and the operator's chart creates {name}; checks read only that one")]
    if len(names) > 1:
        others = [n for n in names if n != name]
        return [failed(name, f"{len(names)} ClusterPolicies ({', '.join(names)}): the operator "
                       f"reconciles only one; remove {', '.join(others)}")]
    state = str(status_of(inv.cluster_policy or {}).get("state", "?"))
    return [passed(name, f"ClusterPolicy {name}, state {state}")]


@check(CheckId.DRIVER_OWNER, OWNERSHIP)
def check_driver_owner(inv: Inventory) -> list[Finding]:
    spec = inv.spec
    declared = spec.driver.owner
    policy = inv.cluster_policy
    driver = spec_of(policy or {}).get("driver") or {}
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
            results.append(failed(pool.name, "no node of the pool found (looked for "
                                  f"{pool_selectors_text(spec, [pool])})"))
            continue
        targeted = [n for n in nodes if operator_driver_targets(inv, n)]
        hosts = [n for n in nodes if host_driver(n)]
        seen = f"{len(targeted)}/{len(nodes)} nodes targeted by the operator's driver, {len(hosts)} with a host driver"
        if declared == DriverOwner.OPERATOR and len(targeted) < len(nodes):
            missing = [name_of(n) for n in nodes if n not in targeted]
            results.append(failed(pool.name, f"stack says operator, but the operator's driver "
                                  f"does not target {few(missing)} ({policy_text})"))
        elif declared == DriverOwner.IMAGE and targeted:
            results.append(failed(pool.name, f"stack says image, but the operator's driver targets "
                                  f"{few([name_of(n) for n in targeted])}: set driver.enabled=false ({policy_text})"))
        else:
            results.append(passed(pool.name, f"{declared.value}, as declared: {seen}; {policy_text}"))
    return results


@check(CheckId.PER_POOL_MODE, OWNERSHIP)
def check_per_pool_mode(inv: Inventory) -> list[Finding]:
    """A stack with one NVIDIADriver per pool needs the cluster in NVIDIADriver mode; the canary never goes
    first without it, and every GPU node outside the stacks' pools keeps a driver owner."""
    spec = inv.spec
    name = manifests.CLUSTER_POLICY_NAME
    if spec.driver.owner != DriverOwner.OPERATOR:
        return [passed("cluster", "the node image owns the driver: no NVIDIADriver is involved")]
    if not spec.gpuOperator.useNvidiaDriverCrd:
        return [passed("cluster", "the stack drives the ClusterPolicy's driver "
                       "(gpuOperator.useNvidiaDriverCrd: false)")]
    canary = spec.stage == Stage.CANARY
    migrate = ("do the migration step first (docs/runbook.md, 'Per-pool driver mode: the migration'): with the "
               "operator already at v26.7.0, and never in the same change as a chart upgrade, enable "
               "useNvidiaDriverCRD with the default NVIDIADriver as the fallback owner of every GPU node, at the "
               "driver the nodes run now")
    policy = inv.cluster_policy
    if policy is None:
        status = failed if canary else warned
        return [status("cluster", f"no ClusterPolicy {name}: cannot tell whether the cluster is in per-pool "
                       "NVIDIADriver mode" + ("; the canary must not go first without it" if canary else ""))]
    driver = spec_of(policy).get("driver") or {}
    if driver.get("useNvidiaDriverCRD") is not True:
        live = f"ClusterPolicy {name} spec.driver.useNvidiaDriverCRD is {driver.get('useNvidiaDriverCRD', 'unset')}"
        if canary:
            gets = ("no driver (the ClusterPolicy's driver is disabled)" if driver.get("enabled") is False
                    else f"the ClusterPolicy's driver {driver.get('version', '?')}, not {spec.driver.version}")
            return [failed("cluster", f"the cluster is not in per-pool NVIDIADriver mode ({live}): "
                           f"the operator ignores NVIDIADrivers, so this canary's NVIDIADriver would be ignored "
                           f"and the canary pool would get {gets}. The canary never goes first on such a "
                           f"cluster: {migrate}")]
        return [warned("cluster", f"the cluster is not in per-pool NVIDIADriver mode yet ({live}); "
                       f"this stack's `pulumi up` would switch it together with the pools' NVIDIADrivers: {migrate}")]
    operator = inv.operator_version or spec.gpuOperator.chartVersion
    key = parse_chart(operator)
    default_supported = key is not None and key >= (26, 7, 0)
    defaults = sorted(name_of(nvd) for nvd in inv.nvidia_drivers or [] if _is_default(nvd))
    if default_supported and len(defaults) > 1:
        return [failed("cluster", f"{len(defaults)} default NVIDIADrivers ({', '.join(defaults)}): "
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
        return [warned("cluster", f"{len(orphans)} GPU node(s) outside this stack's pools have no "
                       f"driver owner in per-pool mode: {few(orphans)}; {fallback}")]
    owners = Counter(driver_owner_of(inv, n, default_supported) for n in inv.gpu_nodes
                     if _needs_operator_driver(n) and inv.pool_of(n) is None)
    owned = ", ".join(f"{count} by NVIDIADriver {owner}" + (" (the default)" if owner in defaults else "")
                      for owner, count in sorted(owners.items()))
    return [passed("cluster", f"per-pool NVIDIADriver mode ({name} useNvidiaDriverCRD: true); "
                   + (f"GPU nodes outside this stack's pools all have a driver owner: {owned}" if owners
                      else "no GPU node outside this stack's pools"))]


@check(CheckId.TWO_DRIVER_OWNERS, OWNERSHIP)
def check_two_driver_owners(inv: Inventory) -> list[Finding]:
    both = []
    for node in inv.gpu_nodes:
        reason = operator_driver_targets(inv, node)
        if host_driver(node) and reason:
            both.append(f"{name_of(node)} ({reason})")
    if both:
        return [failed("cluster", f"{len(both)} node(s) have a host driver "
                       f"({labels.DEPLOY_DRIVER}=pre-installed) that the operator's driver also targets: "
                       f"{few(both, 3)}")]
    return [passed("cluster", f"no node has two driver owners ({len(inv.gpu_nodes)} GPU nodes)")]


@check(CheckId.DRIVER_VERSIONS, OWNERSHIP)
def check_driver_versions(inv: Inventory) -> list[Finding]:
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
                   f"{few(unlabelled)}" if unlabelled else "")
        if stray:
            results.append(failed(pool, f"{text}: {', '.join(stray)} is neither the previous "
                                  f"nor the target driver ({', '.join(sorted(expected))}); find out who changed it"
                                  + missing))
        elif unlabelled:
            results.append(warned(pool, f"{text or 'no version'}{missing}"))
        else:
            results.append(passed(pool, text))
    return results


def _runs(declared: str, reported: str) -> bool:
    """Whether a node reporting ``reported`` runs the declared driver (a branch alone, with precompiled drivers,
    declares every release of that branch)."""
    return reported == declared or (is_branch_only(declared) and reported.split(".")[0] == declared)


@check(CheckId.RUNNING_TODAY, OWNERSHIP)
def check_running_today(inv: Inventory) -> list[Finding]:
    """promotion.runningToday against the nodes: each node of a held pool pinned to the declared driver must run
    it (GFD labels). The prod gate admits those pins on that declaration alone (docs/validation.md, What "ran"
    means), so a node on another driver fails, naming the nodes, the declared and the seen drivers."""
    spec = inv.spec
    declared = spec.promotion.runningToday if spec.promotion is not None else None
    if declared is None:
        return [passed("stack", "no promotion.runningToday declared: the gate admits no held pool's pin on a "
                                "declaration")]
    pinned = [p for p in spec.nodePools
              if spec.pool_held(p) and (t := spec.pool_target(p).driver) is not None and _runs(declared.driver, t)]
    if not pinned:
        return [passed("stack", f"no held pool is pinned to the declared {declared.driver}: nothing to compare")]
    results = []
    for pool in pinned:
        nodes = inv.nodes_of_pool(pool.name)
        if not nodes:
            results.append(warned(pool.name, f"no node of the pool to compare with the declared {declared.driver}"))
            continue
        other = [f"{name_of(n)} ({seen})" for n in nodes
                 if (seen := node_driver_version(n)) is not None and not _runs(declared.driver, seen)]
        unlabelled = [name_of(n) for n in nodes if node_driver_version(n) is None]
        if other:
            results.append(failed(pool.name, f"promotion.runningToday declares {declared.driver}, but {len(other)} "
                                  f"node(s) run another driver: {few(other, 3)}; the gate admits this held pool's "
                                  "pin on that declaration alone: correct the declaration (and driver.previousVersion) "
                                  "to what the nodes run, or find out who changed them"))
        elif unlabelled:
            results.append(warned(pool.name, f"{len(nodes) - len(unlabelled)} node(s) run the declared "
                                  f"{declared.driver}; {len(unlabelled)} without GFD driver labels (run nvidia-smi "
                                  f"there): {few(unlabelled)}"))
        else:
            results.append(passed(pool.name, f"{len(nodes)} node(s) run the declared {declared.driver}"))
    return results


def _same_image(reported: str, recorded: str) -> bool:
    """AKS reports ``AKSUbuntu-2204gen2containerd-202510.14.0``; a generation records its version
    (``202510.14.0``) or a longer tail of the name (``2204gen2containerd-202510.14.0``)."""
    return reported == recorded or reported.endswith(f"-{recorded}")


def _compare_to_generation(spec: FleetSpec, node: Obj, generation: Generation) -> tuple[list[str], list[str]]:
    """(how the node differs from its generation's record, which labels it lacks to compare)."""
    problems: list[str] = []
    missing: list[str] = []
    driver = node_driver_version(node)
    if driver is None:
        missing.append("no GFD driver label")
    elif driver != generation.driverVersion:
        problems.append(f"driver {driver}, g{generation.id} records {generation.driverVersion}")
    if spec.cluster.cloud == Cloud.AKS and generation.nodeImageVersion:
        image = labels_of(node).get(labels.AKS_NODE_IMAGE_VERSION)
        if image is None:
            missing.append(f"no {labels.AKS_NODE_IMAGE_VERSION}")
        elif not _same_image(image, generation.nodeImageVersion):
            problems.append(f"node image {image}, g{generation.id} records {generation.nodeImageVersion}")
    return problems, missing


@check(CheckId.NODE_IMAGE, OWNERSHIP)
def check_node_image(inv: Inventory) -> list[Finding]:
    """Image-owned generations: each node's driver (GFD) against its generation's ``driverVersion``, and on
    AKS the node image it reports (``kubernetes.azure.com/node-image-version``) against ``nodeImageVersion``."""
    spec = inv.spec
    if spec.driver.owner != DriverOwner.IMAGE:
        return [passed("stack", "the GPU Operator owns the driver: no node-image generations")]
    results = []
    for pool in spec.nodePools:
        nodes = inv.nodes_of_pool(pool.name)
        if not pool.generations:
            results.append(passed(pool.name, "no generations declared for the pool"))
            continue
        if not nodes:
            results.append(warned(pool.name, "no node of the pool to compare"))
            continue
        wrong, unknown, matching = [], [], 0
        for node in nodes:
            membership = inv.membership_of(node)
            generation = membership.generation if membership else None
            node_name = name_of(node)
            if generation is None:
                unknown.append(f"{node_name} (generation not told by its labels)")
                continue
            problems, missing = _compare_to_generation(spec, node, generation)
            unknown += [f"{node_name} ({what})" for what in missing]
            if problems:
                wrong.append(f"{node_name}: {'; '.join(problems)}")
            elif node_driver_version(node) is not None:
                matching += 1
        if wrong:
            results.append(failed(pool.name, f"{len(wrong)} node(s) do not run what their generation "
                                  f"records: {few(wrong, 3)}; fix the generation's record or replace the nodes"))
        elif unknown:
            results.append(warned(pool.name, f"{matching} node(s) as recorded; cannot compare {few(unknown, 3)}"))
        else:
            what = "driver and node image" if spec.cluster.cloud == Cloud.AKS else "driver"
            results.append(passed(pool.name, f"{matching} node(s) run the {what} their generation records"))
    return results


@check(CheckId.NODE_OS_CHANNEL, OWNERSHIP)
def check_node_os_channel(inv: Inventory) -> list[Finding]:
    """AKS: the managed cluster's node OS upgrade channel (read from ARM, :mod:`checks.node_os_channel`) is
    ``None``, or ``cluster.aks.nodeOsUpgradeChannelReason`` says why not: any other channel moves nodes to another
    node image on AKS's schedule, so a pool may run another image than the canary attested. Optional where the
    identity cannot read the managed cluster (a warning naming the role)."""
    spec = inv.spec
    if spec.cluster.cloud != Cloud.AKS or spec.cluster.aks is None:
        return [passed("cluster", f"cluster on {spec.cluster.cloud.value}: no AKS node OS upgrade channel")]
    read, reason = inv.node_os_channel, spec.cluster.aks.nodeOsUpgradeChannelReason
    seen = f"nodeOSUpgradeChannel {read.channel}" if read.channel else "the channel not read"
    if reason is not None and read.channel != NO_CHANNEL:
        return [passed("cluster", f"{seen}, accepted by cluster.aks.nodeOsUpgradeChannelReason: {reason}")]
    if not read.asked:
        return [warned("cluster", "the node OS upgrade channel was not read (preflight was given no Azure identity): "
                       "confirm `az aks show --query autoUpgradeProfile.nodeOsUpgradeChannel` is None")]
    if read.error is not None:
        return [warned("cluster", f"the node OS upgrade channel of {read.cluster} could not be read: {read.error}")]
    if read.channel == NO_CHANNEL:
        return [passed("cluster", f"{read.cluster}: nodeOSUpgradeChannel None: AKS changes no node image on its own")]
    if read.channel is None:
        return [warned("cluster", f"ARM states no nodeOSUpgradeChannel for {read.cluster}: confirm it is None")]
    return [failed("cluster", f"{read.cluster}: nodeOSUpgradeChannel is {read.channel}: AKS moves the nodes to other "
                   "node images on its own schedule, so a pool may run another image than the canary attested; set it "
                   f"to None (az aks update --node-os-upgrade-channel None) or state why in "
                   "cluster.aks.nodeOsUpgradeChannelReason")]
