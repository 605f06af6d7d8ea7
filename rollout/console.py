"""The consoles every verb prints through: reports on stdout, messages on stderr.

On a terminal a report takes its width. Piped or captured (CI logs, ``> file``) it is ``$COLUMNS`` wide when
that is set to a number, else 160 columns, so table rows keep their lines instead of folding at 80. Messages
on stderr are printed as written: no markup (a selector in brackets is text), no highlighting, no wrapping
whatever the width.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

WIDTH_WITHOUT_A_TERMINAL = 160
WIDTH_VARIABLE = "COLUMNS"  # what shells export and what `COLUMNS=100 gpu-rollout plan ... | less` sets


def report_width() -> int | None:
    """The width of a report: None on a terminal (rich asks it), else ``$COLUMNS``, else 160."""
    if sys.stdout.isatty():
        return None
    given = os.environ.get(WIDTH_VARIABLE, "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else WIDTH_WITHOUT_A_TERMINAL


def stdout(*, highlight: bool = True) -> Console:
    """The console for a verb's report (tables, one line per changed node)."""
    return Console(width=report_width(), highlight=highlight)


def stderr() -> Console:
    """The console for messages: errors, notes, why a verb stopped."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def say(message: str) -> None:
    """One message on stderr, exactly as written."""
    stderr().print(message, markup=False, highlight=False, soft_wrap=True)
