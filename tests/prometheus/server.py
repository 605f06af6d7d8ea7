"""A real Prometheus on loopback for the verify tests, with history already in it.

Debian's ``prometheus`` package (2.42: ``prometheus`` and ``promtool``), unpacked by ``make prometheus`` into
``.tools/prometheus`` (found there, else on ``PATH``). :class:`History` collects samples at chosen times and
writes them as OpenMetrics text; :func:`start` backfills them into a fresh TSDB with ``promtool tsdb
create-blocks-from openmetrics`` and starts ``prometheus`` on a free loopback port over it, so the server
holds its history (an hour, or weeks) the moment it reports ready. Nothing is downloaded here.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import PROJECT_DIR

LOCAL = PROJECT_DIR / ".tools" / "prometheus" / "usr" / "bin"


def binary(name: str) -> Path | None:
    """``prometheus`` or ``promtool``: the project's unpacked copy, else one on PATH."""
    local = LOCAL / name
    if local.is_file():
        return local
    found = shutil.which(name)
    return Path(found) if found else None


MISSING = ("Debian's prometheus package is not unpacked: run `make prometheus` (make test does it) or "
           "`apt-get install prometheus`")


@dataclass
class History:
    """Samples per series, written as OpenMetrics (every series its own gauge family, samples in time order)."""

    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, name: str, labels: dict[str, str], at: float, value: float) -> None:
        self.series.setdefault((name, tuple(sorted(labels.items()))), []).append((at, value))

    def merge(self, other: History) -> History:
        """This history with ``other``'s series added (their samples must not overlap in time)."""
        for key, points in other.series.items():
            self.series.setdefault(key, []).extend(points)
        return self

    def samples(self) -> int:
        return sum(len(points) for points in self.series.values())

    def write(self, path: Path) -> None:
        """The OpenMetrics text into ``path``, a family at a time (a week of a large canary is hundreds of MB)."""
        by_family: dict[str, list[tuple[tuple[str, str], ...]]] = {}
        for name, labels in self.series:
            by_family.setdefault(name, []).append(labels)
        with path.open("w", encoding="utf-8") as out:
            for name in sorted(by_family):
                out.write(f"# TYPE {name} gauge\n")
                for labels in sorted(by_family[name]):
                    head = name + "{" + ",".join(f'{key}="{value}"' for key, value in labels) + "} "
                    out.write("".join(f"{head}{value!r} {at:.3f}\n" for at, value in sorted(self.series[(name, labels)])))
            out.write("# EOF\n")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def start(history: History, workdir: Path, timeout: float = 60.0, scrape: tuple[str, ...] = ()) -> Iterator[str]:
    """A Prometheus serving ``history`` on 127.0.0.1; yields its base URL and stops it afterwards. ``scrape``:
    loopback ``host:port`` targets it scrapes every second (job ``scraped``), beside the history."""
    prometheus, promtool = binary("prometheus"), binary("promtool")
    assert prometheus is not None and promtool is not None, MISSING
    data = workdir / "tsdb"
    data.mkdir(parents=True)
    if history.series:
        source = workdir / "history.om"
        history.write(source)
        # Day-long blocks: a week of history is a few blocks, not 84 two-hour ones for Prometheus to open.
        subprocess.run([str(promtool), "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
                        str(source), str(data)], check=True, capture_output=True, timeout=timeout * 4)
    config = workdir / "prometheus.yml"
    text = "global:\n  scrape_interval: 1h\n"  # without scrape targets: history only
    if scrape:
        text += ("scrape_configs:\n  - job_name: scraped\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
                 f"    static_configs:\n      - targets: [{', '.join(repr(t) for t in scrape)}]\n")
    config.write_text(text, encoding="utf-8")
    port = _free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [str(prometheus), f"--config.file={config}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
         "--storage.tsdb.retention.time=60d"],  # histories reach weeks into the past
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited {process.returncode}: "
                                   f"{(workdir / 'prometheus.log').read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:  # noqa: S310 - loopback
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus on {url} not ready after {timeout:.0f}s")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
