"""The offline preview (preview/run.py) itself: the mocks answer only what they know, refuse what the engine
refuses, and never read the engine's ambient config."""

from __future__ import annotations

import json
import os

import pulumi
import pytest

from preview.run import RecordingMocks, run_program
from tests.conftest import edited, stack_config

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



def test_the_preview_refuses_two_resources_with_one_name() -> None:
    mocks = RecordingMocks()
    args = pulumi.runtime.MockResourceArgs("kubernetes:policy/v1:PodDisruptionBudget", "x", {}, custom=True)
    mocks.new_resource(args)
    with pytest.raises(ValueError, match="duplicate resource"):
        mocks.new_resource(args)

