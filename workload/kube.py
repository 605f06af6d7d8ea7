"""The one write the job makes to the Kubernetes API: a JSON merge patch of its own Node.

In the pod it authenticates with the pod's projected service-account token (re-read on every attempt,
since the kubelet rotates it), which is bound to the pod and carries the node's name; the admission
policy the program declares lets that identity change only its own node's validation labels and
result annotations (components/validation.py). Standard library only.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(Exception):
    pass


@dataclass(frozen=True)
class ApiServer:
    url: str
    token_file: Path
    ca_file: Path | None

    @classmethod
    def in_cluster(cls, url: str | None = None, token_file: str | None = None,
                   ca_file: str | None = None) -> ApiServer:
        """The API server as a pod sees it, each part overridable (for running the program outside a pod)."""
        if url is None:
            host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise KubeError("not in a pod (no KUBERNETES_SERVICE_HOST) and no --api-server given")
            url = f"https://{f'[{host}]' if ':' in host else host}:{port}"
        return cls(url.rstrip("/"), Path(token_file) if token_file else SERVICE_ACCOUNT / "token",
                   Path(ca_file) if ca_file else (SERVICE_ACCOUNT / "ca.crt" if url.startswith("https") else None))

    def _context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https"):
            return None
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)

    def patch_node(self, node: str, patch: dict[str, Any], attempts: int = 4, backoff: float = 1.0) -> dict[str, Any]:
        """Merge-patch ``node``; retries what may pass on a second try (connection errors, 429, 5xx)."""
        path = f"/api/v1/nodes/{urllib.parse.quote(node, safe='')}"
        body = json.dumps(patch).encode()
        last = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(
                self.url + path, data=body, method="PATCH",
                headers={"Authorization": f"Bearer {self.token_file.read_text().strip()}",
                         "Content-Type": "application/merge-patch+json", "Accept": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30, context=self._context()) as response:  # noqa: S310
                    return json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                detail = error.read()[:500].decode(errors="replace")
                try:
                    detail = json.loads(detail).get("message", detail)
                except (ValueError, AttributeError):
                    pass
                last = f"PATCH {path}: HTTP {error.code}: {detail}"
                if error.code != 429 and error.code < 500:
                    raise KubeError(last) from None
            except OSError as error:
                last = f"PATCH {path}: {type(error).__name__}: {error}"
        raise KubeError(last)
