"""Who is told when a pool starts, pauses and finishes: the webhook a stack names (``notifications``)."""

from __future__ import annotations

from typing import Literal

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from fleetspec.base import DNS_LABEL, SpecModel

WEBHOOK_SECRET = "gpu-driver-upgrade-webhook"  # the default Secret, in kube-system
WEBHOOK_SECRET_KEY = "url"
WEBHOOK_NAMESPACE = "kube-system"  # where the Secret is, in the stack's cluster


class PulumiSecret(SpecModel):
    """A value `pulumi config set --secret --path` wrote: ciphertext in the stack file, which only the engine
    decrypts (offline, the value stays unread)."""

    secure: str = Field(min_length=1, description="The ciphertext `pulumi config set --secret` wrote.")


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
    url: PulumiSecret | str | None = Field(
        None,
        description="The webhook URL as a Pulumi secret (`pulumi config set --secret --path "
        "'gpu-driver-upgrade:notifications.webhook.url' https://hooks.slack.com/...`); the program then writes it into "
        "`secret` (which it owns), where both senders read it. A plain URL in a stack file is refused (it is a "
        "credential). None: `secret` is filled by you.")

    @field_validator("url")
    @classmethod
    def _url(cls, value: PulumiSecret | str | None) -> PulumiSecret | str | None:
        if isinstance(value, str) and not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value

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


def plain_webhook_url(config: Mapping[str, Any], project: str) -> bool:
    """Whether a stack file's ``config:`` holds the webhook URL in plain text (a credential in git)."""
    block = config.get(f"{project}:notifications")
    webhook = block.get("webhook") if isinstance(block, Mapping) else None
    return isinstance(webhook, Mapping) and isinstance(webhook.get("url"), str)
