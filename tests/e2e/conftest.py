"""Session fixtures of the e2e tier: one control plane per test run, the GPU fleet on it, and the real
`pulumi` CLI with the two existing-cluster example stacks pointed at it.

Run by `make e2e` (which builds the tools first); `make test` never collects this folder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from engine_contracts.attestation import Attestation
from tests.e2e import fleet
from tests.e2e.controlplane import ControlPlane, Rest, kubeconfig_document, missing_tools
from tests.e2e.pulumi_cli import Pulumi, make_policy_launcher, make_project
from tests.e2e.pulumi_cli import missing_tools as missing_pulumi_tools

CRD_DIR = Path(__file__).parent.parent / "data" / "crds" / "v26.7.0"  # provenance: tests/data/crds
CONTEXT = "kwok-lab"  # the test cluster's context: not the one the example stacks declare
STACKS = ("existing-canary", "existing-prod")


def wait_for(what: str, probe: Callable[[], object], timeout: float = 90.0, interval: float = 0.5) -> object:
    """``probe()`` until it returns something truthy; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# ---------------------------------------------------------------------------- control plane and fleet


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def control_plane(workdir: Path) -> Iterator[ControlPlane]:
    missing = missing_tools()
    if missing:
        pytest.fail(f"e2e tools not built: {', '.join(missing)}; run `make e2e` (or e2e/build.sh)", pytrace=False)
    plane = ControlPlane(workdir / "cluster", context=CONTEXT)
    plane.workdir.mkdir()
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def rest(control_plane: ControlPlane) -> Rest:
    return Rest(control_plane)


def install_crds(rest: Rest) -> list[str]:
    names = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        rest.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        names.append(crd["metadata"]["name"])
    for name in names:
        def established(name: str = name) -> bool:
            crd = rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in (crd.get("status") or {}).get("conditions") or [])
        wait_for(f"CRD {name} Established", established, timeout=60)
    return names


def _path(obj: dict) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {"Node": "nodes", "Namespace": "namespaces", "Deployment": "deployments", "DaemonSet": "daemonsets",
              "PodDisruptionBudget": "poddisruptionbudgets", "ClusterPolicy": "clusterpolicies"}[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    namespace = obj["metadata"].get("namespace")
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def seed_fleet(rest: Rest) -> None:
    for namespace in (fleet.OPERATOR_NAMESPACE, fleet.MODEL_NAMESPACE, fleet.MONITORING_NAMESPACE):
        rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": namespace}})
    for node in fleet.nodes():
        rest.create("/api/v1/nodes", node)
    policy = fleet.cluster_policy()
    rest.create(_path(policy) + "?fieldManager=helm", policy)  # as the operator chart installs it
    rest.merge_patch("/apis/nvidia.com/v1/clusterpolicies/cluster-policy/status",
                     {"status": fleet.CLUSTER_POLICY_STATUS})
    for obj in [fleet.driver_daemonset(), *fleet.system_objects(), *map(fleet.model_deployment, fleet.MODELS)]:
        rest.create(_path(obj), obj)


def fleet_ready(rest: Rest) -> bool:
    nodes = rest.items("/api/v1/nodes")
    if len(nodes) != len(fleet.nodes()) or not all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or [])
        for n in nodes
    ):
        return False
    models = rest.items(f"/api/v1/namespaces/{fleet.MODEL_NAMESPACE}/pods")
    drivers = rest.items(f"/api/v1/namespaces/{fleet.OPERATOR_NAMESPACE}/pods")
    gpu_nodes = sum(p.nodes for p in fleet.POOLS)
    return (len(models) == sum(m.replicas for m in fleet.MODELS) and all(map(ready, models))
            and len(drivers) == gpu_nodes and all(map(ready, drivers)))


@pytest.fixture(scope="session")
def cluster(control_plane: ControlPlane, rest: Rest) -> Rest:
    """The control plane with the operator CRDs and the GPU fleet, every pod Ready."""
    install_crds(rest)
    seed_fleet(rest)
    try:
        wait_for("the fleet's nodes and pods Ready", lambda: fleet_ready(rest), timeout=120)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{control_plane.logs()}") from None
    return rest


@contextmanager
def running_cluster(workdir: Path, context: str) -> Iterator[tuple[ControlPlane, Rest]]:
    """Another control plane (its own ports and data folder), with the operator CRDs and the same GPU fleet, every
    pod Ready; stopped on leaving. The fleet tests (tests/e2e/test_fleet.py) run their clusters so, beside the
    session's."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"e2e tools not built: {', '.join(missing)}; run `make e2e` (or e2e/build.sh)", pytrace=False)
    plane = ControlPlane(workdir, context=context)
    plane.workdir.mkdir(parents=True)
    try:
        plane.start()
        rest = Rest(plane)
        install_crds(rest)
        seed_fleet(rest)
        try:
            wait_for(f"the fleet of {context} Ready", lambda: fleet_ready(rest), timeout=180)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{plane.logs()}") from None
        yield plane, rest
    finally:
        plane.stop()


# ---------------------------------------------------------------------------- pulumi


@pytest.fixture(scope="session")
def project(workdir: Path) -> Path:
    return make_project(workdir / "project")


@pytest.fixture(scope="session")
def policy_pack(workdir: Path) -> Path:
    return make_policy_launcher(workdir / "policy-pack")


@pytest.fixture(scope="session")
def pulumi(cluster: Rest, control_plane: ControlPlane, project: Path, workdir: Path) -> Pulumi:
    """The CLI with both stacks initialised in a file backend, their cluster set to the test cluster."""
    missing = missing_pulumi_tools()
    if missing:
        pytest.fail(f"e2e tools not built: {', '.join(missing)}; run `make e2e` (or e2e/build.sh)", pytrace=False)
    ambient = workdir / "ambient-kubeconfig"
    nowhere = kubeconfig_document("https://127.0.0.1:1", control_plane.workdir / "certs" / "ca.crt", "lab-gpu-1")
    ambient.write_text(json.dumps(nowhere))
    cli = Pulumi(project, workdir, ambient)
    for stack in STACKS:
        cli.run("stack", "init", stack, "--non-interactive")
        cli.run("config", "set", "--path", "--stack", stack,
                "gpu-driver-upgrade:cluster.existing.kubeconfig", str(control_plane.kubeconfig))
        cli.run("config", "set", "--path", "--stack", stack, "gpu-driver-upgrade:cluster.existing.context", CONTEXT)
    return cli


def e2e_prod_config() -> dict:
    """The prod pack config the e2e stacks are judged by: the examples' own (policy/examples/prod.json, the only one
    that trusts the example key, which signs the example attestations), its scope widened to every stack of the
    e2e file backend's project (the tests deploy variant prod stacks of their own names). Never a team's config."""
    from policy.evaluate import EXAMPLES_CONFIG_DIR

    config = json.loads((EXAMPLES_CONFIG_DIR / "prod.json").read_text())
    for entry in config["canary-attested"]["trustedKeys"]:
        entry["scope"] = ["organization/gpu-driver-upgrade/*"]
    return config


def policy_args(pack: Path, stage: str) -> list[str]:
    if stage != "prod":
        return ["--policy-pack", str(pack), "--policy-pack-config", str(Path("policy") / f"{stage}.json")]
    written = pack.parent / "e2e-prod-policy.json"
    written.write_text(json.dumps(e2e_prod_config()))
    return ["--policy-pack", str(pack), "--policy-pack-config", str(written)]


@pytest.fixture(scope="session")
def canary_up(pulumi: Pulumi, policy_pack: Path):
    """`pulumi up` of the canary stack, with its policy pack (once per session)."""
    return pulumi.run("up", "--stack", "existing-canary", "--yes", "--non-interactive", "--skip-preview",
                      *policy_args(policy_pack, "canary"), program=True)


@pytest.fixture(scope="session")
def kube_system_uid(rest: Rest) -> Iterator[str]:
    """The UID this control plane's API server gave kube-system, which the canary stack reads and exports and the
    prod gate compares with an attestation's. The attestations the tests seal (tests/policy/attested.py) stand in
    for a verify of this cluster, so they record this UID for the session."""
    uid = rest.get("/api/v1/namespaces/kube-system")["metadata"]["uid"]
    from tests.policy import attested

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attested, "KUBE_SYSTEM_UID", uid)
        yield uid


def attested_here(rest: Rest, stack: str = "existing-canary") -> Attestation:
    """The attestation the example ships for ``stack``'s driver, sealed again as a `gpu-rollout verify` of the
    cluster behind ``rest`` would seal it: that cluster's kube-system UID and the kernel its nodes run (the shipped
    one was made on the test cluster of the fast tier, whose UID and kernels differ: the gate and preflight's
    attested-kernel would rightly refuse it here), signed with the example key."""
    from engine_contracts import attestation
    from fleetspec.load import spec_from_config
    from tests.conftest import PROJECT_DIR, example_signing_key, stack_config

    driver = spec_from_config(stack_config(stack)).driver.version
    shipped = attestation.load(attestation.path_for(PROJECT_DIR / attestation.ATTESTATION_DIR, stack, driver))
    uid = rest.get("/api/v1/namespaces/kube-system")["metadata"]["uid"]
    return attestation.seal(
        stack=shipped.stack, stage=shipped.stage, cluster=shipped.cluster,
        identity=shipped.identity.model_copy(update={"kubeSystemUid": uid}), driver=shipped.driver,
        operator_chart=shipped.operatorChart, driver_mode=shipped.driverMode,
        pools=[p.model_copy(update={"kernel": fleet.KERNEL}) for p in shipped.pools], checks=shipped.checks,
        soak_start=shipped.soakStart, soak_end=shipped.soakEnd, git_commit=shipped.gitCommit,
        signing_key=example_signing_key(), coverage=shipped.coverage,
    )


@pytest.fixture(scope="session")
def canary_attested(canary_up, project: Path, rest: Rest, kube_system_uid: str) -> Path:
    """The canary's attestation in the project's attestations/existing-canary/, which the prod gate reads.

    The e2e project is a folder of its own (tests/e2e/pulumi_cli.py links the program, not attestations/):
    the attestation the example ships is carried in, as a pull request carries it, sealed again for this
    cluster (:func:`attested_here`)."""
    from engine_contracts import attestation

    copy = attestation.write(project / attestation.ATTESTATION_DIR, attested_here(rest))
    attestation.load(copy)  # intact, or the session stops here
    return copy


@pytest.fixture(scope="session")
def prod_up(pulumi: Pulumi, policy_pack: Path, canary_up, canary_attested):
    """`pulumi up` of the prod stack after the canary's, which attested its driver (once per session)."""
    return pulumi.run("up", "--stack", "existing-prod", "--yes", "--non-interactive", "--skip-preview",
                      *policy_args(policy_pack, "prod"), program=True)
