"""Rules about where the operator's driver can run: the node operating system of each operator-owned pool."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policy import facts
from policy.facts import Resource
from policy.findings import Finding, advice
from spec import compat, labels
from spec.platform import aks_os, eks_os


def _pool_os(res: Resource, node_labels: dict[str, str] | object) -> tuple[str, ...]:
    """The operating systems a cloud pool (or pool record) may run, from the field that decides it."""
    declared = facts.prop(node_labels, labels.POOL_OS)
    if res.type == facts.AKS_POOL:
        # The wire name is osSKU (azure-native); AKS's default is Ubuntu.
        return aks_os(str(res.props.get("osSKU") or "Ubuntu"))
    if res.type == facts.EKS_NODE_GROUP:
        # EKS reports a node group on a launch template's custom AMI as amiType CUSTOM (API Nodegroup.amiType):
        # its OS is the one declared with the template.
        ami_type = res.props.get("amiType")
        return eks_os(None if ami_type in (None, "", "CUSTOM") else ami_type, declared)
    return eks_os(None, declared)


def operator_supports_os(resources: Sequence[Resource]) -> Iterator[Finding]:
    """Every pool the operator's driver installs on runs an OS the operator release has a driver image for."""
    drivers = facts.operator_drivers(resources)
    for pool in facts.pools(resources).values():
        owners = [d for d in facts.drivers_for_pool(pool, drivers) if d.version]
        for res in pool.resources:
            if not owners or facts.node_image_owns_driver(res):
                continue  # no operator driver here, or single-driver-owner's concern
            systems = _pool_os(res, facts.Pool._labels_of(res))
            if not systems:
                yield advice(
                    f"pool {pool.name} ({res.name}): its operating system is not visible (declare "
                    "eks.launchTemplate.os or existing.os), so the operator's support for it cannot be checked",
                    res,
                )
                continue
            for owner in owners:
                if not owner.operator_version:
                    continue  # operator-supports-driver already says the release is not visible
                for os_id in systems:
                    answer = compat.operator_supports_os(owner.operator_version, os_id)
                    if answer.no:
                        yield Finding(f"pool {pool.name} ({res.name}): {answer.reason}", res)
                    elif answer.unknown:
                        yield advice(f"pool {pool.name} ({res.name}): {answer.reason}", res)
