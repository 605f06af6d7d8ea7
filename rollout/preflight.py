"""`gpu-rollout preflight`: the read-only live checks, as a table grouped by runbook section or JSON."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from checks import kube as k
from checks import preflight, quota
from checks.attested import read_attested
from checks.registry import Registry
from checks.results import CheckResult, Status, any_failed
from rollout import documents, schemas
from rollout import console as consoles
from refusals.exits import Exit
from cloud_credentials.azure_management import AzureManagement
from fleetspec.model import Cloud, FleetSpec

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


def render_table(stack: str, results: list[CheckResult], console: Console) -> None:
    for section in preflight.sections():
        table = Table(title=f"{section.title} (stack {stack})", title_justify="left", show_lines=False)
        for column in ("status", "check", "subject", "finding"):
            table.add_column(column, overflow="fold")
        for result in results:
            if preflight.section_of(result) == section:
                table.add_row(f"[{_STYLE[result.status]}]{result.status.value}[/]", result.id, result.subject,
                              result.message)
        console.print(table)
    counts = {s: sum(r.status == s for r in results) for s in Status}
    console.print(f"{counts[Status.PASS]} pass, {counts[Status.WARN]} warn, {counts[Status.FAIL]} fail")


def azure_management(spec: FleetSpec) -> AzureManagement | None:
    """Resource Manager, with the Azure identity in use, for an AKS stack; None for any other."""
    return AzureManagement() if spec.cluster.cloud == Cloud.AKS else None


def askers(spec: FleetSpec) -> tuple[Registry, AzureManagement | None, quota.CloudQuotas | None]:
    """What preflight asks besides the cluster, for the verb and the train alike: the driver image's registry
    (kernel-precompiled asks it for the precompiled images the change needs), on AKS Resource Manager
    (node-os-channel reads the managed cluster's node OS upgrade channel), and the cloud's quota, read with the
    stack's cloud identity (surge-quota; not read: a warning)."""
    return Registry(), azure_management(spec), quota.reader_for(spec)


def execute(stack: str, spec: FleetSpec, kube: k.Kube, as_json: bool, project_dir: Path) -> Exit:
    # The canary's attestations of the drivers prod moves to, from the project: attested-kernel compares them.
    registry, management, quotas = askers(spec)
    results = preflight.run_preflight(kube, spec, read_attested(project_dir, spec), registry, management, quotas)
    if as_json:
        documents.write(schemas.PreflightDocument(stack=stack, checks=[schemas.CheckResult.of(r) for r in results]))
    else:
        render_table(stack, results, consoles.stdout())
    return Exit.failed_if(any_failed(results))
