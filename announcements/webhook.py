"""What each kind of webhook takes, and one POST of it."""

from __future__ import annotations

import json
from typing import Any

import urllib3

from announcements.events import PoolEvent


class WebhookError(Exception):
    """The webhook did not take the message: one line saying why (never the URL: it is a credential)."""


def payload(kind: str, event: PoolEvent) -> dict[str, Any]:
    """The body for a webhook of ``kind``: Slack's ``{"text"}``, a Teams Workflows Adaptive Card message, or the event
    as a document (``json``)."""
    if kind == "slack":
        return {"text": event.text()}
    if kind == "teams":
        card = {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "version": "1.4", "body": [{"type": "TextBlock", "text": event.text(), "wrap": True}]}
        return {"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive",
                                                    "contentUrl": None, "content": card}]}
    return event.document()


def post(url: str, body: dict[str, Any], timeout: float = 10.0) -> None:
    """POST ``body`` as JSON to ``url``; any status but 2xx, or no answer, raises :class:`WebhookError`."""
    http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout))
    try:
        response = http.request("POST", url, body=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    except urllib3.exceptions.HTTPError as exc:
        raise WebhookError(f"the webhook did not answer ({type(exc).__name__})") from None
    if not 200 <= response.status < 300:
        text = " ".join(bytes(response.data).decode("utf-8", "replace").split())[:200]
        raise WebhookError(f"the webhook answered HTTP {response.status}: {text}")
