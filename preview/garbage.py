"""Cyclic garbage collection around a mock run of the program (:mod:`preview.run`): paused while it runs, and
what it leaves collected after, or left to the process's exit where the process exits after one command.

Apart from :mod:`preview.run` so that gpu-rollout's entry point can declare its policy without importing the SDKs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class _GarbagePolicy:
    left_to_exit: bool = False
    frozen: bool = False  # the last run's garbage is frozen (this module froze it; nobody else's freeze is undone)


_GARBAGE = _GarbagePolicy()


def leave_garbage_to_exit(on: bool = True) -> None:
    """Declare this process one that exits after its command (gpu-rollout's entry point does): each run's cyclic
    garbage is then left uncollected when the run ends (frozen, :func:`gc.freeze`), and collected only when a
    next run in the process starts, so at most one run's garbage is ever kept. Collecting it when the run ends
    means walking every Output, future and request the run made (half a million objects at 150 pools, a
    second of a plan's five; benchmarks/plan_scale.py) just before the process exits and frees them anyway.
    Off (the default), a process that renders many times, the tests, collects after each run as before."""
    _GARBAGE.left_to_exit = on
    if not on and _GARBAGE.frozen:
        gc.unfreeze()
        _GARBAGE.frozen = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the mock engine runs a program. The run allocates thousands of
    Outputs and futures per pool while the SDKs' modules hold millions of live objects, so each full
    collection walks them all again: with collection on, a 150-pool plan took 4.8 s, without it 2.7 s, for
    5 MB more peak memory (benchmarks/plan_scale.py). What the run leaves behind is collected afterwards as
    usual, or by the next run where the process leaves it to exit (:func:`leave_garbage_to_exit`). Only the
    offline preview runs here; under `pulumi up` the language host runs the program."""
    was_enabled = gc.isenabled()
    if _GARBAGE.frozen:
        # The last run's garbage, left to exit, goes before this run makes its own: a verb that renders three
        # times (a cold plan) keeps one run's garbage at a time, not three (290 MB at 150 pools instead of 230).
        gc.unfreeze()
        _GARBAGE.frozen = False
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if _GARBAGE.left_to_exit:
            gc.freeze()
            _GARBAGE.frozen = True
        if was_enabled:
            gc.enable()
