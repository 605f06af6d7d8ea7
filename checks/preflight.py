"""Preflight: every live check of the runbook's opening and sections 1-2, read-only.

One inventory read (a fixed number of LISTs), then the cluster's identity
(:func:`checks.identity.identify_cluster`: another cluster raises :class:`checks.errors.WrongClusterError` before
any check runs; an unconfirmed one is the ``cluster-identity`` warning), then the checks the catalogue
(:mod:`checks.catalogue`) lists for ``preflight``, pure functions over the inventory, in the runbook's
order. Nothing here writes to the cluster.
"""

from __future__ import annotations

from checks import kube as k
from checks import node_os_channel, precompiled
from checks.attested import AttestedDrivers
from checks.catalogue import CATALOGUE
from checks.identity import identify_cluster, refuse_if_refuted
from checks.inventory import Inventory, read_inventory
from checks.metadata import Section
from checks.registry import Registry
from checks.quota import CloudQuotas, read_surge_quota
from checks.results import CheckResult
from cloud_credentials.azure_management import AzureManagement
from fleetspec.model import FleetSpec

VERB = "preflight"


def evaluate(inventory: Inventory) -> list[CheckResult]:
    """Every preflight check over one inventory, in the runbook's order."""
    return CATALOGUE.run(VERB, inventory)


def sections() -> list[Section]:
    """The runbook sections preflight reports on, in order (one table each)."""
    return CATALOGUE.sections(VERB)


def section_of(result: CheckResult) -> Section:
    return CATALOGUE.section_of(result.id)


def run_preflight(kube: k.Kube, spec: FleetSpec, attested: AttestedDrivers | None = None,
                  registry: Registry | None = None, management: AzureManagement | None = None,
                  quotas: CloudQuotas | None = None) -> list[CheckResult]:
    """Read the cluster once, refuse another cluster, ask ``registry`` for the precompiled driver images the change
    needs (:mod:`checks.precompiled`) and, on AKS, ``management`` (Azure Resource Manager) for the cluster's node OS
    upgrade channel (:mod:`checks.node_os_channel`); neither given: not asked, and the checks say so. ``quotas``:
    the cloud's quota reader, for surge-quota (:func:`checks.quota.reader_for`). Then run every check
    (``attested``: the canary's attestations of the promoted drivers, :func:`checks.attested.read_attested`);
    ClusterError propagates (no partial report), WrongClusterError included."""
    inventory = read_inventory(kube, spec, attested)
    refuse_if_refuted(kube, identify_cluster(spec, inventory.identity_records, inventory.nodes))
    if registry is not None:
        inventory.registry = precompiled.look_up(inventory, kube, registry)
    inventory.node_os_channel = node_os_channel.read(spec, inventory.nodes, management)
    inventory.surge_quota = read_surge_quota(spec, inventory.pool_nodes, quotas)
    return evaluate(inventory)
