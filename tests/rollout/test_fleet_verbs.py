"""`gpu-rollout fleet status|advance|halt|resume` (rollout/fleet.py) against a small fleet of three clusters on the fake
API: a canary stack and two prod stacks (the existing-cluster examples, the second prod stack on a cluster of its
own), in a git repository with real commits, and a backend that keeps each stack's updates as `pulumi stack history`
does and brings a stack up by adding one (the engine itself is the e2e tier's: tests/e2e/test_fleet.py).

The tests play the operator (nodes through their upgrade), the validation job (a failed validation holding a node)
and the person merging the canary's attestation, and check what the train does at each step: only what the world
shows decides, so each `advance` is a fresh call with nothing carried over."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from checks.lease import TrainLease
from pulumi_backend import pulumi_config
from rollout import fleet, schemas
from promotion_train.deploy_plan import Deployed
from rollout.engine import UpResult
from refusals.errors import Declined
from refusals.exits import Exit
from rollout.fleet_project import FleetProject, load_project
from promotion_train.stacks import StackFile
from engine_contracts import attestation
from gpu_knowledge import labels
from fleetspec.base import Stage
from fleetspec.fleet_file import LEASE_NAME, LEASE_NAMESPACE
from fleetspec.load import read_stack_file
from tests.conftest import PROJECT_DIR
from tests.fakekube.fixtures import driver_labels, finish_upgrade, move_node, seed
from tests.fakekube.plugin import FAST
from tests.fakekube.server import FakeKube, Fault
from tests.rollout.gitrepo import GitRepo
from workload import result as job_result
from tests.rollout.json_contract import document_of

CANARY, PROD, PROD_B = "existing-canary", "existing-prod", "existing-prod-b"
STACKS = (CANARY, PROD, PROD_B)
OLD, NEW = "570.195.03", "580.173.02"
FLEET_FILE = {
    "waves": [
        {"name": "canary", "stacks": [CANARY], "waitFor": {"verify": "none", "attestation": True}},
        {"name": "prod", "stacks": [PROD, PROD_B], "maxConcurrent": 2, "waitFor": {"verify": "none"}},
    ],
    "lease": {"durationSeconds": 60},
}


class Backend:
    """Each stack's updates as the backend keeps them, newest first; `up` adds a succeeded one."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.updates: dict[str, list[pulumi_config.Update]] = {}
        self.ups: list[fleet.UpRequest] = []
        self.fail: set[str] = set()
        self.locks: set[str] = set()

    def file_config(self, stack: str) -> dict[str, pulumi_config.Entry]:
        raw = read_stack_file(self.repo.root / f"Pulumi.{stack}.yaml")
        return pulumi_config.parse_config({k: {"value": v, "secret": False} for k, v in raw.items()})

    def deployed(self, stacks: list[StackFile]) -> dict[str, Deployed]:
        return {s.name: Deployed(self.updates.get(s.name), self.file_config(s.name)) for s in stacks}

    def locked(self, stack: str) -> bool:
        return stack in self.locks

    def up(self, requests: list[fleet.UpRequest]) -> list[UpResult]:
        results = []
        for request in requests:
            self.ups.append(request)
            past = self.updates.setdefault(request.stack, [])
            result = "failed" if request.stack in self.fail else "succeeded"
            past.insert(0, pulumi_config.Update(len(past) + 1, "update", result, True, "2026-12-09T10:00:00Z",
                                                self.file_config(request.stack), request.message,
                                                {"git.head": self.repo.git("rev-parse", "HEAD")}))
            results.append(UpResult(request.stack, result == "succeeded", f"update {len(past)} {result}"))
        return results

    def upped(self) -> list[str]:
        return [r.stack for r in self.ups]


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "fleet")
    for path in repo.root.glob("Pulumi.*.yaml"):
        if path.name != "Pulumi.yaml" and path.stem.removeprefix("Pulumi.") not in (CANARY, PROD):
            path.unlink()
    for stack in (PROD,):  # the rollout may run whenever the test does
        repo.edit(stack, "rollout", lambda rollout: rollout.pop("maintenanceWindow"))
    second = yaml.safe_load((repo.root / f"Pulumi.{PROD}.yaml").read_text())
    second["config"]["gpu-driver-upgrade:cluster"]["name"] = "lab-gpu-2"
    second["config"]["gpu-driver-upgrade:cluster"]["existing"]["context"] = "lab-gpu-2"
    (repo.root / f"Pulumi.{PROD_B}.yaml").write_text(yaml.safe_dump(second, sort_keys=False))
    (repo.root / "Fleet.yaml").write_text(yaml.safe_dump(FLEET_FILE, sort_keys=False))
    repo.commit("a fleet of three stacks on two clusters")
    return repo


@pytest.fixture
def clusters(repo: GitRepo, tmp_path: Path) -> Iterator[dict[str, FakeKube]]:
    """One fake API per stack, seeded as the stack's cluster before the rollout (every node on the old driver)."""
    project = load_project(repo.root)
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    fakes = {name: FakeKube() for name in STACKS}
    try:
        for name, fake in fakes.items():
            fake.__enter__()
            seed(fake, project.specs[name])
            fake.write_kubeconfig(folder / name, context=project.specs[name].cluster.existing.context)
        yield fakes
    finally:
        for fake in fakes.values():
            fake.__exit__(None, None, None)


@pytest.fixture
def world(repo: GitRepo, clusters: dict[str, FakeKube], tmp_path: Path) -> World:
    return World(repo, clusters, Backend(repo), fleet.Clusters(tmp_path / "kubeconfigs", FAST))


class World:
    def __init__(self, repo: GitRepo, fakes: dict[str, FakeKube], backend: Backend, reach: fleet.Clusters) -> None:
        self.repo, self.fakes, self.backend, self.reach = repo, fakes, backend, reach

    def project(self) -> FleetProject:
        return load_project(self.repo.root)

    def advance(self, capsys: pytest.CaptureFixture[str], *, yes: bool = True, stage: Stage | None = None,
                packs: fleet.Packs | None = None, expect: dict[str, Any] | None = None,
                now: Callable[[], float] = time.time) -> tuple[Exit, dict[str, Any], str]:
        code = fleet.advance(self.project(), self.backend, self.reach, yes=yes, packs=packs or fleet.Packs(),
                             only_stage=stage, as_json=True, now=now,
                             expect=schemas.ApprovalPlan.model_validate(expect) if expect is not None else None)
        out = capsys.readouterr()
        return code, document_of("fleet-advance", out.out), out.err

    def status(self, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
        assert fleet.status(self.project(), self.backend, self.reach, as_json=True) == Exit.OK
        return document_of("fleet-status", capsys.readouterr().out)

    def lease(self) -> dict[str, Any]:
        return self.fakes[CANARY].obj("leases", LEASE_NAME, LEASE_NAMESPACE)

    def nodes(self, stack: str, pool: str | None = None) -> list[str]:
        spec = self.project().specs[stack]
        pools = [p for p in spec.nodePools if pool in (None, p.name) and not (p.role != "canary"
                                                                                and not p.rollout.released)]
        selectors = [p.existing.nodeSelector for p in pools if p.existing]
        return sorted(n["metadata"]["name"] for n in self.fakes[stack].objects("nodes")
                      if any(all(n["metadata"]["labels"].get(k) == v for k, v in s.items()) for s in selectors))

    def upgrade(self, stack: str, nodes: list[str] | None = None) -> None:
        """The operator upgrades the released pools' nodes (all unless ``nodes``), finished 2 hours ago."""
        for node in self.nodes(stack) if nodes is None else nodes:
            move_node(self.fakes[stack], node, "upgrade-required", at=time.time() - 9000, event=False)
            finish_upgrade(self.fakes[stack], node, NEW, at=time.time() - 7200)

    def merge_attestation(self) -> None:
        """The soak workflow's pull request with the canary's attestation, merged."""
        shipped = attestation.path_for(PROJECT_DIR / attestation.ATTESTATION_DIR, CANARY, NEW)
        copy = attestation.path_for(self.repo.root / attestation.ATTESTATION_DIR, CANARY, NEW)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(shipped, copy)
        self.repo.commit("attestation: existing-canary verified 580.173.02")

    def skipped(self, stack: str) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.fakes[stack].objects("nodes")
                      if n["metadata"]["labels"].get(labels.SKIP_UPGRADE) == "true"
                      and n["metadata"].get("annotations", {}).get(labels.ANNOTATION_PAUSED_BY) == stack)


def fail_validation(world: World, stack: str, node: str) -> None:
    """What the validation job's pod writes on ``node`` after a failed validation on the new driver."""
    spec = world.project().specs[stack]
    assert spec.validation is not None
    checks = [job_result.Check(c, job_result.FAIL if c == "tokens-per-second" else job_result.PASS, f"{c}: 12.0")
              for c in job_result.CHECKS]
    result = job_result.Result(
        node=node, pool="l40s-serving", stage="prod", cluster=spec.cluster.name, targetDriver=NEW,
        image=spec.validation.image, model=spec.validation.model, program="sha256:" + "ab" * 32,
        startedAt="2026-12-09T10:00:00Z", finishedAt="2026-12-09T10:05:00Z", durationSeconds=300.0, checks=checks)
    world.fakes[stack].update("nodes", node, {"metadata": {"labels": driver_labels(NEW)}})
    world.fakes[stack].update("nodes", node, job_result.node_patch(result), manager="gpu-validation")


def test_without_yes_it_says_the_step_and_changes_nothing(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = world.advance(capsys, yes=False)
    assert code == Exit.OK and doc["applies"] is False
    assert [(u["stack"], u["ok"]) for u in doc["ups"]] == [(CANARY, None)]  # the shape of a run's ups, not run
    assert "run again with --yes" in err
    assert world.backend.ups == [] and world.fakes[CANARY].writes == 0


def test_a_driver_bump_through_every_wave(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.upped() == [CANARY]
    assert world.backend.ups[0].message == "gpu-rollout fleet advance: wave canary"
    assert world.backend.ups[0].pack == str(world.repo.root / "policy")
    assert "holderIdentity" not in world.lease()["spec"]  # released at the end of the step

    code, doc, _ = world.advance(capsys)  # the canary rolls out: nothing moves, nothing is redone
    assert code == Exit.OK and world.backend.upped() == [CANARY]
    assert doc["waves"][0]["stacks"][0]["status"] == "rolling" and doc["next"].startswith("wait")

    world.upgrade(CANARY)
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.upped() == [CANARY]
    assert doc["waves"][0]["status"] == "waiting"
    assert "the attestation of existing-canary's driver" in doc["blocked"][0]

    world.merge_attestation()  # the prod stacks go up together (maxConcurrent 2), one per cluster
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.upped() == [CANARY, PROD, PROD_B]
    assert [u["ok"] for u in doc["ups"]] == [True, True]

    world.upgrade(PROD)
    world.upgrade(PROD_B)
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and doc["complete"] and doc["next"] == "nothing: every wave is done"
    assert world.backend.upped() == [CANARY, PROD, PROD_B]
    status = world.status(capsys)
    assert status["complete"] and [w["status"] for w in status["waves"]] == ["done", "done"]


def test_a_stack_s_next_pool_wave_waits_for_the_one_before_verified_and_dwelt_since(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started_prod_wave(world, capsys)
    world.upgrade(PROD)
    world.upgrade(PROD_B)
    code, doc, _ = world.advance(capsys)  # every wave done: the train records each released pool it saw complete
    assert code == Exit.OK and doc["complete"]
    records = json.loads(world.lease()["metadata"]["annotations"][labels.ANNOTATION_FLEET_POOLS_VERIFIED])
    assert records[PROD]["l40s-serving"]["target"] == NEW and records[PROD]["l40s-serving"]["verify"] == "none"

    world.repo.pool(PROD, "h100-serving", lambda pool: pool["rollout"].update(released=True))
    world.repo.commit("existing-prod: release wave 2 (h100-serving)")
    code, doc, _ = world.advance(capsys)  # wave 1 completed just now: it has not dwelt its 24 h
    assert code == Exit.OK and world.backend.upped() == [CANARY, PROD, PROD_B]
    [refusal] = [b for b in doc["blocked"] if b.startswith(f"{PROD}:")]
    assert refusal.startswith(f"{PROD}: wave 2 waits for wave 1, verified complete ")
    assert "of rollout.waveDwellHours 24 h so far" in refusal

    later = time.time() + 25 * 3600
    code, doc, _ = world.advance(capsys, now=lambda: later)
    assert code == Exit.OK and world.backend.upped() == [CANARY, PROD, PROD_B, PROD]


def started_prod_wave(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.advance(capsys)
    world.upgrade(CANARY)
    world.merge_attestation()
    world.advance(capsys)
    assert world.backend.upped() == [CANARY, PROD, PROD_B]


def test_a_failed_validation_in_one_cluster_halts_the_train_and_pauses_every_stack_it_started(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started_prod_wave(world, capsys)
    first, second, *rest = world.nodes(PROD)
    world.upgrade(PROD, [first])
    move_node(world.fakes[PROD], second, "drain-required")
    held, *waiting = world.nodes(PROD_B)
    fail_validation(world, PROD_B, held)

    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED
    assert doc["halt"]["stack"] == PROD_B and doc["halt"]["kind"] == "validation-failed"
    assert f"train HALTED: validation-failed in stack {PROD_B}" in err
    assert world.skipped(PROD) == sorted([second, *rest])  # not done: held back; the done one is left as it is
    assert world.skipped(PROD_B) == sorted(waiting)  # the held node is upgraded (the job holds it cordoned)
    assert world.skipped(CANARY) == []  # done: nothing to hold
    reason = world.fakes[PROD].obj("nodes", second)["metadata"]["annotations"][labels.ANNOTATION_PAUSED_REASON]
    assert reason.startswith(f"fleet halted: node {held}") and reason.endswith(f"(stack {PROD_B})")
    halted = json.loads(world.lease()["metadata"]["annotations"][labels.ANNOTATION_FLEET_HALTED])
    assert halted["cause"].startswith(f"validation-failed in stack {PROD_B}: node {held}")

    # The bad sign gone (the node released), the train stays halted: the world records it, not this machine.
    world.fakes[PROD_B].update("nodes", held, {"metadata": {"annotations": {job_result.HOLD_ANNOTATION: None}}})
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and "the train is halted since" in err and doc["ups"] == []
    assert world.status(capsys)["halted"]["cause"] == halted["cause"]

    assert fleet.resume_all(world.project(), world.reach, as_json=True) == Exit.OK
    resumed = document_of("fleet-resume", capsys.readouterr().out)
    assert resumed["cleared"] is not None and {r["stack"] for r in resumed["resumed"]} == set(STACKS)
    capsys.readouterr()
    assert world.skipped(PROD) == [] and world.skipped(PROD_B) == []
    assert labels.ANNOTATION_FLEET_HALTED not in world.lease()["metadata"]["annotations"]
    world.upgrade(PROD)
    world.upgrade(PROD_B)
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and doc["complete"] and world.backend.upped() == [CANARY, PROD, PROD_B]


def test_halt_pauses_every_stack_of_the_fleet_at_once_and_nothing_moves(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.advance(capsys)
    assert fleet.halt(world.project(), world.reach, "Xid 79 on the lab cluster", as_json=True) == Exit.OK
    doc = document_of("fleet-halt", capsys.readouterr().out)
    assert doc["halted"]["cause"] == "halted by hand: Xid 79 on the lab cluster"
    assert {p["stack"] for p in doc["paused"]} == set(STACKS) and not any(p["error"] for p in doc["paused"])
    assert world.skipped(CANARY) == world.nodes(CANARY)
    assert world.skipped(PROD_B) == sorted(world.nodes(PROD_B))
    world.upgrade(CANARY)
    world.merge_attestation()
    code, doc, _ = world.advance(capsys)
    assert code == Exit.FAILED and world.backend.upped() == [CANARY]


def test_a_second_advance_is_refused_while_the_first_holds_the_lease(world: World,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    project = world.project()
    spec = project.specs[CANARY]
    other = TrainLease(world.reach.connect(CANARY, spec), LEASE_NAMESPACE, LEASE_NAME, "ci-run-41", 60)
    other.acquire()
    with pytest.raises(Declined, match="another `fleet advance` holds the train's lease "
                       "kube-system/gpu-driver-upgrade-fleet \\(ci-run-41") as refused:
        fleet.advance(project, world.backend, world.reach, yes=True, packs=fleet.Packs(), only_stage=None,
                      as_json=True)
    assert refused.value.code == Exit.FAILED and world.backend.ups == []
    assert world.lease()["spec"]["holderIdentity"] == "ci-run-41"  # untouched


def test_a_run_killed_while_holding_the_lease_blocks_the_next_only_until_it_expires(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    dead = TrainLease(world.reach.connect(CANARY, world.project().specs[CANARY]), LEASE_NAMESPACE, LEASE_NAME,
                      "killed-run", 60, clock=lambda: time.time() - 61)
    dead.acquire()  # it renewed last 61 s ago, then died
    code, _, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.upped() == [CANARY]
    assert world.lease()["spec"]["leaseTransitions"] == 1


def test_a_prod_up_from_the_canary_environment_is_withheld(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = world.advance(capsys, stage=Stage.CANARY)
    assert code == Exit.OK and world.backend.upped() == [CANARY]
    world.upgrade(CANARY)
    world.merge_attestation()
    code, doc, err = world.advance(capsys, stage=Stage.CANARY)
    assert code == Exit.OK and doc["withheld"] == [PROD, PROD_B] and world.backend.upped() == [CANARY]
    assert "run `fleet advance --yes --stage prod` from its environment" in err
    code, doc, _ = world.advance(capsys, stage=Stage.PROD)
    assert code == Exit.OK and world.backend.upped() == [CANARY, PROD, PROD_B]


def test_each_up_enforces_the_pack_of_its_protected_base(world: World, capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    packs = tmp_path / "packs"
    code, _, err = world.advance(capsys, packs=fleet.Packs(packs))
    assert code == Exit.FAILED and world.backend.ups == []
    assert f"{CANARY}: not brought up: no pack of its protected base" in err
    # Never deployed: the commit that added its stack file, the repository's first (nothing came before it).
    base = world.repo.git("rev-parse", "HEAD~1")
    (packs / base / "pack").mkdir(parents=True)
    (packs / base / "canary.json").write_text("{}\n")
    code, _, err = world.advance(capsys, packs=fleet.Packs(packs))
    assert code == Exit.OK, err
    assert (world.backend.ups[0].pack, world.backend.ups[0].pack_config) == (
        str(packs / base / "pack"), str(packs / base / "canary.json"))


def test_a_failed_up_is_tried_again_by_the_next_run(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.backend.fail.add(CANARY)
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and f"{CANARY}: up FAILED: update 1 failed" in err
    world.backend.fail.clear()
    code, _, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.upped() == [CANARY, CANARY]


def test_a_stack_whose_update_is_in_progress_is_left_to_it(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.backend.locks.add(CANARY)
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.ups == []
    assert doc["waves"][0]["stacks"][0]["status"] == "updating"


def test_a_failed_verify_halts_the_train(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml.safe_load((world.repo.root / "Fleet.yaml").read_text())
    document["waves"][0]["waitFor"]["verify"] = "smoke"
    (world.repo.root / "Fleet.yaml").write_text(yaml.safe_dump(document))
    world.repo.commit("verify the canary")
    world.advance(capsys)
    world.upgrade(CANARY)  # GFD reports the new driver, but the driver pods still run the old image
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and doc["halt"]["kind"] == "verify-failed" and doc["halt"]["stack"] == CANARY
    assert doc["halt"]["message"].startswith("verify --smoke failed on stack existing-canary: driver-version ")
    assert "runs image tag 570.195.03-ubuntu22.04" in doc["halt"]["message"]


def test_status_reads_the_world_and_changes_nothing(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    doc = world.status(capsys)
    assert doc["current"] == "canary" and doc["next"].startswith("up existing-canary")
    assert doc["halted"] is None and doc["lease"] is None
    assert [s["status"] for w in doc["waves"] for s in w["stacks"]] == ["pending"] * 3
    assert all(f.writes == 0 for f in world.fakes.values()) and world.backend.ups == []


def test_a_sign_the_fleet_does_not_halt_on_pauses_its_own_stack_only(world: World,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml.safe_load((world.repo.root / "Fleet.yaml").read_text())
    document["haltOn"] = ["upgrade-failed", "validation-failed", "below-min-available", "verify-failed"]
    (world.repo.root / "Fleet.yaml").write_text(yaml.safe_dump(document))
    world.repo.commit("a stuck node pauses its own stack only")
    started_prod_wave(world, capsys)
    first, *rest = world.nodes(PROD)
    move_node(world.fakes[PROD], first, "drain-required", at=time.time() - 7200)  # stuck for two hours
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and doc["halt"] is None
    assert [s["kind"] for s in doc["signs"]] == ["stuck"]
    assert [p["stack"] for p in doc["ownPauses"]] == [PROD]
    assert world.skipped(PROD) == sorted([first, *rest]) and world.skipped(PROD_B) == []
    assert labels.ANNOTATION_FLEET_HALTED not in (world.lease()["metadata"].get("annotations") or {})


def test_an_image_owned_stack_cannot_be_paused_its_flight_is_reported(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    repo = GitRepo(tmp_path / "eks")
    for path in repo.root.glob("Pulumi.*.yaml"):
        if path.name != "Pulumi.yaml" and path.stem.removeprefix("Pulumi.") not in ("eks-canary", "eks-prod"):
            path.unlink()
    (repo.root / "Fleet.yaml").write_text(yaml.safe_dump({"waves": [
        {"name": "canary", "stacks": ["eks-canary"]}, {"name": "prod", "stacks": ["eks-prod"]}]}))
    repo.commit("the EKS fleet")
    project = load_project(repo.root)
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    with FakeKube() as canary, FakeKube() as prod:
        for name, fake in (("eks-canary", canary), ("eks-prod", prod)):
            seed(fake, project.specs[name])
            fake.write_kubeconfig(folder / name)
        reach = fleet.Clusters(folder, FAST)
        assert fleet.halt(project, reach, "drill", as_json=True) == Exit.OK
        doc = document_of("fleet-halt", capsys.readouterr().out)
        assert [(p["stack"], p["error"]) for p in doc["paused"]] == [("eks-canary", None), ("eks-prod", None)]
        assert all(p["imageOwned"].startswith("the node image owns the driver: no `up` of it follows; in flight: ")
                   for p in doc["paused"])
        # Nothing to pause on an image-owned stack: the one write is the halt, recorded on the train's Lease.
        assert canary.writes == 1 and prod.writes == 0
        halted = canary.obj("leases", LEASE_NAME, LEASE_NAMESPACE)["metadata"].get("annotations") or {}
        assert labels.ANNOTATION_FLEET_HALTED in halted
        backend = Backend(repo)
        code = fleet.advance(project, backend, reach, yes=True, packs=fleet.Packs(), only_stage=None, as_json=True)
        assert code == Exit.FAILED and backend.ups == []


def test_a_stack_preflight_fails_on_is_not_brought_up(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The train runs preflight's verdict before each `up`: a canary whose nodes show another GPU than its pools
    declare stays down, saying why, and the step fails; fixed, the next step brings it up."""
    fake = world.fakes[CANARY]
    node = next(n for n in fake.objects("nodes") if labels.GPU_PRODUCT in n["metadata"].get("labels", {}))
    declared = node["metadata"]["labels"][labels.GPU_PRODUCT]
    fake.update("nodes", node["metadata"]["name"], {"metadata": {"labels": {labels.GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB"}}})
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and world.backend.ups == [] and doc["ups"] == []
    assert f"{CANARY}: not brought up: preflight failed: pool-hardware" in err
    fake.update("nodes", node["metadata"]["name"], {"metadata": {"labels": {labels.GPU_PRODUCT: declared}}})
    code, _, _ = world.advance(capsys)
    assert code == Exit.OK and world.backend.upped() == [CANARY]


def test_a_prod_stack_whose_models_watch_cannot_read_is_not_brought_up(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """Preflight's model-metrics gates the train: a prod stack with no validation.prometheus stays down, naming it."""
    world.repo.edit(PROD, "validation", lambda validation: validation.pop("prometheus"))
    world.repo.commit("existing-prod without its Prometheus")
    world.advance(capsys)
    world.upgrade(CANARY)
    world.merge_attestation()
    code, _, err = world.advance(capsys)
    assert code == Exit.FAILED and world.backend.upped() == [CANARY, PROD_B]
    assert f"{PROD}: not brought up: preflight failed: model-metrics inference/llm-chat: " in err
    assert "validation.prometheus: where `watch` reads the model's error rate and p95" in err


# ---------------------------------------------------------------- when the world misbehaves (issue 34)


def down(fake: FakeKube) -> Fault:
    """The cluster's API server answers nothing but 503 until the fault is removed."""
    fault = Fault(503, times=10**9)
    fake.faults.append(fault)
    return fault


def records(doc: dict[str, Any]) -> dict[str, tuple[bool, str | None]]:
    """cluster -> (a halt recorded there, the error)"""
    return {r["cluster"]: (r["halted"] is not None, r["error"]) for r in doc["records"]}


def test_a_halt_with_the_lease_s_cluster_down_pauses_and_records_everywhere_else(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started_prod_wave(world, capsys)
    outage = down(world.fakes[CANARY])  # the lab cluster: the Lease's
    assert fleet.halt(world.project(), world.reach, "Xid 79 on the cloud cluster", as_json=True) == Exit.FAILED
    out = capsys.readouterr()
    doc = document_of("fleet-halt", out.out)
    assert [(p["stack"], p["error"] is not None) for p in doc["paused"]] == [(CANARY, True), (PROD, False),
                                                                             (PROD_B, False)]
    assert world.skipped(PROD_B) == world.nodes(PROD_B) and world.skipped(PROD) == world.nodes(PROD)
    found = records(doc)
    assert found["lab-gpu-2"] == (True, None) and found["lab-gpu-1"][0] is False
    assert "HTTP 503" in (found["lab-gpu-1"][1] or "") or "503" in (found["lab-gpu-1"][1] or "")
    assert "cluster lab-gpu-1: its halt record could not be written" in out.err
    halted = world.fakes[PROD_B].obj("leases", LEASE_NAME, LEASE_NAMESPACE)["metadata"]["annotations"]
    assert json.loads(halted[labels.ANNOTATION_FLEET_HALTED])["cause"] == "halted by hand: Xid 79 on the cloud cluster"

    # A second halt changes nothing: the first cause stays, nothing is patched again.
    writes = world.fakes[PROD_B].writes
    assert fleet.halt(world.project(), world.reach, "again", as_json=True) == Exit.FAILED
    doc = document_of("fleet-halt", capsys.readouterr().out)
    assert doc["halted"]["cause"] == "halted by hand: Xid 79 on the cloud cluster"
    assert [r["changed"] for r in doc["records"]] == [False, False]
    assert world.fakes[PROD_B].writes == writes

    # advance without its Lease: the record in the other cluster is a halt; nothing moves.
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and doc["ups"] == [] and doc["halted"]["cause"].startswith("halted by hand")
    assert "the train's lease could not be taken" in err
    world.fakes[CANARY].faults.remove(outage)
    code, doc, err = world.advance(capsys)  # the lab cluster back: its Lease has no record, the other still halts
    assert code == Exit.FAILED and "the train is halted since" in err and world.backend.upped() == [CANARY, PROD, PROD_B]


def test_resume_clears_every_record_it_reaches_and_names_the_one_it_could_not(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started_prod_wave(world, capsys)
    assert fleet.halt(world.project(), world.reach, "drill", as_json=True) == Exit.OK
    assert records(document_of("fleet-halt", capsys.readouterr().out)) == {"lab-gpu-1": (True, None),
                                                                          "lab-gpu-2": (True, None)}
    outage = down(world.fakes[PROD_B])
    assert fleet.resume_all(world.project(), world.reach, as_json=True) == Exit.FAILED
    out = capsys.readouterr()
    doc = document_of("fleet-resume", out.out)
    found = {r["cluster"]: (r["changed"], r["error"]) for r in doc["records"]}
    assert found["lab-gpu-1"] == (True, None)
    assert found["lab-gpu-2"][0] is False and "503" in (found["lab-gpu-2"][1] or "")
    assert "the train stays halted: the halt records of lab-gpu-2 remain" in out.err
    assert labels.ANNOTATION_FLEET_HALTED not in world.lease()["metadata"].get("annotations", {})
    world.fakes[PROD_B].faults.remove(outage)
    code, _, err = world.advance(capsys)  # the record left in lab-gpu-2 is a halt
    assert code == Exit.FAILED and "the train is halted since" in err
    assert fleet.resume_all(world.project(), world.reach, as_json=True) == Exit.OK
    capsys.readouterr()
    code, _, _ = world.advance(capsys)
    assert code == Exit.OK


def test_a_sign_in_a_later_wave_pauses_it_while_the_canary_wave_is_current_again(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The paused list itself: a change to the canary's stack file makes the canary wave current again, and a failed
    validation in PROD_B (the prod wave) pauses every stack the train moved, the prod ones included."""
    started_prod_wave(world, capsys)
    path = world.repo.root / f"Pulumi.{CANARY}.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["gpu-driver-upgrade:changeTicket"] = "CHG-20261210-0001"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    world.repo.commit("canary: a new change ticket")
    held, *waiting = world.nodes(PROD_B)
    fail_validation(world, PROD_B, held)
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and doc["current"] == "canary" and doc["halt"]["stack"] == PROD_B
    assert [p["stack"] for p in doc["paused"]] == [CANARY, PROD, PROD_B]
    assert world.skipped(PROD) == world.nodes(PROD) and world.skipped(PROD_B) == sorted(waiting)
    assert records(doc) == {"lab-gpu-1": (True, None), "lab-gpu-2": (True, None)}
    assert world.backend.upped() == [CANARY, PROD, PROD_B]  # the canary's change did not go up


def test_a_cluster_that_cannot_be_read_stops_only_its_stacks_and_the_step_fails_after_doing_the_rest(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    outage = down(world.fakes[PROD_B])
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and world.backend.upped() == [CANARY]  # the canary went up all the same
    assert doc["unread"] and doc["unread"][0].startswith("cluster lab-gpu-2: ")
    assert "cluster lab-gpu-2: its halt record could not be read" in err
    world.fakes[PROD_B].faults.remove(outage)
    world.upgrade(CANARY)
    world.merge_attestation()
    world.advance(capsys)
    assert world.backend.upped() == [CANARY, PROD, PROD_B]
    outage = down(world.fakes[PROD_B])  # now deployed: unreadable, it counts in flight and does not move
    code, doc, err = world.advance(capsys)
    (prod_b,) = [s for s in doc["waves"][1]["stacks"] if s["stack"] == PROD_B]
    assert code == Exit.FAILED and prod_b["status"] == "unreadable" and prod_b["inFlight"]
    assert "lab-gpu-2" in doc["limits"]["clustersInFlight"]
    assert f"{PROD_B}: its cluster lab-gpu-2 could not be read" in err


def test_the_prod_ups_are_the_approved_ones_or_none(world: World, capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    world.advance(capsys, stage=Stage.CANARY)
    world.upgrade(CANARY)
    world.merge_attestation()
    code, doc, _ = world.advance(capsys, stage=Stage.CANARY)
    assert code == Exit.OK and doc["withheld"] == [PROD, PROD_B]
    plan = doc["approval"]
    head = world.repo.git("rev-parse", "HEAD")
    assert plan["commit"] == head and plan["doneWaves"] == ["canary"]
    assert [u["stack"] for u in plan["ups"]] == [PROD, PROD_B]
    assert all(u["configDigest"].startswith("sha256:") and u["packRef"] for u in plan["ups"])

    tampered = json.loads(json.dumps(plan))
    tampered["ups"][1]["packRef"] = "0" * 40
    code, doc, err = world.advance(capsys, stage=Stage.PROD, expect=tampered)
    assert code == Exit.FAILED and doc["ups"] == [] and world.backend.upped() == [CANARY]
    assert f"not as approved: {PROD_B}: its packRef is {plan['ups'][1]['packRef']}, the approved plan's {'0' * 40}" \
        in err

    # The production identity cannot read the canary's cluster: the approved plan vouches for the canary wave.
    outage = down(world.fakes[CANARY])
    code, doc, err = world.advance(capsys, stage=Stage.PROD, expect=plan)
    assert "the train's lease could not be taken" in err and world.backend.upped() == [CANARY]
    world.fakes[CANARY].faults.remove(outage)
    world.fakes[CANARY].faults.append(Fault(403, verb="list", plural="nodes", times=10**9))
    code, doc, err = world.advance(capsys, stage=Stage.PROD, expect=plan)
    assert code == Exit.OK, err
    assert world.backend.upped() == [CANARY, PROD, PROD_B]
    assert f"{CANARY}: its cluster lab-gpu-1 could not be read" in err and "another environment's" in err


def test_a_rollback_halts_its_wave_and_the_wave_stays_until_a_person_resumes(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    started_prod_wave(world, capsys)
    assert fleet.halt(world.project(), world.reach, "Xid 79 after the driver change", as_json=True,
                      wave_of=PROD_B) == Exit.OK
    doc = document_of("fleet-halt", capsys.readouterr().out)
    assert doc["halted"]["wave"] == "prod" and doc["halted"]["cause"].startswith(f"rollback of stack {PROD_B}: ")
    assert [p["stack"] for p in doc["paused"]] == [PROD]  # not the stack rolled back: its way back must not be held
    assert world.skipped(PROD) == world.nodes(PROD) and world.skipped(PROD_B) == []
    world.upgrade(PROD)
    world.upgrade(PROD_B)
    code, doc, err = world.advance(capsys)
    assert code == Exit.OK and doc["waves"][1]["status"] == "halted" and not doc["complete"]
    assert doc["wavesHalted"][0]["wave"] == "prod"
    assert fleet.resume_all(world.project(), world.reach, as_json=True) == Exit.OK
    capsys.readouterr()
    code, doc, _ = world.advance(capsys)
    assert code == Exit.OK and doc["complete"]


def test_a_rollback_runs_holding_the_train_s_lease_after_the_advance_that_held_it(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """`fleet hold` (rollback.yml's `up`): waits while an advance holds the Lease, then runs holding it itself."""
    project = world.project()
    other = TrainLease(world.reach.connect(CANARY, project.specs[CANARY]), LEASE_NAMESPACE, LEASE_NAME, "advance-7", 60)
    other.acquire()
    seen: list[str | None] = []
    moments = iter(range(0, 10_000, 10))

    def run(argv: list[str]) -> int:
        seen.append(world.lease()["spec"].get("holderIdentity"))
        return 0

    code = fleet.hold(project, world.reach, ["gpu-rollout", "rollback"], 60, clock=lambda: float(next(moments)),
                      sleep=lambda _: other.release(), run=run)
    assert code == Exit.OK and seen and seen[0] not in (None, "advance-7")
    assert "waiting for the train's lease: another `fleet advance` holds" in capsys.readouterr().err
    assert "holderIdentity" not in world.lease()["spec"]  # released after the command
    other.acquire()
    with pytest.raises(Declined, match="the train's lease stayed held for 20 s"):
        fleet.hold(project, world.reach, ["true"], 20, clock=lambda: float(next(moments)), sleep=lambda _: None,
                   run=run)
    assert len(seen) == 1


def test_advance_without_its_lease_still_halts_on_a_bad_sign(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The Lease's cluster down: no lock, so nothing goes up, but a failed validation in another cluster halts the
    train there, recorded and paused (an emergency needs no lock)."""
    started_prod_wave(world, capsys)
    held, *waiting = world.nodes(PROD_B)
    fail_validation(world, PROD_B, held)
    down(world.fakes[CANARY])
    code, doc, err = world.advance(capsys)
    assert code == Exit.FAILED and doc["halt"]["stack"] == PROD_B and doc["ups"] == []
    assert "the train's lease could not be taken" in err
    assert [(p["stack"], p["error"] is None) for p in doc["paused"]] == [(CANARY, False), (PROD, True), (PROD_B, True)]
    assert world.skipped(PROD_B) == sorted(waiting)
    assert records(doc)["lab-gpu-2"] == (True, None) and records(doc)["lab-gpu-1"][0] is False
