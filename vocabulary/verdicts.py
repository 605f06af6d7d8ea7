"""What a verb that judges a change says of it, in one word each: `plan` (``verdict`` in its ``--json`` and its last
line) and `fleet plan` per stack. One function decides it (:func:`rollout.plan.judge`); these are its words. And what
`plan` says of each resource against the last deployment (:mod:`preview.changes`)."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    ADMITTED = "admitted"  # no finding of the pack, no failed live check
    ADVISED = "admitted-with-advice"  # admitted; advisory findings or live warnings to read
    REFUSED = "refused"  # a mandatory finding of the pack (or, with --from-cluster, a failed live check)


class ChangeMarker(StrEnum):
    """A resource against the last deployment's rendering, as `pulumi preview --diff` would mark it."""

    CREATE = "create"
    ADOPT = "adopt"  # imported (Pulumi's `import`), not created
    UPDATE = "update"
    REPLACE = "replace"  # a field the cloud cannot change in place differs
    DELETE = "delete"
    SAME = "same"
