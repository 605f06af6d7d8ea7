"""fleetspec.stacks: a stack's own name, whether Pulumi would accept it, and whether two names name one stack."""

from __future__ import annotations

import pytest

from fleetspec import stacks


@pytest.mark.parametrize(("stack", "own"), [
    ("canary", "canary"),
    ("acme/gpu-driver-upgrade/eks-canary", "eks-canary"),
    ("org/project/..", ".."),  # what is left is judged by is_stack_name, not here
    ("", ""),
])
def test_stack_name_is_the_last_part(stack: str, own: str) -> None:
    assert stacks.stack_name(stack) == own


@pytest.mark.parametrize(("name", "accepted"), [
    ("canary", True), ("eks-prod_2.v1", True), ("...", True),
    ("..", False), (".", False), ("", False), ("can ary", False), ("org/canary", False),
])
def test_is_stack_name(name: str, accepted: bool) -> None:
    assert stacks.is_stack_name(name) is accepted


def test_same_stack_compares_own_names() -> None:
    assert stacks.same_stack("acme/gpu-driver-upgrade/canary", "canary")
    assert not stacks.same_stack("acme/gpu-driver-upgrade/canary", "eks-canary")
