"""Pulumi stack names, as the stack files and ``promotion.canaryStack`` spell them.

A stack is named fully (``org/project/canary``, what a StackReference takes) or by its own name (``canary``, the
``canary`` of ``Pulumi.canary.yaml``); both name the same stack. Everything that compares stacks, or names a
file or folder after one, reads its own name here.
"""

from __future__ import annotations

import re

# A stack's own name as Pulumi allows it: letters, digits, '-', '_' and '.'; never '.' or '..', so a folder
# named after it stays inside its parent.
MAX_NAME_LENGTH = 100  # Pulumi refuses a longer stack name
_OWN_NAME = re.compile(rf"^(?!\.{{1,2}}$)[A-Za-z0-9_.-]{{1,{MAX_NAME_LENGTH}}}$")


def stack_name(stack: str) -> str:
    """A stack's own name, the last part of ``org/project/stack`` (a bare name is its own)."""
    return stack.rsplit("/", 1)[-1]


def is_stack_name(name: str) -> bool:
    """Is ``name`` a stack's own name Pulumi accepts, so a file or folder may be named after it."""
    return bool(_OWN_NAME.match(name))


def same_stack(first: str, second: str) -> bool:
    """Do the two names name one stack (``org/project/canary`` and ``canary`` do)."""
    return stack_name(first) == stack_name(second)
