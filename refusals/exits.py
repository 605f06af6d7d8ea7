"""The exit codes of every ``gpu-rollout`` verb, in one type: a verb returns an :class:`Exit`, never a bare int.

``OK`` all good; ``FAILED`` a check or mandatory policy failed, a trigger stopped the watch, or a cluster
call failed (the message names what); ``INVALID`` the input is wrong: a stack file, a flag, a kubeconfig,
or a cluster that is not the stack's (the message names the key, file or flag); ``INTERNAL`` a defect of
gpu-rollout itself, not of the input (``EX_SOFTWARE`` of sysexits.h), reported in one line with where the
traceback was written.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    INVALID = 2
    INTERNAL = 70

    @classmethod
    def failed_if(cls, failed: bool) -> Exit:
        return cls.FAILED if failed else cls.OK
