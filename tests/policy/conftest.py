"""Fixtures the policy tests share."""

from __future__ import annotations

import pytest

from policy.facts import Resource
from preview.run import run_program
from engine_contracts import resource_facts as rf
from tests.conftest import change, stack_config
from tests.policy.rules import of_type, resources


@pytest.fixture(scope="session")
def helm_release() -> Resource:
    """The prod stack's Helm Release of the operator chart (prod with clusterPolicy: helm)."""
    config = change(stack_config("prod"), "gpuOperator", lambda op: op.update(clusterPolicy="helm"))
    (release,) = of_type(resources(run_program(config, "prod")), rf.HELM_RELEASE)
    return release
