"""The ``guard`` block of the stack config: the in-cluster guard the program declares for the stack
(components/guard.py; what the process watches and pauses: the guard's own page in docs/).

``enabled`` left out means the stage's default: on in prod, off elsewhere (:meth:`Guard.enabled_in`). The image is
the project's own, pinned by digest; the model takes an explicit tag as well (a canary may try one), and policy
`guard-image-digest` refuses a prod stack whose guard has no image or a tag without a digest (a prod stack file
written before the guard existed still loads, so `plan` can render it as the last deployment).
"""

from __future__ import annotations

import re

from pydantic import Field, StrictBool, field_validator

from fleetspec.base import DNS_LABEL, PositiveInt, SpecModel, Stage, check_label_map, check_pinned_image

# An OCI digest as registries write it: sha256 and 64 lowercase hex digits.
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def has_digest(image: str) -> bool:
    return DIGEST.search(image) is not None


class Guard(SpecModel):
    """The guard: a Deployment in the stack's cluster that runs gpu-rollout's guard verb for this stack, watches
    every rollout within a minute and the fleet between rollouts, and pauses a rollout as `gpu-rollout pause` does.
    The program declares it, with its RBAC and admission policy, where it is enabled."""

    enabled: StrictBool | None = Field(
        None, description="Whether the program declares the guard. Left out: `true` in prod, `false` elsewhere.",
        examples=[True])
    image: str | None = Field(
        None, min_length=1, description="The project's image (built from the repository's `Dockerfile` by "
        "`.github/workflows/guard-image.yml`), pinned by digest: `registry/name@sha256:<64 hex>`. Required with "
        "`enabled: true`; in prod, where the guard is on by default, no image or a tag without a digest fails "
        "policy `guard-image-digest`.",
        examples=["ghcr.io/example-org/gpu-driver-upgrade@sha256:" + "0" * 64])
    namespace: str = Field(
        "gpu-rollout-guard", description="The guard's namespace (created by the stack): its Deployment, Service, "
        "the Lease of its leader election and its project ConfigMap.")
    validationDeadlineMinutes: PositiveInt = Field(
        30, description="How long after a node's upgrade its validation result may be missing before the guard "
        "pauses the rollout (trigger `validation-missing`).")
    replicas: PositiveInt = Field(
        2, description="Replicas of the guard; one leader acts (a Lease), the others take over when it stops "
        "renewing. Two keep watching while a node drains.")
    prometheusOperator: StrictBool = Field(
        False, description="Declares that the cluster has the Prometheus Operator's CRDs (`ServiceMonitor`, "
        "`PrometheusRule`): the program then adds a ServiceMonitor for the guard's `/metrics` and its alerts. "
        "A claim, not a read: where the CRDs are missing, `pulumi up` fails on those kinds.")
    monitoringLabels: dict[str, str] = Field(
        default_factory=dict, description="Labels on the ServiceMonitor and PrometheusRule, for the Prometheus's "
        "`serviceMonitorSelector` and `ruleSelector` (kube-prometheus-stack: `release: <its release>`).",
        examples=[{"release": "kube-prometheus-stack"}])

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "@" in value and not has_digest(value):
            raise ValueError(f"image '{value}': a digest is '@sha256:' and 64 lowercase hex digits")
        return check_pinned_image(value)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not DNS_LABEL.fullmatch(value):
            raise ValueError(f"'{value}' is not a valid Kubernetes namespace name")
        return value

    @field_validator("monitoringLabels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return check_label_map(value)

    def enabled_in(self, stage: Stage) -> bool:
        """Whether the stack declares the guard: as set, else on in prod only."""
        return self.enabled if self.enabled is not None else stage == Stage.PROD
