"""The offline preview (preview/run.py) itself: the mocks answer only what they know, refuse what the engine
refuses, and never read the engine's ambient config."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os

from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockMonitor

from preview import garbage, run as preview_run
from preview.garbage import leave_garbage_to_exit
from preview.run import RecordingMocks, recanaried, redeployed, run_program
from engine_contracts import resource_facts as rf
from tests.conftest import EXAMPLE_STACKS, edited, stack_config

NVIDIA_DRIVER = "kubernetes:nvidia.com/v1alpha1:NVIDIADriver"


def test_offline_preview_refuses_an_invoke_it_does_not_know() -> None:
    mocks = RecordingMocks()
    with pytest.raises(NotImplementedError, match="aws:ec2/getAmi:getAmi"):
        mocks.call(pulumi.runtime.MockCallArgs("aws:ec2/getAmi:getAmi", {}, ""))



def test_offline_preview_ignores_an_ambient_engine_config(monkeypatch: pytest.MonkeyPatch) -> None:
    ambient = edited("prod", "driver", lambda d: d.update(version="595.91.07"))
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(ambient))
    run = run_program(stack_config("prod"), "prod")
    assert {r.name: r.inputs for r in run.of_type(NVIDIA_DRIVER)}["gpu-gput4"]["spec"]["version"] == "580.173.02"
    assert json.loads(os.environ["PULUMI_CONFIG"]) == ambient  # restored afterwards



def test_the_preview_pauses_cyclic_gc_while_the_program_runs_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    record = RecordingMocks.new_resource

    def spy(self: RecordingMocks, args: pulumi.runtime.MockResourceArgs) -> tuple:
        seen.append(gc.isenabled())
        return record(self, args)

    monkeypatch.setattr(RecordingMocks, "new_resource", spy)
    assert gc.isenabled()
    run_program(stack_config("canary"), "canary")
    assert seen and not any(seen)
    assert gc.isenabled()
    # a program that fails (bad config) leaves collection on as well
    bad = edited("canary", "driver", lambda d: d.update(version="not-a-version"))
    with pytest.raises(Exception, match="not-a-version"):
        run_program(bad, "canary")
    assert gc.isenabled()
    # and a caller that turned collection off keeps it off
    gc.disable()
    try:
        run_program(stack_config("canary"), "canary")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_preview_sends_no_call_stacks_and_restores_the_sdk_capture_afterwards(monkeypatch: pytest.MonkeyPatch) -> None:
    capture = pulumi.runtime.resource._get_stack_trace
    sent: list[tuple[int, bool]] = []
    register = preview_run._DependencyRecordingMonitor.RegisterResource

    def spy(self: preview_run._DependencyRecordingMonitor, request: object) -> object:
        sent.append((len(request.stackTrace.frames), request.HasField("sourcePosition")))  # type: ignore[attr-defined]
        return register(self, request)

    monkeypatch.setattr(preview_run._DependencyRecordingMonitor, "RegisterResource", spy)
    run_program(stack_config("canary"), "canary")
    assert len(sent) > 20 and set(sent) == {(0, False)}  # no frames, no source position on any registration
    assert pulumi.runtime.resource._get_stack_trace is capture
    bad = edited("canary", "driver", lambda d: d.update(version="not-a-version"))
    with pytest.raises(Exception, match="not-a-version"):
        run_program(bad, "canary")
    assert pulumi.runtime.resource._get_stack_trace is capture  # a failed program restores it too


def test_the_preview_refuses_two_resources_with_one_name() -> None:
    mocks = RecordingMocks()
    args = pulumi.runtime.MockResourceArgs("kubernetes:policy/v1:PodDisruptionBudget", "x", {}, custom=True)
    mocks.new_resource(args)
    with pytest.raises(ValueError, match="duplicate resource"):
        mocks.new_resource(args)



def _registered(run) -> list[tuple]:
    def text(value: object) -> str:  # a preview's unknowns (ids not assigned yet) read as such
        return json.dumps(value, sort_keys=True, default=lambda unknown: f"[{type(unknown).__name__}]")

    return sorted((r.type, r.name, text(r.inputs), text(r.outputs)) for r in run.resources)


@pytest.mark.parametrize("stack", [s for s in EXAMPLE_STACKS if "prod" in s])
@pytest.mark.parametrize("canary", ["the prod stack itself", "another driver", "no canary"])
def test_a_stack_recanaried_is_its_rendering_on_that_canary(stack: str, canary: str) -> None:
    """`recanaried` stands for a rendering on other canary outputs (plan's assumption notes): the same
    registrations as running the program again, the promotion record's canary fields aside from the first."""
    first = run_program(stack_config(stack), stack)
    (name,) = {json.loads(stack_config(stack)["gpu-driver-upgrade:promotion"])["canaryStack"]}
    given = {"the prod stack itself": first.outputs, "no canary": {},
             "another driver": {**first.outputs, "driverVersion": "595.91.07",
                                "pools": {p: {**v, "driverVersion": "595.91.07"}
                                          for p, v in first.outputs["pools"].items()}}}[canary]
    again = run_program(stack_config(stack), stack, stack_outputs={name: given})
    assert _registered(recanaried(first, given)) == _registered(again)
    assert recanaried(first, given).outputs == again.outputs
    if given:  # the canary's fields differ from those of a canary that shows nothing (the first rendering's)
        assert _registered(first) != _registered(again)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_a_stack_redeployed_on_its_own_outputs_is_its_first_rendering_plus_them(stack: str) -> None:
    """`redeployed` stands for a second rendering (diff's base as deployed): the same registrations, the
    last deployment's outputs on the component that holds them."""
    first = run_program(stack_config(stack), stack)
    again = run_program(stack_config(stack), stack, previous_outputs=first.outputs)
    assert _registered(redeployed(first)) == _registered(again)
    assert _registered(first) != _registered(again)  # the component's outputs differ from a first deployment
    (component,) = [r for r in redeployed(first).resources if r.type == rf.PREVIOUS_DEPLOYMENT_COMPONENT]
    assert first.outputs and component.outputs["outputs"]["driverVersion"] == first.outputs["driverVersion"]
    assert component.outputs["outputs"].keys() == first.outputs.keys()


def _garbage_left_after(runs: int) -> int:
    """Objects the cyclic collector frees once ``runs`` runs of the canary ended, in a process that leaves each
    run's garbage to exit."""
    gc.collect()
    leave_garbage_to_exit()
    try:
        for _ in range(runs):
            run_program(stack_config("canary"), "canary")
            assert gc.isenabled() and gc.get_freeze_count() > 0  # left uncollected, collection back on
    finally:
        leave_garbage_to_exit(False)  # unfreezes what the last run left
    assert gc.get_freeze_count() == 0
    return gc.collect()


def test_a_one_shot_process_leaves_a_run_s_garbage_to_exit_but_never_more_than_one_run_s() -> None:
    one, two = _garbage_left_after(1), _garbage_left_after(2)
    assert one > 1_000  # a run's Outputs and futures were left, not collected when it ended
    assert two < 1.5 * one  # the second run collected the first's before making its own
    # By default (a process that renders many times) each run's garbage is collected as before: nothing frozen.
    run_program(stack_config("canary"), "canary")
    assert gc.get_freeze_count() == 0


def test_gpu_rollout_s_entry_point_is_a_one_shot_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from rollout import cli

    seen: list[bool] = []
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)  # keep this process's SIGPIPE as it is
    monkeypatch.setattr(cli, "app", lambda: seen.append(garbage._GARBAGE.left_to_exit))
    try:
        cli.main()
    finally:
        leave_garbage_to_exit(False)
    assert seen == [True]


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_answering_with_the_request_s_own_bytes_changes_nothing_the_program_sees(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered: list[str] = []
    echoed = preview_run._DependencyRecordingMonitor._register

    def spy(self: preview_run._DependencyRecordingMonitor, request: Any) -> Any:
        answered.append(request.type)
        return echoed(self, request)

    monkeypatch.setattr(preview_run._DependencyRecordingMonitor, "_register", spy)
    fast = run_program(stack_config(stack), stack)
    assert len(answered) > 20  # the fast answer was taken
    # MockMonitor's own answer: the state deserialized and serialized again.
    monkeypatch.setattr(preview_run._DependencyRecordingMonitor, "_register",
                        lambda self, request: MockMonitor.RegisterResource(self, request))
    slow = run_program(stack_config(stack), stack)
    assert _seen(fast) == _seen(slow)  # outputs; each resource's inputs, dependencies and registered outputs


def _seen(run: preview_run.ProgramRun) -> str:
    """All a run registered and exported, comparable across runs: an unknown (an object of its own in each run) by
    its type's name, and dependencies (which arrive in the SDK's order, differing between runs) as sets."""
    resources = [{**dataclasses.asdict(r), "dependencies": sorted(r.dependencies)} for r in run.resources]
    return json.dumps([run.outputs, resources], default=lambda value: type(value).__name__)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_remembering_the_sdk_s_type_unwrapping_changes_nothing_and_is_undone(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unwrap = pulumi._types.unwrap_type, pulumi._types.unwrap_optional_type
    remembered = run_program(stack_config(stack), stack)
    assert (pulumi._types.unwrap_type, pulumi._types.unwrap_optional_type) == unwrap  # restored after the run
    monkeypatch.setattr(preview_run, "_type_unwrapping_memoised", contextlib.nullcontext)
    assert _seen(remembered) == _seen(run_program(stack_config(stack), stack))
    bad = edited("canary", "driver", lambda d: d.update(version="not-a-version"))
    monkeypatch.undo()
    with pytest.raises(Exception, match="not-a-version"):
        run_program(bad, "canary")
    assert (pulumi._types.unwrap_type, pulumi._types.unwrap_optional_type) == unwrap  # a failed program too
