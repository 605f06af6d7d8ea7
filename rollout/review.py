"""`gpu-rollout review`: every pinned version of every stack against the compatibility data, for the quarterly review
of driver, CUDA, operator and Fabric Manager versions together (runbook: "review ... each quarter, and record them in
one place"; `.github/workflows/quarterly-review.yml` keeps one issue with it).

Per stack: the driver (and the previous driver held pools stay on), the GPU Operator chart, the DCGM Exporter the
chart ships, each generation's node image and driver, each host Fabric Manager and each model's CUDA. Each pin is
judged by the tables of ``gpu_knowledge`` (their sources named there): supported, end of support (the branch's end
of life has passed), unsupported, or unknown (not in the tables: never counted as supported); with its end of
support where the tables have one, and the newest release they know in the same branch or line. Exit 1 when a pin
is unsupported or past its end of support; unknown pins are listed, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from fleetspec.discipline import utc_now
from fleetspec.load import SpecError, load_stack_file
from fleetspec.model import FleetSpec
from gpu_knowledge import compat, currency
from gpu_knowledge.compat import BranchInfo, OperatorSupport
from promotion_train.stacks import stack_files
from refusals.exits import Exit
from rollout import documents, schemas
from rollout.console import stdout

SUPPORTED, END_OF_SUPPORT, UNSUPPORTED, UNKNOWN = "supported", "end of support", "unsupported", "unknown"


@dataclass(frozen=True)
class Pin:
    stack: str
    component: str  # "driver", "operator chart", "DCGM Exporter", "node image gpuh100 g2", "CUDA of llm-chat"
    pinned: str
    status: str
    end_of_support: date | None
    newer: str | None  # the newest release the tables know in the same branch or line
    why: str


def _driver(stack: str, component: str, driver: str, chart: str | None, today: date) -> Pin:
    info = compat.branch_info(driver)
    newer = currency.newer_driver(driver)
    if not isinstance(info, BranchInfo):
        return Pin(stack, component, driver, UNKNOWN, None, newer, info.reason)
    status = END_OF_SUPPORT if info.end_of_life_by(today) else SUPPORTED
    why = f"R{info.branch} ({info.kind} branch) is supported until {info.end_of_life.isoformat()}"
    if chart is not None:
        listed = compat.operator_lists(chart, driver)
        why += f"; {listed.reason}"
        if listed.support == OperatorSupport.UNSUPPORTED and status == SUPPORTED:
            status = UNSUPPORTED
    return Pin(stack, component, driver, status, info.end_of_life, newer, why)


def _operator(stack: str, spec: FleetSpec) -> list[Pin]:
    chart = spec.gpuOperator.chartVersion
    newer = currency.newer_chart(chart)
    if not currency.chart_known(chart):
        out = [Pin(stack, "operator chart", chart, UNKNOWN, None, newer,
                   "the release is not in the operator tables (gpu_knowledge.compat_data)")]
    else:
        out = [Pin(stack, "operator chart", chart, SUPPORTED, None, newer,
                   "in the operator's component matrix; the operator's own end of support is not in the tables")]
    dcgm = currency.shipped_dcgm(chart)
    if dcgm is None:
        out.append(Pin(stack, "DCGM Exporter", f"the one chart {chart} ships", UNKNOWN, None, None,
                       "the DCGM the chart ships is not in the table"))
    else:
        answer = compat.dcgm_validated(dcgm, spec.driver.version)
        out.append(Pin(stack, "DCGM Exporter", f"DCGM {dcgm} (chart {chart})",
                       SUPPORTED if answer.yes else UNSUPPORTED if answer.no else UNKNOWN, None,
                       currency.newer_dcgm(dcgm), answer.reason))
    return out


def pins(stack: str, spec: FleetSpec, today: date) -> list[Pin]:
    """Every pinned version of one stack, judged."""
    chart = spec.gpuOperator.chartVersion
    out = [_driver(stack, "driver", spec.driver.version, chart, today)]
    if spec.driver.previousVersion is not None:
        out.append(_driver(stack, "previous driver (held pools)", spec.driver.previousVersion, chart, today))
    out += _operator(stack, spec)
    for pool in spec.nodePools:
        for generation in pool.live_generations:
            where = f"{pool.name} generation {generation.id}"
            out.append(_driver(stack, f"driver of {where}", generation.driverVersion, None, today))
            if generation.image is not None:
                out.append(Pin(stack, f"node image of {where}", generation.image, UNKNOWN, None, None,
                               "node image releases are not in the compatibility tables: its driver is judged above"))
        if pool.eks is not None and pool.eks.releaseVersion is not None:
            out.append(Pin(stack, f"node image of {pool.name}", pool.eks.releaseVersion, UNKNOWN, None, None,
                           "node image releases are not in the compatibility tables"))
        if pool.fabricManagerVersion is not None:
            target = spec.pool_target(pool).driver
            answer = compat.fabric_manager_matches(pool.fabricManagerVersion, target)
            out.append(Pin(stack, f"fabric manager of {pool.name}", pool.fabricManagerVersion,
                           SUPPORTED if answer.yes else UNSUPPORTED, None, None, answer.reason))
    for model in spec.models:
        answer = compat.cuda_runs_on(model.cudaVersion, spec.driver.version)
        status = SUPPORTED if answer.yes or model.cudaForwardCompat else UNSUPPORTED if answer.no else UNKNOWN
        why = answer.reason + ("; the image ships cuda-compat" if model.cudaForwardCompat and answer.no else "")
        out.append(Pin(stack, f"CUDA of {model.name}", model.cudaVersion, status, None,
                       currency.newer_cuda(model.cudaVersion), why))
    return out


def review(project_dir: Path, today: date) -> tuple[list[Pin], list[tuple[str, str]]]:
    """Every stack's pins, and the stacks whose files do not load (stack, why)."""
    found: list[Pin] = []
    broken: list[tuple[str, str]] = []
    for entry in stack_files(project_dir):
        try:
            spec = load_stack_file(project_dir / entry.file)
        except SpecError as error:
            broken.append((entry.name, "; ".join(p.one_line() for p in error.problems)))
            continue
        found += pins(entry.name, spec, today)
    return found, broken


def markdown(found: list[Pin], broken: list[tuple[str, str]], today: date) -> str:
    """The report as Markdown: one table per stack (what the quarterly issue holds)."""
    lines = [f"### Pinned versions against the compatibility data ({today.isoformat()})", ""]
    for stack in dict.fromkeys(p.stack for p in found):
        lines += [f"#### `{stack}`", "", "| component | pinned | status | end of support | newer in branch | why |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {p.component} | `{p.pinned}` | {p.status} | {p.end_of_support or '-'} | {p.newer or '-'} | "
                  f"{' '.join(p.why.replace('|', '/').split())} |" for p in found if p.stack == stack]
        lines.append("")
    for stack, why in broken:
        lines += [f"#### `{stack}`", "", f"The stack file does not load: {why}", ""]
    counts = {s: sum(p.status == s for p in found) for s in (SUPPORTED, END_OF_SUPPORT, UNSUPPORTED, UNKNOWN)}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()) + ".")
    return "\n".join(lines) + "\n"


def execute(project_dir: Path, as_json: bool, now: datetime | None = None) -> Exit:
    today = (now or utc_now()).date()
    found, broken = review(project_dir, today)
    if as_json:
        documents.write(schemas.ReviewDocument(date=today.isoformat(), pins=[schemas.ReviewPin(
            stack=p.stack, component=p.component, pinned=p.pinned, status=p.status,
            endOfSupport=p.end_of_support.isoformat() if p.end_of_support else None, newer=p.newer, why=p.why)
            for p in found], unloadable=[schemas.ReviewUnloadable(stack=s, problem=w) for s, w in broken]))
    else:
        stdout(highlight=False).print(markdown(found, broken, today), markup=False, soft_wrap=True)
    return Exit.failed_if(bool(broken) or any(p.status in (END_OF_SUPPORT, UNSUPPORTED) for p in found))
