"""Every compatibility row a policy or live check relies on, tested at its boundary: one version below and
the version itself, generated from the data tables (gpu_knowledge/compat_data.py, each with its source). A second
set pins the rows' values to what their sources say, so a changed table fails a test even where the
generated boundary tests would follow it."""

from __future__ import annotations

import itertools

import pytest

from gpu_knowledge import compat, compat_data
from gpu_knowledge.compat import OperatorSupport


def just_below(version: str) -> str:
    """The nearest version below an exact release (or a branch): 570.26 -> 570.25, 580.65.06 -> 580.65.05,
    525.60.13 -> 525.60.12, 384 -> 383; a zero part borrows from the part before it (550.0 -> 549.99)."""
    parts = version.split(".")
    for index in range(len(parts) - 1, -1, -1):
        if int(parts[index]) > 0:
            parts[index] = str(int(parts[index]) - 1).zfill(len(parts[index]))
            for later in range(index + 1, len(parts)):
                parts[later] = "9" * max(2, len(parts[later]))
            return ".".join(parts)
    raise ValueError(f"nothing below {version}")


def test_just_below() -> None:
    assert [just_below(v) for v in ("570.26", "580.65.06", "525.60.13", "384", "550.10.00")] == [
        "570.25", "580.65.05", "525.60.12", "383", "550.09.99",
    ]


def _cuda(key: tuple[int, int, int]) -> str:
    return compat._cuda_text(key)


# ---------------------------------------------------------------- CUDA toolkit -> minimum driver


@pytest.mark.parametrize(
    ("key", "minimum"), sorted(compat_data.CUDA_MIN_DRIVER.items()), ids=[_cuda(k) for k in sorted(compat_data.CUDA_MIN_DRIVER)]
)
def test_each_cuda_release_runs_from_its_minimum_driver_and_not_below(key, minimum) -> None:
    assert compat.cuda_runs_on(_cuda(key), minimum).yes
    below = compat.cuda_runs_on(_cuda(key), just_below(minimum))
    assert below.no and minimum in below.reason


def test_minimum_drivers_grow_with_the_cuda_release() -> None:
    # A changed row (say 12.8 set to a 12.9 driver) breaks the order the toolkit table has.
    rows = sorted(compat_data.CUDA_MIN_DRIVER.items())
    for (older, low), (newer, high) in itertools.pairwise(rows):
        assert compat.driver_key(low) <= compat.driver_key(high), (older, newer)


# ---------------------------------------------------------------- GPU architectures and products


def _product_of(arch: str) -> str:
    """A product of the architecture with no stricter SKU minimum of its own."""
    model = next(m for m, a in compat_data.PRODUCT_ARCHITECTURE.items() if a == arch and m not in compat_data.SKU_MIN_DRIVER)
    return f"NVIDIA-{model}"


@pytest.mark.parametrize(("arch", "row"), sorted(compat_data.ARCHITECTURES.items()))
def test_each_architecture_from_its_minimum_driver_to_its_last_branch(arch, row) -> None:
    minimum, last_branch = row
    product = _product_of(arch)
    # A minimum given as a whole branch (older architectures) compares by branch number.
    at = minimum if "." in minimum else f"{minimum}.00"
    assert compat.supports(at, product).yes
    assert compat.supports(just_below(minimum), product).no
    if last_branch is not None:
        assert compat.supports(f"{last_branch}.100.01", product).yes
        dropped = compat.supports(f"{last_branch + 10}.10.01", product)
        assert dropped.no and f"R{last_branch}" in dropped.reason


@pytest.mark.parametrize(("model", "minimum"), sorted(compat_data.SKU_MIN_DRIVER.items()))
def test_each_product_with_its_own_minimum(model, minimum) -> None:
    product = f"NVIDIA-{model}"
    assert compat.supports(minimum, product).yes
    assert compat.supports(just_below(minimum), product).no


# Architectures whose minimum is the first CUDA release that knew them (compat_data.ARCH_SOURCE).
FIRST_CUDA = {"blackwell": (12, 8, 0), "hopper": (11, 8, 0), "ada": (11, 8, 0)}


@pytest.mark.parametrize(("arch", "cuda"), sorted(FIRST_CUDA.items()))
def test_architecture_minimums_are_their_first_cuda_releases_minimums(arch, cuda) -> None:
    assert compat_data.ARCHITECTURES[arch][0] == compat_data.CUDA_MIN_DRIVER[cuda]


# ---------------------------------------------------------------- GPU Operator releases


@pytest.mark.parametrize(("release", "drivers"), sorted(compat_data.OPERATOR_DRIVERS.items()))
def test_each_operator_release_lists_its_drivers_and_only_them(release, drivers) -> None:
    for driver in drivers:
        assert compat.operator_lists(f"v{release}", driver).support == OperatorSupport.LISTED
        if just_below(driver) not in drivers:  # 580.159.03 and .04 are both listed by 26.3
            assert compat.operator_lists(f"v{release}", just_below(driver)).support == OperatorSupport.BRANCH_ONLY


@pytest.mark.parametrize(("line", "systems"), sorted(compat_data.OPERATOR_DRIVER_OS.items()))
def test_each_operator_line_supports_its_operating_systems_and_only_them(line, systems) -> None:
    every = {"ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "ubuntu26.04", "rhel8", "rhel9", "rhel10", "rocky"}
    for os_id in sorted(every):
        answer = compat.operator_supports_os(f"v{line}.0", os_id)
        assert answer.yes if os_id in systems else answer.no, (line, os_id)
    for os_id in compat_data.NO_DRIVER_CONTAINER_OS:
        assert compat.operator_supports_os(f"v{line}.0", os_id).no


# ---------------------------------------------------------------- forward compatibility and branches


@pytest.mark.parametrize(("highest", "branches"), compat_data.FORWARD_COMPAT_BRANCHES)
def test_each_compat_package_runs_on_its_branches_only(highest, branches) -> None:
    cuda = "13.0" if highest[0] == 13 else f"{highest[0]}.{highest[1]}"
    for branch in (535, 550, 570, 575, 580, 595):
        answer = compat.forward_compat_supported(cuda, f"{branch}.10.01")
        assert answer.yes if branch in branches else answer.no, (cuda, branch)


# ---------------------------------------------------------------- pinned to the sources


def test_the_rows_policies_rely_on_say_what_their_sources_say() -> None:
    # CUDA Toolkit release notes, "CUDA Toolkit and Minimum Required Driver Version".
    assert compat_data.CUDA_MIN_DRIVER[(12, 8, 0)] == "570.26"
    assert compat_data.CUDA_MIN_DRIVER[(12, 9, 0)] == "575.51.03"
    assert compat_data.CUDA_MIN_DRIVER[(13, 0, 0)] == "580.65.06"
    # First CUDA for Blackwell is 12.8, so R570.26; GPU Operator platform notes for HGX B200.
    assert compat_data.ARCHITECTURES["blackwell"] == ("570.26", None)
    assert compat_data.SKU_MIN_DRIVER["B200"] == "570.133.20"
    # R580 is the last branch for Volta, Pascal and Maxwell.
    assert {a: compat_data.ARCHITECTURES[a][1] for a in ("volta", "pascal", "maxwell")} == dict.fromkeys(
        ("volta", "pascal", "maxwell"), 580
    )
    # GPU Operator v26.7.0 component matrix; platform support tables.
    assert compat_data.OPERATOR_DRIVERS["26.7.0"] == ("610.57.04", "595.91.07", "580.173.02", "535.309.01")
    assert compat_data.OPERATOR_DRIVER_OS["26.7"] >= {"ubuntu22.04", "ubuntu24.04", "ubuntu26.04"}
    assert "ubuntu20.04" not in compat_data.OPERATOR_DRIVER_OS["26.7"]
    # CUDA forward compatibility: cuda-compat 13 on 535, 570 and 580.
    assert dict(compat_data.FORWARD_COMPAT_BRANCHES)[(13, 99)] == frozenset({535, 570, 580})
