"""The consoles every verb prints through: reports on stdout, messages on stderr.

On a terminal a report takes its width; piped or captured (CI logs, ``> file``) it is 160 columns wide,
so table rows keep their lines instead of folding at 80. Messages on stderr are printed as written: no
markup (a selector in brackets is text), no highlighting, no wrapping whatever the width.
"""

from __future__ import annotations

import sys

from rich.console import Console

WIDTH_WITHOUT_A_TERMINAL = 160


def stdout(*, highlight: bool = True) -> Console:
    """The console for a verb's report (tables, one line per changed node)."""
    return Console(width=None if sys.stdout.isatty() else WIDTH_WITHOUT_A_TERMINAL, highlight=highlight)


def stderr() -> Console:
    """The console for messages: errors, notes, why a verb stopped."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def say(message: str) -> None:
    """One message on stderr, exactly as written."""
    stderr().print(message, markup=False, highlight=False, soft_wrap=True)
