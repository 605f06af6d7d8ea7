"""How current a pinned version is, by the compatibility tables (:mod:`gpu_knowledge.compat_data`): the newest
release the tables know in the same branch or line, for the quarterly review (`gpu-rollout review`). Only what the
tables list is known: a newer release they do not list is not seen (refresh the tables, their sources named there).
Pure; no I/O."""

from __future__ import annotations

from gpu_knowledge import compat_data as data
from gpu_knowledge.versions import parse_chart, parse_cuda, parse_driver


def known_drivers() -> set[str]:
    """Every exact driver release the tables name (the operator matrices and the CUDA minimums)."""
    listed = {v for row in data.OPERATOR_DRIVERS.values() for v in row}
    listed |= {v for row in data.OPERATOR_LINE_DRIVERS.values() for v in row}
    return listed | set(data.CUDA_MIN_DRIVER.values())


def newer_driver(driver: str) -> str | None:
    """The newest release of ``driver``'s branch the tables know, where newer than ``driver``."""
    have = parse_driver(driver)
    if have is None:
        return None
    same = [(key, v) for v in known_drivers() if (key := parse_driver(v)) is not None and key[0] == have[0]]
    newest = max(same, default=None)
    return newest[1] if newest is not None and newest[0] > have else None


def newer_chart(chart_version: str) -> str | None:
    """The newest GPU Operator release of ``chart_version``'s line (major.minor) the tables know, where newer."""
    have = parse_chart(chart_version)
    if have is None:
        return None
    releases = {r for r in (*data.OPERATOR_DRIVERS, *data.OPERATOR_DCGM)}
    same = [(key, r) for r in releases if (key := parse_chart(r)) is not None and key[:2] == have[:2]]
    newest = max(same, default=None)
    return f"v{newest[1]}" if newest is not None and newest[0] > have else None


def chart_known(chart_version: str) -> bool:
    have = parse_chart(chart_version)
    return have is not None and any(parse_chart(r) == have for r in (*data.OPERATOR_DRIVERS, *data.OPERATOR_DCGM))


def shipped_dcgm(chart_version: str) -> str | None:
    """The DCGM of the DCGM Exporter the operator release ships (its chart's pin), None when not in the table."""
    have = parse_chart(chart_version)
    return next((dcgm for r, dcgm in data.OPERATOR_DCGM.items() if parse_chart(r) == have), None)


def newer_dcgm(dcgm: str) -> str | None:
    """The newest DCGM of ``dcgm``'s major.minor that an operator release ships, where newer."""
    def key(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in version.split(".") if p.isdigit())

    same = [v for v in set(data.OPERATOR_DCGM.values()) if key(v)[:2] == key(dcgm)[:2]]
    newest = max(same, key=key, default=None)
    return newest if newest is not None and key(newest) > key(dcgm) else None


def newer_cuda(cuda: str) -> str | None:
    """The newest CUDA toolkit of ``cuda``'s major the table knows (major.minor), where newer."""
    have = parse_cuda(cuda)
    if have is None:
        return None
    same = [k for k in data.CUDA_MIN_DRIVER if k[0] == have[0]]
    newest = max(same, default=None)
    return f"{newest[0]}.{newest[1]}" if newest is not None and newest[:2] > have[:2] else None


__all__ = ["chart_known", "known_drivers", "newer_chart", "newer_cuda", "newer_dcgm", "newer_driver", "shipped_dcgm"]
