"""The kinds of ``--json`` error document (``error.kind``): what went wrong when a verb stops on an error
(``rollout/documents.py`` writes the document, ``rollout/schemas.py`` describes it)."""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    INVALID_INPUT = "invalid-input"  # a flag, a stack file or the fleet file is wrong (exit 2)
    WRONG_CLUSTER = "wrong-cluster"  # the kubeconfig reaches another stack's cluster (exit 2)
    KUBECONFIG = "kubeconfig"  # --kubeconfig/--context cannot be used (exit 2)
    CLUSTER = "cluster"  # the cluster failed a read or a write (exit 1)
    BACKEND = "backend"  # the Pulumi backend (exit 1)
    REFUSED = "refused"  # the verb itself declined (rollback refused, and why)
    INTERNAL = "internal"  # a defect (exit 70)
