"""Compatibility questions answered from the tables in ``gpu_knowledge.compat_data``.

Every answer is an ``Answer(verdict, reason)`` with ``verdict`` one of ``YES``, ``NO`` or ``UNKNOWN``.
An unknown GPU product, CUDA release, driver branch or operator release is ``UNKNOWN`` with the reason,
never a silent yes: callers decide what unknown means (the policy pack reports it).

- ``min_driver_for_cuda(cuda)``: the minimum driver of a CUDA toolkit (``value`` holds it).
- ``cuda_runs_on(cuda, driver)`` and ``max_cuda(driver)``: driver vs. CUDA runtime.
- ``forward_compat_supported(cuda, driver)``: may a cuda-compat package bridge the gap on this branch.
- ``architecture(product)`` and ``supports(driver, product)``: GPU products (GFD ``nvidia.com/gpu.product``).
- ``same_gpu_product(a, b)``: one GPU under two GFD names (``compat_data.PRODUCT_EQUIVALENTS``).
- ``branch_info(driver)``: LTSB / production / new feature, end of life.
- ``operator_lists(chart_version, driver)``: ``OperatorSupport`` LISTED / BRANCH_ONLY / UNSUPPORTED / UNKNOWN.
- ``dcgm_validated(dcgm, driver)``, ``dcgm_of_exporter_tag(tag)``: the DCGM Exporter against the driver branch.
- ``fabric_manager_matches(fm_version, driver)``: Fabric Manager must equal the driver exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from enum import StrEnum

from gpu_knowledge import compat_data as data
from gpu_knowledge.gpu_products import base_product
from gpu_knowledge.versions import parse_chart, parse_cuda, parse_driver



class Verdict(StrEnum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Answer:
    verdict: Verdict
    reason: str
    value: str | None = None  # the fact asked for, where the question has one (a version)

    @property
    def yes(self) -> bool:
        return self.verdict == Verdict.YES

    @property
    def no(self) -> bool:
        return self.verdict == Verdict.NO

    @property
    def unknown(self) -> bool:
        return self.verdict == Verdict.UNKNOWN


def _yes(reason: str, value: str | None = None) -> Answer:
    return Answer(Verdict.YES, reason, value)


def _no(reason: str, value: str | None = None) -> Answer:
    return Answer(Verdict.NO, reason, value)


def _unknown(reason: str) -> Answer:
    return Answer(Verdict.UNKNOWN, reason)


def driver_key(driver: str) -> tuple[int, ...] | None:
    """``580.105.08`` -> (580, 105, 8); a bare branch ``580`` -> (580,); None if it is no driver version."""
    return parse_driver(driver)


def _at_least(driver: tuple[int, ...], minimum: str) -> bool | None:
    """driver >= minimum. A bare branch (precompiled images) compares by branch number: above or below
    the minimum's branch decides; on the minimum's own branch it is None when the minimum is a release
    in that branch, because then the build on the node decides."""
    needed = driver_key(minimum)
    assert needed is not None, f"bad table entry {minimum}"
    if driver[0] != needed[0]:
        return driver[0] > needed[0]
    if len(needed) == 1:  # the minimum is a whole branch: every release of it qualifies
        return True
    if len(driver) == 1:  # a bare branch against a release of the same branch
        return None
    return driver >= needed


def _find_model(product: str, table: dict[str, str]) -> str | None:
    """The first model token (or 2-3 token run, e.g. RTX-PRO-6000) of a product string found in ``table``."""
    tokens = [t.upper() for t in re.split(r"[-_ ]+", product.strip()) if t]
    for start in range(len(tokens)):
        for size in (3, 2, 1):
            if start + size <= len(tokens) and "-".join(tokens[start : start + size]) in table:
                return "-".join(tokens[start : start + size])
    return None


# ---------------------------------------------------------------- CUDA


def min_driver_for_cuda(cuda: str) -> Answer:
    key = parse_cuda(cuda)
    if key is None:
        return _unknown(f"'{cuda}' is not a CUDA version")
    if key[:2] in data.CUDA_NEVER_RELEASED:
        return _unknown(data.CUDA_NEVER_RELEASED[key[:2]])
    minimum = data.CUDA_MIN_DRIVER.get(key)
    if minimum is None:
        return _unknown(f"CUDA {cuda} is not in the minimum-driver table ({data.CUDA_MIN_DRIVER_SOURCE})")
    return _yes(f"CUDA {cuda} needs driver >= {minimum}", minimum)


def cuda_runs_on(cuda: str, driver: str) -> Answer:
    """Does a CUDA runtime run on ``driver`` without a forward-compat package."""
    needed = min_driver_for_cuda(cuda)
    if needed.unknown:
        return needed
    assert needed.value is not None
    have = driver_key(driver)
    if have is None:
        return _unknown(f"'{driver}' is not a driver version")
    enough = _at_least(have, needed.value)
    if enough is None:
        return _unknown(f"CUDA {cuda} needs driver >= {needed.value}; branch {driver} alone cannot tell")
    if enough:
        return _yes(f"driver {driver} runs CUDA {cuda} (needs >= {needed.value})", needed.value)
    return _no(f"CUDA {cuda} needs driver >= {needed.value}; {driver} is older", needed.value)


def max_cuda(driver: str) -> Answer:
    """The newest CUDA toolkit in the table that ``driver`` runs without a compat package.

    A bare branch is UNKNOWN when the table has a toolkit whose minimum is a release inside that branch
    (R580 releases run anything from CUDA 12.9.1 to 13.0.2, depending on the build)."""
    have = driver_key(driver)
    if have is None:
        return _unknown(f"'{driver}' is not a driver version")
    verdicts = {cuda: _at_least(have, minimum) for cuda, minimum in data.CUDA_MIN_DRIVER.items()}
    runnable = [cuda for cuda, ok in verdicts.items() if ok is True]
    undecided = [cuda for cuda, ok in verdicts.items() if ok is None]
    if undecided and (not runnable or max(undecided) > max(runnable)):
        low = _cuda_text(max(runnable)) if runnable else "none"
        return _unknown(
            f"branch {driver} alone cannot tell: depending on the release it runs CUDA up to between "
            f"{low} and {_cuda_text(max(undecided))}"
        )
    if not runnable:
        return _unknown(f"driver {driver} is older than every entry of the CUDA table")
    value = _cuda_text(max(runnable))
    return _yes(f"driver {driver} runs CUDA up to {value}", value)


def _cuda_text(key: tuple[int, int, int]) -> str:
    major, minor, update = key
    return f"{major}.{minor}" + (f".{update}" if update else "")


def forward_compat_supported(cuda: str, driver: str) -> Answer:
    """May a ``cuda-compat`` package run CUDA ``cuda`` on ``driver``'s branch (data-center GPUs only)."""
    key, have = parse_cuda(cuda), driver_key(driver)
    if key is None or have is None:
        return _unknown(f"cannot read CUDA '{cuda}' or driver '{driver}'")
    branch = have[0]
    info = data.BRANCHES.get(branch)
    if info is not None and info[0] == data.NEW_FEATURE:
        return _no(f"R{branch} is a New Feature Branch, never a forward-compat target ({data.FORWARD_COMPAT_SOURCE})")
    # The smallest compat package that covers the CUDA release decides the branches.
    covering = [(highest, branches) for highest, branches in data.FORWARD_COMPAT_BRANCHES if key[:2] <= highest]
    if not covering:
        return _unknown(f"no forward-compat data for CUDA {cuda}")
    chosen = min(covering)[1]
    if branch in chosen:
        return _yes(f"cuda-compat for CUDA {key[0]}.{key[1]} is supported on R{branch}")
    # "Branches not listed ... are end of life and are not supported targets": a branch the table does
    # not list for this package is a NO, and so is a newer branch than the package was built for
    # ("older compat packages are not supported on newer drivers").
    listed = ", R".join(str(b) for b in sorted(chosen))
    return _no(
        f"cuda-compat for CUDA {key[0]}.{key[1]} is supported on R{listed} only, not R{branch} "
        f"({data.FORWARD_COMPAT_SOURCE})"
    )


# ---------------------------------------------------------------- GPU products and branches


def architecture(product: str) -> Answer:
    """The architecture of a GFD product string; ``value`` holds it (``hopper``)."""
    model = _find_model(product, data.PRODUCT_ARCHITECTURE)
    if model is None:
        return _unknown(f"GPU product '{product}' is not in the architecture table; check its branch support by hand")
    arch = data.PRODUCT_ARCHITECTURE[model]
    return _yes(f"{product} is {arch} ({model})", arch)


def _product_key(product: str) -> str:
    """A GFD product name compared: without a MIG profile suffix, in lower case."""
    return base_product(product.strip()).lower()


def same_gpu_product(first: str, second: str) -> bool:
    """Whether two GFD ``nvidia.com/gpu.product`` names are one GPU: equal (case and a MIG profile suffix
    aside), or spellings of one SKU listed in ``compat_data.PRODUCT_EQUIVALENTS``."""
    a, b = _product_key(first), _product_key(second)
    if a == b:
        return True
    return any(a in group and b in group
               for group in ({name.lower() for name in names} for names in data.PRODUCT_EQUIVALENTS))


def supports(driver: str, product: str) -> Answer:
    """Does ``driver``'s branch support the GPU ``product``."""
    arch = architecture(product)
    if arch.unknown:
        return arch
    have = driver_key(driver)
    if have is None:
        return _unknown(f"'{driver}' is not a driver version")
    assert arch.value is not None
    minimum, last_branch = data.ARCHITECTURES[arch.value]
    if last_branch is not None and have[0] > last_branch:
        return _no(f"{arch.value} GPUs ({product}) are supported up to R{last_branch}; R{have[0]} dropped them")
    sku = _find_model(product, data.SKU_MIN_DRIVER)
    if sku is not None:
        minimum = data.SKU_MIN_DRIVER[sku]
    enough = _at_least(have, minimum)
    if enough is None:
        return _unknown(f"{product} ({arch.value}) needs driver >= {minimum}; branch {driver} alone cannot tell")
    if not enough:
        return _no(f"{product} ({arch.value}) needs driver >= {minimum}; {driver} is older")
    return _yes(f"R{have[0]} supports {arch.value} GPUs ({product})")


@dataclass(frozen=True)
class BranchInfo:
    branch: int
    kind: str  # LTSB, production, new feature
    end_of_life: date
    max_cuda_major: int

    def end_of_life_by(self, day: date) -> bool:
        return day > self.end_of_life


def branch_info(driver: str) -> BranchInfo | Answer:
    """The branch's type and end of life, or an UNKNOWN ``Answer`` for a branch not in the table."""
    have = driver_key(driver)
    if have is None:
        return _unknown(f"'{driver}' is not a driver version")
    row = data.BRANCHES.get(have[0])
    if row is None:
        return _unknown(f"R{have[0]} is not in the branch lifecycle table ({data.BRANCH_SOURCE})")
    return BranchInfo(have[0], *row)


# ---------------------------------------------------------------- GPU Operator


class OperatorSupport(StrEnum):
    LISTED = "listed"  # the exact driver is in the release's component matrix
    BRANCH_ONLY = "branch-only"  # another release of the same branch is listed
    UNSUPPORTED = "unsupported"  # no release of the branch is listed
    UNKNOWN = "unknown"  # the operator release is not in the table


@dataclass(frozen=True)
class OperatorAnswer:
    support: OperatorSupport
    reason: str
    listed: tuple[str, ...] = ()


def operator_drivers(chart_version: str) -> tuple[str, ...] | None:
    """Driver versions the operator release lists, or None when the release is not in the table.

    An exact release row answers first; a release-line row (``OPERATOR_LINE_DRIVERS``) answers for every
    release of its line; a release of a line known only by other patch releases is not in the table."""
    key = parse_chart(chart_version)
    if key is None:
        return None
    major, minor, patch = key
    exact = f"{major}.{minor}.{patch}"
    if exact in data.OPERATOR_DRIVERS:
        return data.OPERATOR_DRIVERS[exact]
    return data.OPERATOR_LINE_DRIVERS.get(f"{major}.{minor}")


def _same_line_releases(chart_version: str) -> list[str]:
    key = parse_chart(chart_version)
    if key is None:
        return []
    line = "{}.{}.".format(*key[:2])
    return sorted((r for r in data.OPERATOR_DRIVERS if r.startswith(line)), key=lambda r: int(r.rsplit(".", 1)[1]))


def operator_lists(chart_version: str, driver: str) -> OperatorAnswer:
    listed = operator_drivers(chart_version)
    have = driver_key(driver)
    if listed is None:
        known = _same_line_releases(chart_version)
        also = f"; of its line it has {', '.join(known)} only" if known else ""
        return OperatorAnswer(
            OperatorSupport.UNKNOWN,
            f"GPU Operator {chart_version} is not in the table{also} ({data.OPERATOR_SOURCE})",
        )
    if have is None:
        return OperatorAnswer(OperatorSupport.UNKNOWN, f"'{driver}' is not a driver version", listed)
    if len(have) > 1 and driver.strip() in listed:
        return OperatorAnswer(OperatorSupport.LISTED, f"GPU Operator {chart_version} lists {driver}", listed)
    same_branch = [v for v in listed if v.split(".")[0] == str(have[0])]
    if same_branch:
        return OperatorAnswer(
            OperatorSupport.BRANCH_ONLY,
            f"GPU Operator {chart_version} lists R{have[0]} as {', '.join(same_branch)}, not {driver}",
            listed,
        )
    return OperatorAnswer(
        OperatorSupport.UNSUPPORTED,
        f"GPU Operator {chart_version} lists no R{have[0]} driver (lists {', '.join(listed)})",
        listed,
    )


# ---------------------------------------------------------------- DCGM (the DCGM Exporter's)


# A DCGM Exporter image tag: <DCGM>-<exporter>, then an OS or flavour ("4.4.2-4.6.0-ubuntu22.04", "-distroless").
DCGM_EXPORTER_TAG = re.compile(r"^(?P<dcgm>\d+\.\d+\.\d+)-(?P<exporter>\d+\.\d+\.\d+)(?:-[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def dcgm_of_exporter_tag(tag: str) -> str | None:
    """The DCGM version a DCGM Exporter image tag names (``4.4.2-4.6.0-ubuntu22.04``: ``4.4.2``), or None."""
    match = DCGM_EXPORTER_TAG.match(tag)
    return match.group("dcgm") if match else None


def _dcgm_key(version: str) -> tuple[int, ...] | None:
    parts = version.split(".")
    return tuple(int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else None


def dcgm_validated(dcgm: str, driver: str) -> Answer:
    """Whether ``dcgm`` (the DCGM of a running DCGM Exporter) is at least the oldest DCGM that a GPU Operator
    release listing ``driver``'s branch ships with it (``OPERATOR_DCGM``): NVIDIA validated that pair. An older
    DCGM was never shown working on the branch (its new fields and Xid codes, the removed features)."""
    have, key = _dcgm_key(dcgm), driver_key(driver)
    if have is None or key is None:
        return _unknown(f"cannot compare DCGM '{dcgm}' with driver '{driver}'")
    releases = []
    for release, dcgm_shipped in data.OPERATOR_DCGM.items():
        listed = operator_drivers(release) or ()
        if any(v.split(".")[0] == str(key[0]) for v in listed):
            releases.append((_dcgm_key(dcgm_shipped) or (), dcgm_shipped, release))
    if not releases:
        return _unknown(f"no GPU Operator release in the table lists an R{key[0]} driver ({data.DCGM_SOURCE})")
    oldest = min(releases)
    if have >= oldest[0]:
        return _yes(f"DCGM {dcgm} is at least {oldest[1]}, which GPU Operator {oldest[2]} ships with R{key[0]}")
    return _no(f"DCGM {dcgm} is older than any DCGM a GPU Operator release listing R{key[0]} ships (the oldest: "
               f"{oldest[1]}, with {oldest[2]})")


# ---------------------------------------------------------------- Fabric Manager


def fabric_manager_matches(fabric_manager: str | None, driver: str) -> Answer:
    """Fabric Manager refuses to start unless its version equals the loaded driver's exactly."""
    if not fabric_manager:
        return _unknown("no Fabric Manager version is declared")
    if fabric_manager.strip() == driver.strip():
        return _yes(f"Fabric Manager {fabric_manager} matches driver {driver}")
    return _no(f"Fabric Manager {fabric_manager} must equal driver {driver} exactly ({data.FABRIC_MANAGER_SOURCE})")


# ---------------------------------------------------------------- operating systems


def operator_supports_os(chart_version: str, os_id: str) -> Answer:
    """Whether the operator release's containerized driver runs on nodes of this operating system."""
    if os_id in data.NO_DRIVER_CONTAINER_OS:
        return _no(
            f"the GPU Operator ships no driver container for {data.NO_DRIVER_CONTAINER_OS[os_id]} in any release "
            f"({data.OPERATOR_OS_SOURCE})"
        )
    key = parse_chart(chart_version)
    line = f"{key[0]}.{key[1]}" if key is not None else None
    supported = data.OPERATOR_DRIVER_OS.get(line) if line is not None else None
    if supported is None:
        return _unknown(f"GPU Operator {chart_version} is not in the platform-support table ({data.OPERATOR_OS_SOURCE})")
    if os_id in supported:
        return _yes(f"GPU Operator {chart_version} supports its driver on {os_id}")
    return _no(
        f"GPU Operator {chart_version} supports its driver on {', '.join(sorted(supported))}, not {os_id} "
        f"({data.OPERATOR_OS_SOURCE})"
    )
