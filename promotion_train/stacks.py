"""The project's stacks as its stack files declare them: what the workflows deploy, soak and roll back.

Every ``Pulumi.<stack>.yaml`` of the project folder is a stack; its ``stage`` says where it runs (a canary
stage before a prod stage, and from which protected GitHub environment), its ``cluster`` which credentials
a job needs (AKS: Azure OIDC and kubelogin; EKS: an AWS role and ``aws eks get-token``; an existing cluster:
a kubeconfig and its context), and a prod stack's ``promotion`` which canary stack it is promoted from and
after how long a soak. Nothing is hard-coded: a stack file added is a stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fleetspec.base import Stage
from fleetspec.discipline import MaintenanceWindow
from fleetspec.load import SpecError, load_stack_file
from fleetspec.stacks import stack_name

_STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[^/]+)\.ya?ml$")
# The GitHub environment each stage deploys from: protection rules (required reviewers) live there.
ENVIRONMENTS = {Stage.CANARY: "canary", Stage.PROD: "production"}


@dataclass(frozen=True)
class StackFile:
    """One stack as its file declares it. ``problem`` is why the file does not load (the other fields are
    then None): its deploy fails on it, and says so."""

    name: str
    file: str  # Pulumi.<name>.yaml, relative to the project folder
    stage: Stage | None = None
    cloud: str | None = None
    canary: str | None = None  # a prod stack's promotion.canaryStack, by its own name
    min_soak_hours: float | None = None  # a prod stack's promotion.minSoakHours
    credentials: tuple[tuple[str, str], ...] = ()  # what a job needs to reach the stack's cloud and cluster
    problem: str | None = None
    window: MaintenanceWindow | None = None  # rollout.maintenanceWindow: when its rollout may run

    @property
    def environment(self) -> str:
        """The GitHub environment the stack deploys from (a stack whose file does not load: the strictest)."""
        return ENVIRONMENTS[self.stage] if self.stage is not None else ENVIRONMENTS[Stage.PROD]


def _read(path: Path) -> StackFile:
    name = _STACK_FILE.match(path.name)["stack"]  # type: ignore[index]  # only stack files are read
    try:
        spec = load_stack_file(path)
    except SpecError as error:
        problems = "; ".join(p.one_line() for p in error.problems)
        return StackFile(name, path.name, problem=problems)
    cluster = spec.cluster
    found: list[tuple[str, str]] = []
    if cluster.aks is not None:
        found += [("aksResourceGroup", cluster.aks.resourceGroup), ("aksClusterName", cluster.aks.clusterName)]
    if cluster.eks is not None:
        found += [("eksClusterName", cluster.eks.clusterName), ("eksRegion", cluster.eks.region)]
    if cluster.existing is not None:
        found.append(("existingContext", cluster.existing.context))
    promotion = spec.promotion
    return StackFile(
        name, path.name, spec.stage, cluster.cloud.value,
        stack_name(promotion.canaryStack) if promotion is not None else None,
        promotion.minSoakHours if promotion is not None else None, tuple(found),
        window=spec.rollout.maintenanceWindow,
    )


def stack_files(project_dir: Path) -> list[StackFile]:
    """Every stack file of the project folder, by stack name."""
    paths = [p for p in project_dir.iterdir() if _STACK_FILE.match(p.name) and p.is_file()]
    return [_read(path) for path in sorted(paths, key=lambda p: p.name)]


def stage_order(stack: StackFile) -> tuple[int, str]:
    """Canary stages first, then prod, then files that do not load; by name within a stage."""
    rank = {Stage.CANARY: 0, Stage.PROD: 1}
    return (rank[stack.stage] if stack.stage is not None else 2, stack.name)


def prod_stacks_of(stacks: list[StackFile], canary: str) -> list[StackFile]:
    """The prod stacks promoted from ``canary`` (their promotion.canaryStack)."""
    return [s for s in stacks if s.stage == Stage.PROD and s.canary == canary]
