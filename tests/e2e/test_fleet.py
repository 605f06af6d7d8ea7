"""`gpu-rollout fleet advance` (issue 26) in the real engine, across two real API servers: a project of its own (a git
repository, as main is) with the canary stack and a prod stack on cluster A (lab-gpu-1) and a second prod stack on
cluster B (named inference-weu-1, another example fleet), each cluster a control plane of its own beside the session's (tests/e2e/conftest.py,
``running_cluster``), in a file backend of its own.

The train takes the driver bump 570.195.03 -> 580.173.02 through both waves: the canary goes up (the Automation API,
the policy pack of the canary stage); the test plays the operator on its nodes; the train waits for the canary's
attestation, which reaches the prod wave only through a merge (here: the shipped, signed attestation committed, as
the e2e prod tests answer the gate); then both prod stacks go up at once, each `up` judged by the prod gate.

`advance` is killed (SIGKILL) while the prod wave's `up`s run: the next `advance` is refused while the dead one's
lease lasts, and once it expired the train goes on from what the backend and the clusters show, without an `up`
done twice or one skipped. A failed validation in cluster B halts the train, pausing every stack it started in both
clusters; `fleet resume` and the operator finishing end the train.

`waitFor.verify: none`: `verify --smoke` cannot pass on kwok (no model server answers behind the pod proxy, the
driver pods are not replaced); it is tested on the fake API (tests/rollout/test_fleet_verbs.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from engine_contracts import attestation
from gpu_knowledge import labels
from fleetspec.discipline import WEEKDAYS
from fleetspec.load import load_stack_file
from tests.e2e import fleet
from tests.e2e.conftest import attested_here, e2e_prod_config, running_cluster, wait_for
from tests.e2e.controlplane import ControlPlane, Rest, kubeconfig_document
from tests.e2e.pulumi_cli import CHECKOUT, PROJECT_LINKS, VENV_PYTHON, Pulumi, make_policy_launcher
from workload import result as job_result

CANARY, PROD, PROD_B = "existing-canary", "existing-prod", "existing-prod-b"
NEW = "580.173.02"
# Cluster B takes the name of another example fleet: the prod gate admits the example key, which signed the shipped
# attestation, only on the example fleets (canary-attested; engine_contracts/attestation.py EXAMPLE_CLUSTERS).
CLUSTER_B = "inference-weu-1"
LEASE_SECONDS = 15
FLEET = {
    "waves": [
        {"name": "canary", "stacks": [CANARY], "waitFor": {"verify": "none", "attestation": True}},
        {"name": "prod", "stacks": [PROD, PROD_B], "maxConcurrent": 2, "waitFor": {"verify": "none"}},
    ],
    "lease": {"stack": CANARY, "durationSeconds": LEASE_SECONDS},
}
GIT_ENV = {"GIT_AUTHOR_NAME": "fleet e2e", "GIT_AUTHOR_EMAIL": "fleet@example.invalid",
           "GIT_COMMITTER_NAME": "fleet e2e", "GIT_COMMITTER_EMAIL": "fleet@example.invalid",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Train:
    project: Path
    pulumi: Pulumi
    launcher: Path
    clusters: dict[str, tuple[ControlPlane, Rest]]  # "a", "b"
    logs: Path

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.project, capture_output=True, text=True, check=True,
                              env={**os.environ, **GIT_ENV}).stdout.strip()

    def merge(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    def command(self, *args: str) -> list[str]:
        return [str(VENV_PYTHON), "-m", "rollout", "fleet", *args, "--project-dir", str(self.project)]

    def run(self, *args: str) -> tuple[int, dict, str]:
        proc = subprocess.run(self.command(*args), cwd=CHECKOUT, env=self.pulumi.env, capture_output=True,
                              text=True, timeout=600, check=False)
        with (self.logs / "advance.log").open("a") as log:
            log.write(f"$ fleet {' '.join(args)} -> {proc.returncode}\n{proc.stderr}\n")
        try:
            document = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except ValueError:
            raise AssertionError(f"fleet {args}: not JSON:\n{proc.stdout}\n{proc.stderr}") from None
        return proc.returncode, document, proc.stderr

    def advance(self) -> tuple[int, dict, str]:
        return self.run("advance", "--yes", "--json", "--policy-pack", str(self.launcher))

    def history(self, stack: str) -> list[dict]:
        result = self.pulumi.run("stack", "history", "--stack", stack, "--json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 and result.stdout.strip() else []

    def rest(self, stack: str) -> Rest:
        return self.clusters["b" if stack == PROD_B else "a"][1]


def stack_document(name: str, source: str, plane: ControlPlane, cluster_name: str) -> dict:
    document = yaml.safe_load((CHECKOUT / f"Pulumi.{source}.yaml").read_text())
    config = document["config"]
    config["gpu-driver-upgrade:cluster"]["name"] = cluster_name
    config["gpu-driver-upgrade:cluster"]["existing"] = {"kubeconfig": str(plane.kubeconfig),
                                                        "context": plane.context}
    if "gpu-driver-upgrade:rollout" in document["config"]:  # a prod stack's window, open whenever the test runs
        config["gpu-driver-upgrade:rollout"]["maintenanceWindow"] = {
            "timeZone": "UTC", "weekly": [{"days": list(WEEKDAYS), "start": "00:00", "end": "24:00"}]}
    return document


@pytest.fixture(scope="module")
def train(workdir: Path) -> Iterator[Train]:
    root = workdir / "fleet"
    with running_cluster(root / "cluster-a", "fleet-a") as a, running_cluster(root / "cluster-b", "fleet-b") as b:
        project = root / "project"
        project.mkdir()
        shutil.copy2(CHECKOUT / "Pulumi.yaml", project / "Pulumi.yaml")
        for name in PROJECT_LINKS:
            if name != "policy":
                (project / name).symlink_to(CHECKOUT / name)
        # The pack's folder as the checkout has it, but for the prod config the trains' ups read
        # (policy/<stage>.json): the shipped one trusts no key; the e2e stacks' attestations are signed with the
        # example key, which the examples' config trusts (e2e_prod_config).
        (project / "policy").mkdir()
        for entry in (CHECKOUT / "policy").iterdir():
            if entry.name not in ("prod.json", "__pycache__"):
                (project / "policy" / entry.name).symlink_to(entry)
        (project / "policy" / "prod.json").write_text(json.dumps(e2e_prod_config()))
        for name, source, (plane, _), cluster_name in ((CANARY, CANARY, a, "lab-gpu-1"), (PROD, PROD, a, "lab-gpu-1"),
                                                       (PROD_B, PROD, b, CLUSTER_B)):
            (project / f"Pulumi.{name}.yaml").write_text(
                yaml.safe_dump(stack_document(name, source, plane, cluster_name), sort_keys=False))
        (project / "Fleet.yaml").write_text(yaml.safe_dump(FLEET, sort_keys=False))
        ambient = root / "ambient-kubeconfig"
        ambient.write_text(json.dumps(kubeconfig_document("https://127.0.0.1:1", a[0].workdir / "certs" / "ca.crt",
                                                          "nowhere")))
        found = Train(project, Pulumi(project, root, ambient), make_policy_launcher(root / "policy-pack"),
                      {"a": a, "b": b}, root)
        found.git("init", "-q", "-b", "main")
        for stack in (CANARY, PROD, PROD_B):  # as a person creates a stack: its salt lands in the stack file
            found.pulumi.run("stack", "init", stack, "--non-interactive")
        found.merge("a fleet of three stacks on two clusters")
        yield found


def nodes_of(pool: str) -> list[str]:
    return fleet.node_names(next(p for p in fleet.POOLS if p.name == pool))


def upgrade(rest: Rest, nodes: list[str]) -> None:
    """The operator upgrades each node: through upgrade-required to upgrade-done, GFD reporting the new driver."""
    for node in nodes:
        rest.merge_patch(f"/api/v1/nodes/{node}?fieldManager=gpu-operator",
                         {"metadata": {"labels": {labels.UPGRADE_STATE: "upgrade-required"}}})
        rest.merge_patch(f"/api/v1/nodes/{node}?fieldManager=gpu-operator",
                         {"metadata": {"labels": {labels.UPGRADE_STATE: labels.UPGRADE_DONE,
                                                  **fleet.driver_labels(NEW)}}})


def failed_validation(node: str) -> dict:
    """What the validation job's pod writes on its node of cluster B after a failed validation on the new driver."""
    spec = load_stack_file(CHECKOUT / f"Pulumi.{PROD}.yaml")
    assert spec.validation is not None
    checks = [job_result.Check(c, job_result.FAIL if c == "tokens-per-second" else job_result.PASS, f"{c}: 12.0")
              for c in job_result.CHECKS]
    result = job_result.Result(
        node=node, pool="l40s-serving", stage="prod", cluster=CLUSTER_B, targetDriver=NEW,
        image=spec.validation.image, model=spec.validation.model, program="sha256:" + "ab" * 32,
        startedAt="2026-12-09T10:00:00Z", finishedAt="2026-12-09T10:05:00Z", durationSeconds=300.0, checks=checks)
    return job_result.node_patch(result)


def skipped(rest: Rest, stack: str) -> set[str]:
    return {n["metadata"]["name"] for n in rest.items("/api/v1/nodes")
            if (n["metadata"].get("labels") or {}).get(labels.SKIP_UPGRADE) == "true"
            and (n["metadata"].get("annotations") or {}).get(labels.ANNOTATION_PAUSED_BY) == stack}


def succeeded_updates(train: Train, stack: str) -> int:
    return sum(u.get("kind") == "update" and u.get("result") == "succeeded" for u in train.history(stack))


def test_the_canary_goes_up_first_and_the_prod_wave_waits_for_its_merged_attestation(train: Train) -> None:
    code, doc, err = train.advance()
    assert code == 0, err
    assert [u["stack"] for u in doc["ups"]] == [CANARY] and doc["ups"][0]["ok"], err
    driver = train.rest(CANARY).get("/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-l40s-canary")
    assert driver["spec"]["version"] == NEW
    lease = train.rest(CANARY).get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
                                   "gpu-driver-upgrade-fleet")
    assert not lease["spec"].get("holderIdentity")  # released when the step was taken
    (update,) = train.history(CANARY)
    assert update["environment"]["git.head"] == train.git("rev-parse", "HEAD")
    assert update["environment"].get("git.dirty") != "true"

    code, doc, err = train.advance()  # the canary rolls out: nothing is brought up again
    assert code == 0 and doc["ups"] == [] and doc["waves"][0]["stacks"][0]["status"] == "rolling", err

    upgrade(train.rest(CANARY), nodes_of("l40s-canary") + nodes_of("h100-canary"))
    code, doc, err = train.advance()
    assert code == 0 and doc["ups"] == [], err
    assert doc["waves"][0]["status"] == "waiting", doc["waves"][0]
    assert "the attestation of existing-canary's driver" in doc["blocked"][0]
    assert succeeded_updates(train, CANARY) == 1


def test_killed_mid_wave_the_next_advance_finishes_without_redoing_or_skipping(train: Train) -> None:
    # The canary's verify on cluster A, as soak.yml's pull request brings it (the shipped one sealed for A).
    attestation.write(train.project / attestation.ATTESTATION_DIR, attested_here(train.clusters["a"][1]))
    train.merge("attestation: existing-canary verified 580.173.02 (soak.yml's pull request)")

    locks = train.logs / "state" / ".pulumi" / "locks"
    with (train.logs / "killed.log").open("w") as log:
        killed = subprocess.Popen(train.command("advance", "--yes", "--policy-pack", str(train.launcher)),  # noqa: S603
                                  cwd=CHECKOUT, env=train.pulumi.env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for("an `up` of the prod wave in the backend", lambda: killed.poll() is None and any(
                path.is_file() for path in locks.rglob("*.json")), timeout=180, interval=0.2)
        finally:
            killed.send_signal(signal.SIGKILL)  # the advance alone: the `up` it started goes on in its worker
            killed.wait(timeout=30)

    code, _, err = train.advance()  # the dead advance's lease has not expired yet
    assert code == 1 and "another `fleet advance` holds the train's lease" in err, err

    def finished() -> bool:
        code, doc, err = train.advance()
        assert code == 0, err
        prods = doc["waves"][1]["stacks"]
        return all(s["status"] == "rolling" for s in prods)

    time.sleep(LEASE_SECONDS)
    wait_for("both prod stacks up and rolling out", finished, timeout=420, interval=2)
    assert succeeded_updates(train, PROD) == 1 and succeeded_updates(train, PROD_B) == 1
    assert all(len(train.history(stack)) == 1 for stack in (PROD, PROD_B))  # no `up` done twice, none failed
    for stack in (PROD, PROD_B):
        driver = train.rest(stack).get("/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-l40s-serving")
        assert driver["spec"]["version"] == NEW  # released in wave 1, admitted by the prod gate
        held = train.rest(stack).get("/apis/nvidia.com/v1alpha1/nvidiadrivers/gpu-h100-serving")
        assert held["spec"]["version"] == "570.195.03"


def test_a_failed_validation_in_cluster_b_halts_the_train_in_both_clusters(train: Train) -> None:
    a, b = train.rest(PROD), train.rest(PROD_B)
    serving = nodes_of("l40s-serving")
    upgrade(a, serving[:1])
    upgrade(b, serving[:1])
    b.merge_patch(f"/api/v1/nodes/{serving[0]}?fieldManager=gpu-validation", failed_validation(serving[0]))

    code, doc, err = train.advance()
    assert code == 1, err
    assert doc["halt"]["stack"] == PROD_B and doc["halt"]["kind"] == "validation-failed", doc["halt"]
    assert skipped(a, PROD) == set(serving[1:]) and skipped(b, PROD_B) == set(serving[1:])
    assert skipped(a, CANARY) == set()  # every canary node is done: nothing to hold back
    code, doc, err = train.advance()
    assert code == 1 and "the train is halted since" in err and doc["ups"] == [], err

    b.merge_patch(f"/api/v1/nodes/{serving[0]}", {"metadata": {"annotations": {job_result.HOLD_ANNOTATION: None}},
                                                  "spec": {"unschedulable": None}})  # what release-node does
    code, _, err = train.run("resume")
    assert code == 0, err
    assert skipped(a, PROD) == set() and skipped(b, PROD_B) == set()
    upgrade(a, serving[1:])
    upgrade(b, serving[1:])
    code, doc, err = train.advance()
    assert code == 0 and doc["complete"], (err, doc["blocked"])
    assert [succeeded_updates(train, s) for s in (CANARY, PROD, PROD_B)] == [1, 1, 1]
    code, status, _ = train.run("status", "--json")
    assert code == 0 and [w["status"] for w in status["waves"]] == ["done", "done"] and status["halted"] is None


def test_a_halt_with_the_lease_s_cluster_stopped_pauses_the_other_cluster_s_nodes(train: Train) -> None:
    """The emergency brake does not depend on one cluster: cluster A (the Lease's, the canary's) stopped, `fleet
    halt` still records the halt in cluster B and pauses its nodes not done, and says what it could not reach."""
    b = train.rest(PROD_B)
    serving = nodes_of("l40s-serving")
    for node in serving[:2]:  # the next driver on its way in cluster B: two nodes not done
        b.merge_patch(f"/api/v1/nodes/{node}?fieldManager=gpu-operator",
                      {"metadata": {"labels": {labels.UPGRADE_STATE: "upgrade-required"}}})
    train.clusters["a"][0].stop()
    code, doc, err = train.run("halt", "--reason", "Xid 79 in cluster B", "--json")
    assert code == 1, err  # what it could not reach is a failure, after doing the rest
    paused = {p["stack"]: p for p in doc["paused"]}
    assert paused[PROD_B]["error"] is None and set(paused[PROD_B]["changed"]) == set(serving[:2])
    assert paused[CANARY]["error"] and paused[PROD]["error"]
    assert skipped(b, PROD_B) == set(serving[:2])
    records = {r["cluster"]: r for r in doc["records"]}
    assert records[CLUSTER_B]["halted"]["cause"] == "halted by hand: Xid 79 in cluster B" and records[CLUSTER_B]["changed"]
    assert records["lab-gpu-1"]["error"] and records["lab-gpu-1"]["halted"] is None
    lease = b.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpu-driver-upgrade-fleet")
    halted = json.loads(lease["metadata"]["annotations"][labels.ANNOTATION_FLEET_HALTED])
    assert halted["cause"] == "halted by hand: Xid 79 in cluster B"
    assert "cluster lab-gpu-1: its halt record could not be written" in err
