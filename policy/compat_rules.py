"""Rules for runbook section 1 (compatibility) and driver ownership: plain functions over resources.

Resource rules take one ``Resource``; stack rules take the stack's facts (``StackFacts``). Each yields
``Finding``s; an UNKNOWN compatibility answer is reported as advice, never passed silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from policy import facts
from policy.facts import Resource, StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, resource_policy, stack_policy
from gpu_knowledge import compat, labels
from engine_contracts import resource_facts as rf
from gpu_knowledge.versions import is_branch_only, is_exact_release
from vocabulary.policy_ids import PolicyId


@resource_policy(
    PolicyId.DRIVER_VERSION_PINNED,
    "Checks that the driver version is an exact release wherever it is set, and that NVIDIA AMI node groups pin releaseVersion.",
    resource_types=(*rf.DRIVER_TYPES, rf.EKS_NODE_GROUP),
    severity=Severity.HIGH, topics=("compatibility", "drift"),
    remediation="Set driver.version to an exact release (e.g. 580.173.02); for image-owned EKS pools set releaseVersion on every generation.",
    config_keys=("driver.version", "nodePools[].generations[].releaseVersion"),
)
def driver_version_pinned(res: Resource) -> Iterator[Finding]:
    """Exact driver version wherever the operator's driver is set; NVIDIA AMI node groups pin releaseVersion."""
    driver = facts.operator_driver(res)
    if driver is not None and driver.facts.enabled:
        version = driver.facts.version
        where = "NVIDIADriver spec.version" if res.type == rf.NVIDIA_DRIVER else "driver.version"
        if not version:
            yield Finding(f"{res.name}: {where} must be set; without it the operator follows its chart default", res)
        elif driver.facts.precompiled and isinstance(version, str) and is_branch_only(version.strip()):
            # Precompiled images are tagged by branch only; the kernel decides the build.
            yield advice(f"{res.name}: precompiled {where} '{version}' pins a branch, not a release", res)
        elif not is_exact_release(version):
            yield Finding(
                f"{res.name}: {where} '{version}' must be an exact release such as 580.173.02 "
                "(a bare branch follows whatever precompiled build is newest)",
                res,
            )
    if res.type == rf.EKS_NODE_GROUP and facts.node_image_owns_driver(res) and not res.props.get("releaseVersion"):
        yield Finding(
            f"{res.name}: an NVIDIA AMI node group must pin releaseVersion; otherwise its driver follows the latest AMI",
            res,
        )


@stack_policy(
    PolicyId.SINGLE_DRIVER_OWNER,
    "Checks that no pool gets a driver from both its node image and the GPU Operator.",
    severity=Severity.CRITICAL, topics=("ownership",),
    remediation="Either let the operator own the driver (AKS gpuProfile.driver: None, a standard EKS AMI) or disable the operator's driver.",
    config_keys=("driver.owner",),
)
def single_driver_owner(stack: StackFacts) -> Iterator[Finding]:
    """No pool where both the node image and the operator install a driver."""
    for pool in stack.pools.values():
        owners = stack.drivers_of(pool)
        if not owners:
            continue
        for res in pool.resources:
            if facts.node_image_owns_driver(res):
                image = (
                    f"gpuProfile.driver '{(res.props.get('gpuProfile') or {}).get('driver')}'"
                    if res.type == rf.AKS_POOL
                    else f"amiType {res.props.get('amiType')}"
                )
                yield Finding(
                    f"pool {pool.name} ({res.name}) has a driver from its node image ({image}) and from the "
                    f"operator ({', '.join(d.resource.name for d in owners)}); two drivers on one node "
                    "usually means no GPUs after the next reboot",
                    res,
                )


def _may_overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    """Two equality selectors can match one node unless they require different values for a key."""
    return all(a[key] == b[key] for key in a.keys() & b.keys())


@stack_policy(
    PolicyId.NVIDIADRIVER_SELECTORS_DISJOINT,
    "Checks that no node pool is selected by two NVIDIADriver resources.",
    severity=Severity.HIGH, topics=("ownership",),
    remediation="Give each NVIDIADriver a nodeSelector on its own pool label; never leave one without a nodeSelector.",
    config_keys=("nodePools[].name", "gpuOperator.useNvidiaDriverCrd"),
)
def nvidiadriver_selectors_disjoint(stack: StackFacts) -> Iterator[Finding]:
    """No node is selected by two NVIDIADrivers (the operator then refuses both)."""
    drivers = [d for d in stack.drivers if d.resource.type == rf.NVIDIA_DRIVER and not d.facts.default]
    for first, second in combinations(drivers, 2):
        if _may_overlap(dict(first.facts.selector or {}), dict(second.facts.selector or {})):
            yield Finding(
                f"NVIDIADrivers {first.resource.name} ({first.facts.selector or 'all GPU nodes'}) and "
                f"{second.resource.name} ({second.facts.selector or 'all GPU nodes'}) can select the same node",
                second.resource,
            )


def _fleet_ran(stack: StackFacts) -> frozenset[str]:
    """The drivers a rollback may go back to: those the pools ran as of the last deployment (``driversRun``) and,
    once the stack has deployed, the driver ``promotion.runningToday`` declares the fleet ran before it (the way
    back to it is a rollback; on a first deployment nothing is rolled back)."""
    ran = stack.previous.drivers_ran
    if not stack.previous.deployed:
        return ran
    declared = stack.promotion.running_today if stack.promotion is not None else None
    return ran | {declared.driver} if declared is not None else ran


def _unless_ran(findings: Iterator[Finding], version: str, ran: frozenset[str]) -> Iterator[Finding]:
    """A driver the fleet already ran (a rollback target) is not blocked by a rule it broke all along:
    its violations become advice that says so; on any other driver they stay what they are."""
    for finding in findings:
        if finding.advisory or version not in ran:
            yield finding
        else:
            yield advice(
                f"{finding.message} (the fleet ran {version} as of its last deployment, so going back to it is a "
                "rollback and is not blocked)",
                finding.resource,
            )


@stack_policy(
    PolicyId.CUDA_DRIVER_COMPATIBLE,
    "Checks that every model's CUDA version runs on the driver of every pool it runs on.",
    severity=Severity.CRITICAL, topics=("compatibility",),
    remediation="Pick a driver at or above the CUDA minimum, or ship cuda-compat in the image (cudaForwardCompat) on a supported branch.",
    config_keys=("driver.version", "models[].cudaVersion", "models[].cudaForwardCompat"),
)
def cuda_driver_compatible(stack: StackFacts) -> Iterator[Finding]:
    """Each model's CUDA runs on the driver of every pool it runs on, or forward compat covers it."""
    for model in stack.models:
        res = model.resource
        if not model.facts.cuda:
            yield advice(f"model {model.name}: its CUDA version is not visible; cannot check it", res)
            continue
        for pool_name in model.facts.pools:
            versions = stack.driver_versions_of(stack.pool(pool_name))
            if not versions:
                yield advice(f"model {model.name}: no driver version is visible for pool {pool_name}", res)
            for version, _source in versions:
                yield from _unless_ran(_cuda_on_driver(model, pool_name, version), version, _fleet_ran(stack))


def _cuda_on_driver(model: facts.ModelBudget, pool_name: str, version: str) -> Iterator[Finding]:
    """One model's CUDA against one driver version of a pool it runs on."""
    res, where = model.resource, f"model {model.name} on pool {pool_name}"
    answer = compat.cuda_runs_on(model.facts.cuda or "", version)
    if model.facts.forward_compat:
        # A declared cuda-compat package is used whether or not the driver needs it, and an older compat
        # package is not supported on a newer driver: always check the package against the branch.
        bridge = compat.forward_compat_supported(model.facts.cuda or "", version)
        if bridge.yes:
            return
        if bridge.unknown:
            yield advice(f"{where}: cannot tell whether its cuda-compat package runs on {version}: {bridge.reason}", res)
            return
        if answer.yes:
            yield Finding(
                f"{where}: driver {version} runs CUDA {model.facts.cuda} natively, but the image's cuda-compat package "
                f"is not supported on it ({bridge.reason}); remove cuda-compat from the image and set "
                "cudaForwardCompat: false, or pick a target the package supports",
                res,
            )
        else:
            yield Finding(
                f"{where}: {answer.reason}, and its cuda-compat package is not supported on {version} "
                f"({bridge.reason}); pick a driver at or above the CUDA minimum and remove cuda-compat "
                "(cudaForwardCompat: false), or a branch the package supports",
                res,
            )
        return
    if answer.unknown:
        yield advice(f"{where}: {answer.reason}", res)
    elif answer.no:
        yield Finding(f"{where}: {answer.reason}", res)


@stack_policy(
    PolicyId.GPU_SUPPORTED_BY_DRIVER,
    "Checks that the driver branch supports the GPU of every pool.",
    severity=Severity.CRITICAL, topics=("compatibility",),
    remediation="Stay on a branch that supports the GPU (Volta, Pascal and Maxwell end at R580); move old GPUs to their own pool.",
    config_keys=("driver.version", "nodePools[].gpuProduct"),
)
def gpu_supported_by_driver(stack: StackFacts) -> Iterator[Finding]:
    """The driver branch of every pool supports the pool's GPU."""
    for pool in stack.pools.values():
        res, product = pool.resources[0], pool.facts.gpu_product
        if not product:
            yield advice(f"pool {pool.name}: its GPU product is not visible (label {labels.POOL_GPU_PRODUCT})", res)
            continue
        versions = stack.driver_versions_of(pool)
        if not versions:
            yield advice(f"pool {pool.name}: no driver version is visible; cannot check GPU {product}", res)
        for version, source in versions:
            answer = compat.supports(version, product)
            if answer.no:
                found = Finding(f"pool {pool.name} (driver {version} from {source.name}): {answer.reason}", res)
                yield from _unless_ran(iter([found]), version, _fleet_ran(stack))
            elif answer.unknown:
                yield advice(f"pool {pool.name}: {answer.reason}", res)


@stack_policy(
    PolicyId.OPERATOR_SUPPORTS_DRIVER,
    "Checks that the GPU Operator release lists the driver (advice when only its branch is listed).",
    severity=Severity.HIGH, topics=("compatibility",),
    remediation="Choose a driver from the operator release's component matrix, or upgrade the operator first.",
    config_keys=("driver.version", "gpuOperator.chartVersion"),
)
def operator_supports_driver(stack: StackFacts) -> Iterator[Finding]:
    """The GPU Operator release lists every driver it installs: advice when only the branch is listed, and
    for a rollback to a driver the fleet ran."""
    for driver in stack.drivers:
        if driver.facts.version:
            yield from _unless_ran(_operator_lists(driver), driver.facts.version, _fleet_ran(stack))


def _operator_lists(driver: facts.OperatorDriver) -> Iterator[Finding]:
    res, version, operator = driver.resource, driver.facts.version, driver.facts.operator_version
    if not driver.facts.enabled or not version:
        return
    if not operator:
        yield advice(f"{res.name}: the GPU Operator release is not visible; cannot check driver {version}", res)
        return
    answer = compat.operator_lists(operator, version)
    support = compat.OperatorSupport
    if answer.support == support.LISTED:
        return
    if answer.support == support.UNSUPPORTED and not driver.held:
        yield Finding(f"{res.name}: {answer.reason}", res)
    elif answer.support == support.UNSUPPORTED:
        yield advice(f"{res.name}: held pool stays on a driver its operator does not support: {answer.reason}", res)
    else:
        yield advice(f"{res.name}: {answer.reason}", res)


@stack_policy(
    PolicyId.DCGM_EXPORTER_SUPPORTS_DRIVER,
    "Checks that the stack declares the DCGM Exporter it runs and that its DCGM is no older than the one NVIDIA ships "
    "with the target driver's branch.",
    severity=Severity.MEDIUM, topics=("compatibility", "observability"),
    remediation="Set gpuOperator.dcgmExporterVersion to the exporter's image tag; upgrade the exporter before the "
    "driver where its DCGM is older than the table's minimum for the branch.",
    config_keys=("gpuOperator.dcgmExporterVersion", "driver.version"),
)
def dcgm_exporter_supports_driver(stack: StackFacts) -> Iterator[Finding]:
    """Verify's GPU health reads the DCGM Exporter: an exporter older than the branch may stop reporting on it."""
    owned = [d for d in stack.drivers if d.facts.enabled]
    if not owned:
        return  # no operator driver of this stack's: the node image carries the driver
    declared = sorted({d.facts.notes.dcgm_exporter or "" for d in owned})
    if "" in declared:
        yield Finding("the stack declares no DCGM Exporter (gpuOperator.dcgmExporterVersion): nothing says which "
                      "exporter verify's GPU health rests on, nor that it supports the target driver")
        return
    if len(declared) > 1:
        yield Finding(f"the driver objects state different DCGM Exporters ({', '.join(declared)})")
        return
    tag = declared[0]
    dcgm = compat.dcgm_of_exporter_tag(tag)
    if dcgm is None:
        yield Finding(f"gpuOperator.dcgmExporterVersion '{tag}' is not a DCGM Exporter image tag")
        return
    targets = sorted({str(d.facts.version) for d in stack.drivers
                      if d.facts.enabled and d.facts.version and not d.held})
    for version in targets:
        answer = compat.dcgm_validated(dcgm, version)
        if answer.no:
            yield Finding(f"DCGM Exporter {tag} (gpuOperator.dcgmExporterVersion) with driver {version}: "
                          f"{answer.reason}; upgrade the exporter before the driver")
        elif answer.unknown:
            yield advice(f"DCGM Exporter {tag} with driver {version}: {answer.reason}")
