"""`gpu-rollout verify`: runbook section 5 on the stack's upgraded nodes, as a table or JSON; a passing canary
writes its attestation (``attestations/<stack>/<driver>.json`` under the project, engine_contracts/attestation.py's format),
signed with the key of ``--signing-key FILE`` or ``GPU_ROLLOUT_SIGNING_KEY``.

Exit 0 only when every check passed (and, on a canary stack, the attestation was written); 1 when one failed
or was inconclusive (each reason on stderr), or the attestation could not be written.
"""

from __future__ import annotations

from pathlib import Path
from datetime import UTC, datetime
from typing import Any, cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.table import Table

from checks import kube as k
from checks import validation
from checks.catalogue import CATALOGUE
from checks.metadata import VALIDATION
from checks.objects import Obj, labels_of, status_of
from checks.prometheus import for_stack
from checks.results import CheckResult, Status
from checks.verify_facts import UpgradedNode, VerifyFacts
from checks.verify_read import gather
from rollout import documents, schemas
from rollout import console as consoles
from rollout.console import say
from refusals.exits import Exit
from rollout.live import note_identity
from engine_contracts import attestation
from git_revisions import repository
from gpu_knowledge import gpu_products, labels
from renderers import manifests
from fleetspec.model import DriverOwner, FleetSpec, NodePool, Stage

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.INCONCLUSIVE: "magenta"}


def git_commit(project_dir: Path) -> str:
    """``git rev-parse HEAD`` of the project; ``unknown`` where it is not a git checkout (or git is missing)."""
    return repository.head_commit(project_dir) or attestation.UNKNOWN_COMMIT


def render_table(stack: str, results: list[CheckResult], console: Console) -> None:
    table = Table(title=f"{VALIDATION.title} (stack {stack})", title_justify="left")
    for column in ("status", "check", "subject", "finding"):
        table.add_column(column, overflow="fold")
    for result in results:
        table.add_row(f"[{_STYLE[result.status]}]{result.status.value}[/]", result.id, result.subject, result.message)
    console.print(table)
    counts = {s: sum(r.status == s for r in results) for s in Status}
    console.print(f"{counts[Status.PASS]} pass, {counts[Status.FAIL]} fail, {counts[Status.INCONCLUSIVE]} inconclusive")


def signing_key(path: Path | None) -> Ed25519PrivateKey | None:
    """The key a canary's attestation is signed with: ``--signing-key FILE``, else ``GPU_ROLLOUT_SIGNING_KEY``."""
    if path is not None:
        try:
            pem = path.read_bytes()
        except OSError as exc:
            raise attestation.AttestationError(f"--signing-key {path}: cannot read: {exc.strerror}") from None
        return attestation.read_signing_key(pem, f"--signing-key {path}")
    return attestation.signing_key_from_environment()


def execute(stack: str, spec: FleetSpec, kube: k.Kube, *, project_dir: Path, prometheus_url: str | None,
            as_json: bool, smoke: bool = False, key: Ed25519PrivateKey | None = None) -> Exit:
    """Run the checks; a passing canary (not ``smoke``) writes its attestation, signed with ``key``. ``smoke``:
    the check right after a rollout, before any soak: nothing is attested, and an inconclusive check does not
    fail it."""
    facts = gather(kube, spec, for_stack(spec.validation.prometheus if spec.validation else None, kube,
                                         prometheus_url))
    note_identity(facts.identity)
    results = CATALOGUE.run(validation.VERB, facts)
    not_passed = [r for r in results if r.status != Status.PASS]
    failing = [r for r in results if r.status == Status.FAIL] if smoke else not_passed
    written: Path | None = None
    problem: str | None = None
    if not not_passed and spec.stage == Stage.CANARY and not smoke:
        try:
            if key is None:
                raise attestation.AttestationError(
                    f"no signing key: set {attestation.SIGNING_KEY_ENV} (the PEM text) or give --signing-key FILE; "
                    "the prod gate admits only signed attestations (`gpu-rollout keygen` makes a key pair)")
            sealed = attest(facts, results, stack=stack, git_commit=git_commit(project_dir),
                                       signing_key=key)
            written = attestation.write(project_dir / attestation.ATTESTATION_DIR, sealed)
        except attestation.AttestationError as exc:
            problem = f"attestation not written: {exc}"
    if as_json:
        document = schemas.VerifyDocument(stack=stack, passed=not failing, smoke=smoke,
                                          checks=[schemas.CheckResult.of(r) for r in results],
                                          attestation=str(written) if written else None)
        if problem:
            document.attestationError = problem
        documents.write(document)
    else:
        render_table(stack, results, consoles.stdout())
    for result in not_passed:
        say(f"{result.status.value}: {result.id} {result.subject}: {result.message}")
    if problem:
        say(problem)
    elif written:
        say(f"attestation written: {written}")
    elif smoke:
        say("smoke check: nothing attested; the soak schedule's verify judges the whole soak"
            + (f" (inconclusive now: {len(not_passed) - len(failing)})" if len(not_passed) > len(failing) else ""))
    elif not not_passed:
        say(f"note: stack {stack} is a {spec.stage.value} stack; only a canary stack's verify writes an attestation")
    return Exit.failed_if(bool(failing) or problem is not None)


# ---------------------------------------------------------------- the attestation of a passing canary


def node_image_of(nodes: list[UpgradedNode], pool: NodePool) -> str | None:
    """The node image the pool's upgraded nodes run (AKS node-image label, EKS AMI release of the newest
    generation), where one is known and they all agree."""
    images = {labels_of(n.node).get(labels.AKS_NODE_IMAGE_VERSION) for n in nodes if n.pool.name == pool.name}
    if len(images) == 1 and None not in images:
        return images.pop()
    newest = pool.newest_generation
    return newest.image if newest is not None else None


def _one(pool: NodePool, what: str, values: set[str]) -> str:
    """The one value the pool's upgraded nodes agree on; AttestationError when they show none or several."""
    if len(values) != 1:
        shown = ", ".join(sorted(values)) or "none"
        raise attestation.AttestationError(f"pool {pool.name}: its upgraded nodes show {what} {shown}, not one value: "
                                           "what the canary ran cannot be attested")
    return values.pop()


def _gpus(node: Obj) -> str | None:
    """GPUs on the node: GFD's nvidia.com/gpu.count, else the device plugin's capacity where no MIG slices it."""
    value = labels_of(node).get(labels.GPU_COUNT)
    if value is None and not any(key.startswith(labels.MIG_RESOURCE_PREFIX) for key in status_of(node).get("capacity") or {}):
        value = (status_of(node).get("capacity") or {}).get(labels.GPU_RESOURCE)
    return str(value) if value is not None else None


def _mig_config(node: Obj) -> str:
    """The node's MIG layout (nvidia.com/mig.config); without the label, all-disabled unless MIG devices are
    advertised, which a layout nothing manages shows as ``unmanaged`` (equal to no declared layout)."""
    value = labels_of(node).get(labels.MIG_CONFIG)
    if value:
        return value
    advertised = any(key.startswith(labels.MIG_RESOURCE_PREFIX) for key in status_of(node).get("capacity") or {})
    return "unmanaged" if advertised else labels.MIG_CONFIG_DISABLED


def pool_traffic(facts: VerifyFacts, pool: NodePool) -> tuple[bool, str]:
    """Whether the pool served model traffic during the soak, and what showed it: a declared model whose pods
    on the pool's upgraded nodes answered verify's request and served at least ``validation.minRequests``
    requests Prometheus counted since the soak started (the floor, not one request)."""
    seen = facts.traffic.get(pool.name, [])
    if not seen:
        return False, "no model of the stack runs on the pool's upgraded nodes"
    floor = facts.spec.validation.minRequests if facts.spec.validation else 1000
    notes: list[str] = []
    served = False
    for model, pods, total, problem in seen:
        answered = any(p.outcome == "answered" and p.pod.split("/", 1)[-1] in pods for p in facts.probes)
        # Whether the floor was met, not how many: the count moves with the moment verify asks (the coverage
        # records the number).
        if total is None:
            seen_requests = f"requests not known ({problem})"
        else:
            seen_requests = (f"at least {floor} requests served" if total >= floor
                             else f"fewer than {floor} requests served")
        notes.append(f"{model.name} on {len(pods)} pod(s): {seen_requests} during the soak, "
                     + ("answered verify's request" if answered else "no answer to verify's request"))
        served = served or (answered and total is not None and total >= floor)
    return served, "; ".join(notes)


def pool_coverage(facts: VerifyFacts, pool: NodePool) -> attestation.PoolCoverage:
    """How much of the soak verify judged for the models on the pool's upgraded nodes (the lowest share among
    their comparisons: validation.judged_buckets), and the requests their pods there served over the soak."""
    seen = facts.traffic.get(pool.name, [])
    names = {(model.namespace, model.name) for model, *_ in seen}
    minimum = facts.spec.validation.minBucketRequests if facts.spec.validation else 100
    comparisons = [c for c in facts.comparisons if (c.model.namespace, c.model.name) in names]
    buckets = len(facts.window.buckets()) if facts.window else 0
    shares = [validation.judged_buckets(c, minimum)[0] / len(c.buckets) if c.buckets else 0.0 for c in comparisons]
    return attestation.PoolCoverage(judgedFraction=round(min(shares, default=0.0), 4),
                                    requests=round(sum(total or 0.0 for _, _, total, _ in seen)), buckets=buckets)


def attested_pool(facts: VerifyFacts, pool: NodePool) -> attestation.AttestedPool:
    """What the pool's upgraded nodes are, as the cluster shows them (GFD labels, node info), for the attestation."""
    nodes = [n.node for n in facts.nodes if n.pool.name == pool.name]
    product = _one(pool, labels.GPU_PRODUCT, {gpu_products.base_product(v) for n in nodes
                                              if (v := labels_of(n).get(labels.GPU_PRODUCT))})
    count = _one(pool, labels.GPU_COUNT, {g for n in nodes if (g := _gpus(n)) is not None})
    gpus = int(count) if count.isdigit() else 0
    nvswitch = gpu_products.is_nvswitch_system(product, gpus)
    if nvswitch is None:  # a product the NVSwitch table does not know: the stack's word for it
        nvswitch = pool.nvswitch
    served, traffic = pool_traffic(facts, pool)
    kernels = {str(v) for n in nodes if (v := (status_of(n).get("nodeInfo") or {}).get("kernelVersion"))}
    images = {str(v) for n in nodes if (v := (status_of(n).get("nodeInfo") or {}).get("osImage"))}
    return attestation.AttestedPool.of(
        pool.name, product, node_image_of(facts.nodes, pool), gpus_per_node=gpus, nvswitch=nvswitch,
        fabric_manager=(cast(attestation.FabricManagerSource, manifests.fabric_manager_source(facts.spec, pool))
                        if nvswitch else None),
        mig_config=_one(pool, labels.MIG_CONFIG, {_mig_config(n) for n in nodes}),
        kernel=", ".join(sorted(kernels)) or None, os_image=", ".join(sorted(images)) or None,
        served_traffic=served, traffic=traffic,
    )


def cloud_id(spec: FleetSpec) -> str | None:
    """The canary cluster's cloud identity as the stack declares it: the AKS resource ID or the EKS cluster ARN
    (renderers.manifests.stack_identity exports the same for the prod gate to compare); None: cloud existing."""
    return manifests.cluster_cloud_id(spec)


def kernel_module_type(spec: FleetSpec, driver: str) -> attestation.KernelModuleType | None:
    """The kernel modules the operator's driver loads (gpuOperator.kernelModuleType, ``auto`` resolved by the
    driver branch); None where the node image owns the driver (not the operator's to say)."""
    if spec.driver.owner == DriverOwner.IMAGE:
        return None
    return attestation.resolved_module_type(spec.gpuOperator.kernelModuleType, driver)


def driver_mode(spec: FleetSpec) -> attestation.DriverMode:
    """Who installed the driver on the canary: the node image, per-pool NVIDIADrivers or the ClusterPolicy."""
    if spec.driver.owner == DriverOwner.IMAGE:
        return "image"
    return "nvidiadriver" if spec.gpuOperator.useNvidiaDriverCrd else "clusterpolicy"


def attest(facts: VerifyFacts, results: list[Any], *, stack: str, git_commit: str,
           signing_key: Ed25519PrivateKey | None) -> attestation.Attestation:
    """The sealed, signed attestation of a passing verify (engine_contracts.attestation's format); AttestationError otherwise."""
    soak = facts.soak_start
    if soak is None:
        raise attestation.AttestationError("when the canary's upgrade finished is not known: no soak start")
    drivers = {n.target for n in facts.nodes}
    if len(drivers) != 1:
        raise attestation.AttestationError(f"the upgraded nodes run more than one target ({', '.join(sorted(drivers))})")
    if not facts.kube_system_uid:
        raise attestation.AttestationError("the kube-system namespace shows no uid: the attestation binds the canary's "
                                           "cluster by it")
    driver = drivers.pop()
    modules = kernel_module_type(facts.spec, driver)
    pools = sorted({n.pool.name: n.pool for n in facts.nodes}.values(), key=lambda p: p.name)
    return attestation.seal(
        stack=manifests.qualified_stack(stack),
        stage=facts.spec.stage.value,
        cluster=facts.spec.cluster.name,
        identity=attestation.ClusterIdentity(kubeSystemUid=facts.kube_system_uid, cloudId=cloud_id(facts.spec)),
        driver=driver,
        operator_chart=facts.spec.gpuOperator.chartVersion,
        driver_mode=driver_mode(facts.spec),
        pools=[attested_pool(facts, p).model_copy(update={"kernelModuleType": modules}) for p in pools],
        coverage={p.name: pool_coverage(facts, p) for p in pools},
        checks=[attestation.AttestedCheck(id=r.id, status=r.status.value, subject=r.subject, message=r.message,
                                          evidence=r.evidence or {}) for r in results],
        soak_start=datetime.fromtimestamp(soak, UTC),
        soak_end=datetime.fromtimestamp(facts.now, UTC),
        git_commit=git_commit,
        signing_key=signing_key,
    )
