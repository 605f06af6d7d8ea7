"""The refusals: why a verb stops on an error of its input, its cluster or its backend. Each class carries its
exit code (:class:`refusals.exits.Exit`) and its kind (``error.kind`` of the ``--json`` error document), so the
engines raise and ``rollout.cli.run`` alone turns a refusal into an exit code, one message on stderr and, with
``--json``, the error document (``rollout/documents.py``). A refusal is never a defect: no traceback.

The errors of the packages that know no CLI (:class:`fleetspec.load.SpecError`, the cluster adapter's in
``checks/errors.py``) are translated into these by ``run()``, in one table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from refusals.exits import Exit
from vocabulary.errors import ErrorKind

if TYPE_CHECKING:
    from fleetspec.load import SpecProblem


class Refusal(Exception):
    """A verb stops: nothing more is done. ``code`` and ``kind`` come from the class; a subclass whose code
    depends on the case (the backend's) takes it as an argument."""

    code: Exit = Exit.INVALID
    kind: ClassVar[ErrorKind] = ErrorKind.INVALID_INPUT

    def __init__(self, message: str, problems: Sequence[SpecProblem] = (), *, code: Exit | None = None,
                 documented: bool = True) -> None:
        super().__init__(message)
        self.problems = tuple(problems)
        if code is not None:
            self.code = code
        # False only where a verb has always stopped without the --json error document (verify's --signing-key):
        # kept as it was, see docs/architecture.md, "Refusals".
        self.documented = documented

    def text(self, speaker: str | None = None) -> str:
        """The message as stderr shows it; ``speaker`` is the verb family's name where its messages begin with it
        (``fleet: ...``); only the backend's refusals take it."""
        return str(self)


class InvalidInput(Refusal):
    """A flag, a stack file, the fleet file or a git revision is wrong (exit 2)."""

    code = Exit.INVALID
    kind = ErrorKind.INVALID_INPUT


class FlagError(InvalidInput):
    """A flag's value is wrong: the message begins with the flag (``--base: 'x' names no commit``)."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag

    def text(self, speaker: str | None = None) -> str:
        return f"{self.flag}: {self}"


class WrongCluster(Refusal):
    """The kubeconfig reaches another stack's cluster (exit 2)."""

    code = Exit.INVALID
    kind = ErrorKind.WRONG_CLUSTER

    def text(self, speaker: str | None = None) -> str:
        return f"wrong cluster: {self}"


class UnusableKubeconfig(Refusal):
    """--kubeconfig/--context (or the stack's) cannot be used (exit 2)."""

    code = Exit.INVALID
    kind = ErrorKind.KUBECONFIG

    def text(self, speaker: str | None = None) -> str:
        return f"--kubeconfig/--context: {self}"


class ClusterFailed(Refusal):
    """A cluster call failed (exit 1)."""

    code = Exit.FAILED
    kind = ErrorKind.CLUSTER

    def text(self, speaker: str | None = None) -> str:
        return f"cluster error: {self}"


class BackendRefusal(Refusal):
    """The Pulumi backend could not be read (or written) as asked; exit 1 unless the case says otherwise."""

    code = Exit.FAILED
    kind = ErrorKind.BACKEND

    def text(self, speaker: str | None = None) -> str:
        return f"{speaker}: {self}" if speaker else str(self)


class Declined(Refusal):
    """The verb itself declines, and says why (a rollback that must not start); exit 1 unless the case says
    otherwise."""

    code = Exit.FAILED
    kind = ErrorKind.REFUSED
