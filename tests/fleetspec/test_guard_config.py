"""The guard block (fleetspec/guard.py): its stage default, each bad value refused at its key, and the example prod
stacks' placeholder digest."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fleetspec.guard import has_digest
from fleetspec.load import SpecError, spec_from_config
from fleetspec.model import Stage
from tests.conftest import EXAMPLE_STACKS, PROJECT_DIR, change, stack_config

KEY = "gpu-driver-upgrade:guard"
DIGEST = "@sha256:" + "ab" * 32


def _problems(stack: str, edit: Callable[[dict], object]) -> dict[str, str]:
    config = stack_config(stack)
    config.setdefault(KEY, "{}")
    with pytest.raises(SpecError) as caught:
        spec_from_config(change(config, "guard", edit))
    return {p.path: p.message for p in caught.value.problems}


@pytest.mark.parametrize(("edit", "key", "reason"), [
    (lambda g: g.update(image="ghcr.io/o/gpu-driver-upgrade"), "image", "explicit tag or digest, not latest"),
    (lambda g: g.update(image="ghcr.io/o/gpu-driver-upgrade:latest"), "image", "not latest"),
    (lambda g: g.update(image="ghcr.io/o/gpu-driver-upgrade@sha256:abc"), "image", "64 lowercase hex digits"),
    (lambda g: g.update(image="ghcr.io/o/gpu-driver-upgrade@sha256:" + "AB" * 32), "image", "64 lowercase hex"),
    (lambda g: g.update(image=""), "image", "at least 1 character"),
    (lambda g: g.update(namespace="Guard_NS"), "namespace", "not a valid Kubernetes namespace name"),
    (lambda g: g.update(replicas=0), "replicas", "greater than 0"),
    (lambda g: g.update(replicas="2"), "replicas", "valid integer"),
    (lambda g: g.update(validationDeadlineMinutes=0), "validationDeadlineMinutes", "greater than 0"),
    (lambda g: g.update(enabled="yes"), "enabled", "valid boolean"),
    (lambda g: g.update(prometheusOperator="true"), "prometheusOperator", "valid boolean"),
    (lambda g: g.update(monitoringLabels={"release": "a b"}), "monitoringLabels", "not a valid label value"),
    (lambda g: g.update(replica=2), "replica", "unknown key"),
    (lambda g: g.update(enabled=True, image=None), "image", "the guard is enabled (guard.enabled): give its image"),
])
def test_a_bad_value_is_refused_at_its_key(edit: Callable[[dict], object], key: str, reason: str) -> None:
    problems = _problems("prod", edit)
    assert f"{KEY}.{key}" in problems, problems
    assert reason in problems[f"{KEY}.{key}"], problems


def test_a_canary_that_enables_the_guard_needs_its_image() -> None:
    problems = _problems("canary", lambda g: g.update(enabled=True))
    assert "the guard is enabled (guard.enabled): give its image" in problems[f"{KEY}.image"], problems


def test_on_by_default_in_prod_only_with_the_contracts_defaults() -> None:
    for stack in EXAMPLE_STACKS:
        spec = spec_from_config(stack_config(stack))
        assert spec.guard_enabled == (spec.stage == Stage.PROD), stack
        assert (spec.guard.namespace, spec.guard.replicas, spec.guard.validationDeadlineMinutes) == (
            "gpu-rollout-guard", 2, 30)
        assert spec.guard.prometheusOperator is False


def test_prod_may_switch_it_off_and_a_tag_or_no_image_is_the_policys_to_judge() -> None:
    off = spec_from_config(change(stack_config("prod"), "guard", lambda g: g.update(enabled=False)))
    assert not off.guard_enabled
    tagged = spec_from_config(change(stack_config("prod"), "guard", lambda g: g.update(
        image="ghcr.io/o/gpu-driver-upgrade:v1.4.0")))
    assert tagged.guard_enabled and not has_digest(tagged.guard.image or "")
    # A prod stack file from before the guard: still a stack (plan renders it as the last deployment).
    before = spec_from_config({k: v for k, v in stack_config("prod").items() if k != KEY})
    assert before.guard_enabled and before.guard.image is None


def test_the_example_prod_stacks_carry_a_placeholder_digest_named_as_such() -> None:
    for stack in EXAMPLE_STACKS:
        config = stack_config(stack)
        if config["gpu-driver-upgrade:stage"] != "prod":
            assert KEY not in config, stack
            continue
        image = spec_from_config(config).guard.image
        assert image is not None and has_digest(image) and image.endswith("0" * 64), stack
        text = (PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text()
        before = text[:text.index("gpu-driver-upgrade:guard:")]
        assert "PLACEHOLDER digest" in before.splitlines()[-2] + before.splitlines()[-3], stack
