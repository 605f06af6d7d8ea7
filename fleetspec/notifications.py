"""Who is told when a pool starts, pauses and finishes: the webhook a stack names (``notifications``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from fleetspec.base import DNS_LABEL, SpecModel

WEBHOOK_SECRET = "gpu-driver-upgrade-webhook"  # the default Secret, in kube-system
WEBHOOK_SECRET_KEY = "url"


class Webhook(SpecModel):
    kind: Literal["slack", "teams", "json"] = Field(
        description="What the endpoint takes: `slack` (an incoming webhook: `{\"text\"}`), `teams` (a Teams "
        "Workflows webhook: an Adaptive Card message) or `json` (the event as one JSON document, for any endpoint).",
        examples=["slack"])
    secret: str = Field(
        WEBHOOK_SECRET,
        description="The Kubernetes Secret in `kube-system` of the stack's cluster whose key `url` holds the webhook "
        "URL (a credential: never in the stack file). The deploy step (`gpu-rollout fleet advance`) and the in-cluster "
        "guard both read it there, so one URL serves both; fill it from your secret store (External Secrets, "
        "`kubectl create secret generic gpu-driver-upgrade-webhook -n kube-system --from-literal=url=...`).",
        examples=["fleet-webhook"])

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        if not DNS_LABEL.fullmatch(value.replace(".", "-")) or len(value) > 253:
            raise ValueError(f"'{value}' is not a Kubernetes Secret name (lowercase letters, digits, '-', '.')")
        return value


class Notifications(SpecModel):
    webhook: Webhook | None = Field(
        None, description="Where the model owners (`models[].owners`) are told, once per event, when a pool of "
        "theirs starts, pauses and finishes moving; none: no one is told.")
