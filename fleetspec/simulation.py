"""How long the steps of a rollout take, for `gpu-rollout simulate` (docs/simulate.md): the ``simulation`` block of
the stack config. Every key has a default, so a stack without the block simulates with these figures.

The figures are what the upgrade controller waits for on one node (``docs/simulate.md`` compares them with the
state-label timestamps `gpu-rollout watch` shows), not settings of the operator: the operator's own limits
(``podDeletion.timeoutSeconds``, the validator's 600 s) come from ``gpuOperator.upgradePolicy`` and
:data:`VALIDATION_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fleetspec.base import NonNegativeInt, PositiveInt, SpecModel

# k8s-operator-libs: a node waits this long in validation-required for the validator pods
# (app=nvidia-operator-validator) to be Ready, then goes to upgrade-failed (reference §3.1, validationTimeoutSeconds).
VALIDATION_TIMEOUT_SECONDS = 600
# k8s-operator-libs: a driver pod whose container restarted more than 10 times sends its node to upgrade-failed.
DRIVER_RESTART_LIMIT = 10
# The kubelet's crash-loop back-off: 10 s doubling to a 300 s cap, so the 11th restart comes this long after the
# first failure (10+20+40+80+160 + 6 x 300).
CRASH_LOOP_SECONDS = 10 + 20 + 40 + 80 + 160 + 6 * 300

Fraction = Annotated[float, Field(ge=0, le=1)]


class Simulation(SpecModel):
    """Durations of a rollout's steps for `gpu-rollout simulate` (docs/simulate.md): one node's upgrade and a
    model's replica coming back, with their spread. Measure them on the canary (`gpu-rollout watch` shows each
    node's time in state). The operator's own limits are not here: pod deletion and drain timeouts come from
    ``gpuOperator.upgradePolicy``, the validator's 600 s is the operator's."""

    driverInstallSeconds: PositiveInt = Field(
        420, description="From the old driver pod's deletion until the new one is Ready (image pull, kernel "
        "module build or load): pod-restart-required.")
    validatorSeconds: PositiveInt = Field(
        150, description="Until the operator validator's pods are Ready on the node (validation-required); above "
        f"{VALIDATION_TIMEOUT_SECONDS} the node goes to upgrade-failed, as the operator's timeout does.")
    podTerminationSeconds: NonNegativeInt = Field(
        30, description="From an eviction until the pod is gone (graceful shutdown of the model server).")
    cachedLoadSeconds: PositiveInt = Field(
        180, description="A rescheduled replica of a model that loads its weights from a cache (PVC, host path, "
        "weights in the image) until Ready.")
    uncachedLoadSeconds: PositiveInt = Field(
        1500, description="A rescheduled replica that downloads its weights until Ready (the weights-cache check's "
        "20+ minutes).")
    validationJobSeconds: NonNegativeInt = Field(
        600, description="How long this project's validation job holds a node's GPUs after its upgrade (only "
        "with a validation block; its pod asks for every GPU of the node).")
    jobRemainingSeconds: NonNegativeInt = Field(
        1800, description="How long a pod matching waitForCompletion.podSelector still runs (pods found with "
        "--from-cluster).")
    waveGapSeconds: NonNegativeInt = Field(
        0, description="Between the last node of a wave done and the next wave released (soak, approval).")
    jitter: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.1, description="Each duration is drawn from [d x (1 - jitter), d x (1 + jitter)], from the seed.")
    driverFailureRate: Fraction = Field(
        0.0, description="Share of nodes whose new driver pod crash-loops (then upgrade-failed after "
        f"{DRIVER_RESTART_LIMIT} restarts), drawn from the seed.")

    def load_seconds(self, cached: bool, declared: int | None = None) -> int:
        """How long a rescheduled replica takes until Ready: the model's own figure, else by its cache."""
        if declared is not None:
            return declared
        return self.cachedLoadSeconds if cached else self.uncachedLoadSeconds


__all__ = ["CRASH_LOOP_SECONDS", "DRIVER_RESTART_LIMIT", "Simulation", "VALIDATION_TIMEOUT_SECONDS"]
