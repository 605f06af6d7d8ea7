"""Errors of the live checks: one hierarchy, split into retryable and permanent.

The adapter turns every client exception into one of these, so callers never see ``ApiException`` or
urllib3 errors and never mistake a failed read for an empty result.
"""

from __future__ import annotations


class ClusterError(Exception):
    """Talking to the cluster failed; the message says what was asked and why it failed."""


class RetryableError(ClusterError):
    """Throttling (429), server errors (5xx), timeouts, refused connections: worth another try."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TooManyRequestsError(RetryableError):
    """429: the API server's throttling, or an eviction a PodDisruptionBudget refuses now."""


class EvictionRefusedError(ClusterError):
    """An eviction answered 429 (a PodDisruptionBudget allows no disruption now): ask again later, never force."""


class PermanentError(ClusterError):
    """The request cannot succeed as sent; retrying would not help."""


class GaveUpError(ClusterError):
    """Retries ran out (attempts or total time); carries the last retryable error."""


class AccessDeniedError(PermanentError):
    """401/403: names the verb and resource the credentials lack."""


class NotFoundError(PermanentError):
    """404: the object, or the whole resource type (a CRD that is not installed)."""


class NotKubernetesError(PermanentError):
    """The server answered, but not as a Kubernetes API server does (a 404 with no Kubernetes Status): the
    kubeconfig's server URL points at something else. Not a :class:`NotFoundError`: no resource is absent."""


class ConflictError(PermanentError):
    """409: someone else changed the object, or it already exists."""


class ConfigError(PermanentError):
    """No usable kubeconfig, context or in-cluster service account."""


class WrongClusterError(PermanentError):
    """The cluster reached is not the stack's: its identity record or its nodes name another cluster.

    The CLI exits 2 on it (the input, kubeconfig or context, is wrong), before any write."""
