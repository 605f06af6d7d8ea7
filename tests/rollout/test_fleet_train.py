"""The train's decisions (promotion_train/train.py), on values: the shipped Fleet.yaml and example stacks, each stack's
decision as deploy-plan makes it, what its cluster shows, and a probe standing in for `verify --smoke` and the soak
read (recording what it was asked, so a test can tell that nothing was asked)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any


from checks.fleet import ClusterView
from checks.progress import Trigger
from promotion_train import deploy_plan
from promotion_train.deploy_plan import Decision
from promotion_train.stacks import stack_files
from promotion_train.train import (Soak, StackStatus, StackWorld, WaveStatus, assess, needs_cluster,
                           worst_gpus_unavailable)
from fleetspec.fleet_file import FLEET_FILE, fleet_from_document, read_fleet_file
from fleetspec.load import load_stack_file
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR

NOW = time.time()
FLEET = read_fleet_file(PROJECT_DIR / FLEET_FILE)
FILES = {s.name: s for s in stack_files(PROJECT_DIR)}
SPECS = {name: load_stack_file(PROJECT_DIR / f"Pulumi.{name}.yaml") for name in EXAMPLE_STACKS}
CANARIES = ["canary", "eks-canary", "existing-canary"]


def view(name: str, *, complete: bool = True, triggers: tuple[tuple[str, str], ...] = ()) -> ClusterView:
    return ClusterView(name, SPECS[name].cluster.name, SPECS[name].driver.owner.value, complete,
                       [Trigger(kind, "node-1", message) for kind, message in triggers], 4, 4 if complete else 1, 0, 0)


def world(name: str, state: str = deploy_plan.IN_STEP, **changes: Any) -> StackWorld:
    deploy = state in (deploy_plan.DIFFERS, deploy_plan.RUNNING)
    decision = Decision(FILES[name], deploy, f"{name}: {state}", "c0ffee" if deploy else None, state=state)
    found = StackWorld(FILES[name], SPECS[name], decision, update=None if state == deploy_plan.DIFFERS else 3,
                       view=None if state == deploy_plan.DIFFERS else view(name))
    return replace(found, **changes)


def fleet_world(**overrides: StackWorld) -> dict[str, StackWorld]:
    """Every stack in step and its rollout complete, but for ``overrides``."""
    return {name: overrides.get(name.replace("-", "_"), world(name)) for name in EXAMPLE_STACKS}


class Probe:
    def __init__(self, failures: dict[str, list[str]] | None = None, soaks: dict[str, Soak] | None = None) -> None:
        self.failures, self.soaks = failures or {}, soaks or {}
        self.verified: list[str] = []
        self.soaked: list[str] = []

    def verify(self, stack: str, through_wave: int | None = None) -> list[str] | None:
        self.verified.append(stack)
        return self.failures.get(stack, [])

    def soak(self, stack: str) -> Soak:
        self.soaked.append(stack)
        attested = f"attestations/{stack}/580.173.02.json" if stack in CANARIES else None
        return self.soaks.get(stack, Soak(NOW - 48 * 3600, attested, "soaked"))


ALL_VERIFIED = {name: 3 for name in EXAMPLE_STACKS}


def test_a_fresh_fleet_brings_up_the_canary_wave_first_and_nothing_else() -> None:
    worlds = {name: world(name, deploy_plan.DIFFERS) for name in EXAMPLE_STACKS}
    assert not any(needs_cluster(w) for w in worlds.values())
    probe = Probe()
    found = assess(FLEET, worlds, probe, NOW)
    # The wave lets 3 move at once, the fleet 2 clusters: the third canary waits for a cluster to finish.
    assert found.current == 0 and found.ups == ["canary", "eks-canary"]
    assert found.blocked == ["existing-canary waits: 2 cluster(s) have a rollout in flight (inference-use1-1, "
                             "inference-weu-1), limits.maxClustersInFlight is 2"]
    assert [w.status for w in found.waves] == [WaveStatus.CURRENT, WaveStatus.LATER, WaveStatus.LATER]
    assert probe.verified == [] and probe.soaked == []
    assert found.next_step() == "up canary, eks-canary"
    unlimited = fleet_from_document({**FLEET.model_dump(), "limits": {}})
    assert assess(unlimited, worlds, probe, NOW).ups == CANARIES


def test_a_rolling_canary_holds_the_train_without_asking_anything() -> None:
    worlds = fleet_world(eks_canary=world("eks-canary", view=view("eks-canary", complete=False)),
                         existing_prod=world("existing-prod", deploy_plan.DIFFERS))
    probe = Probe()
    found = assess(FLEET, worlds, probe, NOW, verified=ALL_VERIFIED)
    assert found.current == 0 and found.ups == []
    assert found.stack("eks-canary").status == StackStatus.ROLLING
    assert probe.verified == []  # the other canaries' verify was recorded
    assert found.next_step() == "wait: the current wave's stacks are moving"


def test_done_canaries_are_verified_once_then_wait_for_their_attestation() -> None:
    worlds = fleet_world(existing_prod=world("existing-prod", deploy_plan.DIFFERS))
    probe = Probe(soaks={"existing-canary": Soak(NOW - 3600, None, "soaked 1.0 h of the 168 h existing-prod asks")})
    found = assess(FLEET, worlds, probe, NOW, verified={})
    assert probe.verified == CANARIES
    assert found.verified_now == {name: 3 for name in CANARIES}
    assert found.waves[0].status == WaveStatus.WAITING and found.ups == []
    assert found.blocked == ["wave canary waits for the attestation of existing-canary's driver: soaked 1.0 h of the "
                             "168 h existing-prod asks (soak.yml proposes it in a pull request; its merge lets the next "
                             "wave move)"]
    # Next run: the verify is on record, the attestation merged: the prod-lab wave moves.
    probe = Probe()
    found = assess(FLEET, worlds, probe, NOW, verified=found.verified_now)
    assert probe.verified == [] and found.current == 1 and found.ups == ["existing-prod"]
    assert [w.status for w in found.waves] == [WaveStatus.DONE, WaveStatus.CURRENT, WaveStatus.LATER]


def test_a_wave_waits_for_its_soak_after_its_last_node_finished() -> None:
    worlds = fleet_world(prod=world("prod", deploy_plan.DIFFERS))
    probe = Probe(soaks={"existing-prod": Soak(NOW - 10 * 3600)})
    found = assess(FLEET, worlds, probe, NOW, verified=ALL_VERIFIED)
    assert found.current == 1 and found.waves[1].status == WaveStatus.WAITING and found.ups == []
    assert found.waves[1].waiting[0].startswith("a soak of 24 h: 10.0 h so far, until ")
    found = assess(FLEET, worlds, Probe(soaks={"existing-prod": Soak(NOW - 25 * 3600)}), NOW, verified=ALL_VERIFIED)
    assert found.current == 2 and found.ups == ["prod"]


def test_every_wave_done_is_the_end_of_the_train() -> None:
    found = assess(FLEET, fleet_world(), Probe(), NOW, verified=ALL_VERIFIED)
    assert found.complete and found.current is None and found.ups == []
    assert found.next_step() == "nothing: every wave is done"


def test_a_failed_verify_halts_the_train() -> None:
    worlds = fleet_world(existing_prod=world("existing-prod", deploy_plan.DIFFERS))
    probe = Probe(failures={"eks-canary": ["model-answers inference/llm-chat-canary-0: HTTP 503"]})
    found = assess(FLEET, worlds, probe, NOW)
    assert found.halt is not None and found.halt.kind == "verify-failed" and found.halt.stack == "eks-canary"
    assert "model-answers inference/llm-chat-canary-0: HTTP 503" in found.halt.message
    assert found.ups == [] and "eks-canary" not in found.verified_now


def test_a_bad_sign_in_any_cluster_halts_and_names_every_stack_the_train_started() -> None:
    worlds = fleet_world(
        existing_prod=world("existing-prod", view=view("existing-prod", complete=False, triggers=(
            ("upgrade-failed", "node gpu-l40s-s02 (pool l40s-serving) is in upgrade-failed"),))),
        prod=world("prod", deploy_plan.DIFFERS), eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    probe = Probe()
    found = assess(FLEET, worlds, probe, NOW, verified=ALL_VERIFIED)
    assert found.halt is not None and found.halt.stack == "existing-prod" and found.halt.kind == "upgrade-failed"
    assert found.ups == [] and probe.verified == []
    assert [s.world.name for s in found.started()] == [*CANARIES, "existing-prod"]


def test_a_sign_the_fleet_does_not_halt_on_pauses_its_own_stack_and_the_train_goes_on() -> None:
    fleet = fleet_from_document({**FLEET.model_dump(), "haltOn": ["upgrade-failed"]})
    worlds = fleet_world(
        existing_prod=world("existing-prod", view=view("existing-prod", complete=False, triggers=(
            ("stuck", "node gpu-l40s-s02 has been in drain-required for 75 min"),
            ("outside-window", "the rollout is outside its maintenance window")))))
    found = assess(fleet, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.halt is None
    assert [(s.stack, s.kind) for s in found.own_pauses] == [("existing-prod", "stuck"),
                                                              ("existing-prod", "outside-window")]


def test_the_wave_s_concurrency_and_the_fleet_s_limits_decide_how_many_go() -> None:
    worlds = fleet_world(prod=world("prod", deploy_plan.DIFFERS), eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    assert assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED).ups == ["prod", "eks-prod"]
    one_cluster = fleet_from_document({**FLEET.model_dump(), "limits": {"maxClustersInFlight": 1}})
    found = assess(one_cluster, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.ups == ["prod"] and found.clusters_in_flight == ["inference-weu-1"]
    assert found.blocked == ["eks-prod waits: 1 cluster(s) have a rollout in flight (inference-weu-1), "
                             "limits.maxClustersInFlight is 1"]
    few_gpus = fleet_from_document({**FLEET.model_dump(), "limits": {"maxGpusUnavailable": 6}})
    found = assess(few_gpus, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.ups == ["eks-prod"]  # image-owned: a new generation beside the old, no GPU taken out
    assert found.blocked == ["prod waits: its rollout may take 8 GPU(s) out at once, more than "
                             "limits.maxGpusUnavailable (6) alone: lower its upgrade parallelism or raise the limit"]


def test_stacks_still_moving_take_their_slots_and_their_gpus() -> None:
    one_at_a_time = fleet_from_document({**FLEET.model_dump(), "waves": [
        *FLEET.model_dump()["waves"][:2], {"name": "prod-cloud", "stacks": ["prod", "eks-prod"], "maxConcurrent": 1}]})
    worlds = fleet_world(prod=world("prod", deploy_plan.RUNNING), eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    found = assess(one_at_a_time, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.stack("prod").status == StackStatus.UPDATING and found.ups == []
    assert found.blocked == ["eks-prod waits for a slot: wave prod-cloud lets 1 stack(s) move at once, and 1 move"]
    assert found.gpus_committed == 8
    locked = fleet_world(prod=world("prod", locked=True), eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    found = assess(one_at_a_time, locked, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.stack("prod").status == StackStatus.UPDATING and found.ups == []


def test_a_rolled_back_stack_is_left_alone_and_holds_its_wave() -> None:
    worlds = fleet_world(prod=world("prod", deploy_plan.ROLLED_BACK), eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.ups == ["eks-prod"] and found.current == 2
    assert found.blocked == ["prod (rolled-back): prod: rolled-back"]
    worlds["eks-prod"] = world("eks-prod")
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert not found.complete and found.waves[2].status == WaveStatus.CURRENT


def test_a_stack_outside_its_window_waits_for_it() -> None:
    worlds = fleet_world(prod=world("prod", deploy_plan.OUTSIDE_WINDOW), eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.ups == ["eks-prod"] and found.blocked == ["prod (outside-window): prod: outside-window"]


def test_nothing_moves_and_no_model_is_asked_while_halted() -> None:
    worlds = fleet_world(existing_prod=world("existing-prod", deploy_plan.DIFFERS))
    probe = Probe()
    found = assess(FLEET, worlds, probe, NOW, halted=True, verified={})
    assert found.ups == [] and probe.verified == []
    assert found.current == 0  # the canaries' verify is not on record, and it is not asked for now
    assert found.blocked[0] == "the train is halted: nothing moves until `gpu-rollout fleet resume`"


def test_a_cluster_that_cannot_be_read_stops_only_its_own_stacks() -> None:
    """eks-prod's cluster does not answer: it does not move and counts as in flight (it may be rolling); the prod-lab
    wave still moves, and a bad sign elsewhere still halts."""
    worlds = fleet_world(existing_prod=world("existing-prod", deploy_plan.DIFFERS),
                         eks_prod=world("eks-prod", view=None, view_error="list nodes: HTTP 503"))
    probe = Probe()
    found = assess(FLEET, worlds, probe, NOW, verified={})
    assert probe.verified == CANARIES and found.current == 1 and found.ups == ["existing-prod"]
    assert found.stack("eks-prod").status == StackStatus.UNREADABLE and found.stack("eks-prod").in_flight
    assert found.blocked == ["eks-prod: its cluster inference-use1-1 could not be read: list nodes: HTTP 503; it does "
                             "not move, and counts as in flight"]
    assert found.clusters_in_flight == ["inference-use1-1", "lab-gpu-1"]
    worlds["canary"] = world("canary", view=view("canary", complete=False, triggers=(
        ("upgrade-failed", "node gpu-a100-c01 (pool a100-canary) is in upgrade-failed"),)))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.halt is not None and found.halt.stack == "canary" and found.ups == []


def test_a_halt_names_every_stack_moving_or_moved_by_the_train_whichever_wave_is_current() -> None:
    """A change to the canaries' stack files makes the canary wave current again while existing-prod, of a later
    wave, still rolls and fails: the halt covers it, and every other deployed stack."""
    changed = {name: world(name, deploy_plan.DIFFERS, update=3, view=view(name)) for name in CANARIES}
    worlds = fleet_world(
        canary=changed["canary"], eks_canary=changed["eks-canary"], existing_canary=changed["existing-canary"],
        existing_prod=world("existing-prod", deploy_plan.DIFFERS, update=3, view=view("existing-prod", complete=False,
                            triggers=(("upgrade-failed", "node gpu-l40s-s02 (pool l40s-serving) is in upgrade-failed"),))),
        eks_prod=world("eks-prod", deploy_plan.DIFFERS))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.current == 0 and found.halt is not None and found.halt.stack == "existing-prod"
    # eks-prod was never deployed: nothing of it to pause.
    assert [s.world.name for s in found.started()] == [*CANARIES, "existing-prod", "prod"]
    assert found.ups == []


def test_every_stack_with_a_rollout_in_flight_counts_against_the_limits_whatever_its_deploy_state() -> None:
    """existing-prod's file changed while it still rolls (pending, not rolling): its cluster and its 8 GPUs count, so
    of the canaries only those on clusters already in flight or one more may go."""
    changed = {name: world(name, deploy_plan.DIFFERS, update=3, view=view(name)) for name in CANARIES}
    worlds = fleet_world(
        canary=changed["canary"], eks_canary=changed["eks-canary"], existing_canary=changed["existing-canary"],
        existing_prod=world("existing-prod", deploy_plan.DIFFERS, update=3,
                            view=view("existing-prod", complete=False)))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.stack("existing-prod").status == StackStatus.PENDING and found.stack("existing-prod").in_flight
    assert found.ups == ["canary", "existing-canary"]
    assert found.clusters_in_flight == ["inference-weu-1", "lab-gpu-1"]
    assert found.gpus_committed == 8 + 4 + 10
    assert found.blocked == ["eks-canary waits: 2 cluster(s) have a rollout in flight (inference-weu-1, lab-gpu-1), "
                             "limits.maxClustersInFlight is 2"]


def test_a_wave_a_rollback_halted_stays_where_it_is_and_earlier_waves_still_move() -> None:
    why = "rollback of stack eks-prod: Xid 79 after the driver change"
    worlds = fleet_world(prod=world("prod", deploy_plan.DIFFERS), eks_prod=world("eks-prod", deploy_plan.ROLLED_BACK))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED, halted_waves={"prod-cloud": why})
    assert found.ups == [] and found.current == 2 and found.waves[2].status == WaveStatus.HALTED
    assert found.blocked == [f"wave prod-cloud is halted ({why}): it and the waves after it stay where they are "
                             "until `gpu-rollout fleet resume`"]
    # The rollback's pull request merged: the stack is in step again, and its wave still waits for a person.
    worlds["eks-prod"] = world("eks-prod")
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED, halted_waves={"prod-cloud": why})
    assert found.ups == [] and found.waves[2].status == WaveStatus.HALTED
    worlds["canary"] = world("canary", deploy_plan.DIFFERS)
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED, halted_waves={"prod-cloud": why})
    assert found.current == 0 and found.ups == ["canary"]


def test_waves_an_approved_plan_saw_done_count_where_this_run_cannot_read_them() -> None:
    """The production identity reads only the prod clusters: the canaries are unreadable to it, and the canary wave
    counts as done only because the approved plan's run saw it done."""
    worlds = fleet_world(**{name.replace("-", "_"): world(name, view=None, view_error="nodes is forbidden")
                            for name in CANARIES}, existing_prod=world("existing-prod", deploy_plan.DIFFERS))
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED)
    assert found.current == 0 and found.ups == []
    found = assess(FLEET, worlds, Probe(), NOW, verified=ALL_VERIFIED, vouched_waves=["canary"])
    assert found.current == 1 and found.ups == ["existing-prod"] and found.clusters_in_flight == ["lab-gpu-1"]
    assert found.vouched == ["wave canary: done as the approved plan read it; this run could not read canary, "
                             "eks-canary, existing-canary"]


def test_a_verify_that_could_not_ask_the_cluster_neither_passes_nor_halts() -> None:
    class Blind(Probe):
        def verify(self, stack: str, through_wave: int | None = None) -> list[str] | None:
            return None

    found = assess(FLEET, fleet_world(), Blind(), NOW, verified={})
    assert found.halt is None and found.current == 0 and found.ups == []
    assert found.blocked[0] == "canary: verify --smoke could not read its cluster now; asked again next run"


def test_the_most_gpus_a_rollout_takes_out_at_once() -> None:
    # existing-prod: per-NVIDIADriver policy, maxParallelUpgrades 1, 25%: one of l40s-serving's four 4-GPU nodes
    # upgrading and one just upgraded held by the validation job; h100-serving is held.
    assert worst_gpus_unavailable(SPECS["existing-prod"]) == 4 + 4
    # existing-canary: one of l40s-canary's 1-GPU nodes (+1 validating) and the one 8-GPU h100-canary node.
    assert worst_gpus_unavailable(SPECS["existing-canary"]) == 2 + 8
    assert worst_gpus_unavailable(SPECS["eks-prod"]) == 0  # the node image owns the driver


def test_a_stack_moves_from_the_driver_its_last_succeeded_update_ran() -> None:
    """Issue 32, point 2: fleet status and advance take the driver a stack moves from where plan --from-backend
    takes it, its last succeeded update's config, and say so; driver.previousVersion only before any."""
    from promotion_train.train import stack_world
    from pulumi_backend import pulumi_config
    from fleetspec.load import read_stack_file

    (stack,) = [s for s in stack_files(PROJECT_DIR) if s.name == "prod"]
    spec = load_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")
    deployed_config = {k: {"value": v, "secret": False} for k, v in read_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")
                       .items()}
    deployed_config["gpu-driver-upgrade:driver"]["value"] = (
        '{"owner": "operator", "version": "575.57.08", "previousVersion": "570.195.03"}')

    def update(version: int, result: str, driver_config: dict) -> pulumi_config.Update:
        return pulumi_config.Update(version, "update", result, True, "2026-12-09T10:00:00Z",
                                    pulumi_config.parse_config(driver_config), "up", {"git.head": "abc"})

    class Git:
        def is_ancestor(self, ancestor: str, commit: str) -> bool:
            return True

        def first_parent(self, commit: str) -> str | None:
            return None

        def first_parent_history(self, since: str | None, until: str) -> list:
            return []

        def added_on_first_parent_line(self, name: str, until: str) -> None:
            return None

    failed_newer = update(2, "failed", {k: v for k, v in deployed_config.items() if "driver" not in k})
    history = deploy_plan.Deployed([failed_newer, update(1, "succeeded", deployed_config)])
    from datetime import UTC, datetime

    now = datetime.fromtimestamp(NOW, UTC)
    found = stack_world(stack, spec, history, "abc", Git(), now)
    assert found.moves_from() == ("575.57.08", "last deployment: its last succeeded update in the backend")
    never = stack_world(stack, spec, deploy_plan.Deployed(None), "abc", Git(), now)
    assert never.moves_from() == (spec.driver.previousVersion,
                                  "driver.previousVersion (no succeeded update in the backend)")
