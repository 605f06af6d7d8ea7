"""Shared fixtures: the example stacks, rendered by the real program under Pulumi's mocks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from preview.run import PROJECT_DIR, ProgramRun, run_program
from spec.load import read_stack_file

EXAMPLE_STACKS = ("canary", "prod", "eks-canary", "eks-prod")
SHARED_CRDS = PROJECT_DIR.parent / "shared" / "reference" / "crds"


def stack_config(stack: str) -> dict[str, str]:
    return read_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml")


def edited(stack: str, key: str, edit: Callable[[dict], object]) -> dict[str, str]:
    """The config of an example stack with one structured key changed by ``edit`` (in place)."""
    config = stack_config(stack)
    full_key = f"gpu-driver-upgrade:{key}"
    value = json.loads(config[full_key]) if config[full_key][:1] in "{[" else config[full_key]
    edit(value)
    config[full_key] = json.dumps(value)
    return config


@pytest.fixture(scope="session")
def rendered() -> dict[str, ProgramRun]:
    """Each example stack rendered once per session (rendering is pure; tests only read the result)."""
    return {stack: run_program(stack_config(stack), stack) for stack in EXAMPLE_STACKS}
