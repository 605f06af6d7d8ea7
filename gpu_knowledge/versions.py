"""Version strings: driver, CUDA, chart and node-image versions.

YAML reads an unquoted ``12.10`` as the float 12.1 and ``570.26`` as a float, so every version field
refuses numbers outright and asks for quotes; a float is never turned back into a version.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

# 570.26, 580.65.06, 535.104.05: a branch, a minor and an optional patch. The one spelling of an exact
# driver release in the project (FleetSpec, gpu_knowledge.compat and the policy pack all use it).
DRIVER_RELEASE = re.compile(r"^(?P<branch>[1-9]\d{2})\.(?P<minor>\d{1,3})(?:\.(?P<patch>\d{1,3}))?$")
# A bare branch such as 580 (precompiled driver images are tagged by branch).
DRIVER_BRANCH = re.compile(r"^(?P<branch>[1-9]\d{2})$")
_CUDA = re.compile(r"^(?P<major>\d{1,2})\.(?P<minor>\d{1,2})(?:\.(?P<patch>\d{1,3}))?$")
_CHART = re.compile(r"^v?(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)$")
# EKS AMI releaseVersion "1.33.5-20251120"; AKS node image "202511.07.0" or a full image version.
_IMAGE_RELEASE = re.compile(r"^[0-9][0-9A-Za-z._-]*$")
_FLOATING = {"latest", "stable", "current", "default", "newest", "production", "lts", "ltsb"}


def _refuse_numbers(value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise ValueError(
            f"a version must be a quoted string; YAML read {value!r} as a number, which may already have "
            "lost digits (12.10 reads as 12.1): write the version in quotes exactly as intended"
        )
    if not isinstance(value, str):
        raise ValueError(f"a version must be a string, got {type(value).__name__}")
    return value.strip()


def _refuse_floating(value: str) -> str:
    if value.lower() in _FLOATING:
        raise ValueError(f"'{value}' is a moving target; pin an exact release such as 580.173.02")
    return value


def _driver_version(value: str) -> str:
    _refuse_floating(value)
    if DRIVER_RELEASE.match(value) or DRIVER_BRANCH.match(value):
        return value
    raise ValueError(f"'{value}' is not an NVIDIA driver release (expected e.g. 580.173.02 or 570.26)")


def _cuda_version(value: str) -> str:
    if not _CUDA.match(value):
        raise ValueError(f"'{value}' is not a CUDA version (expected e.g. 12.8 or 13.0.2)")
    return value


def _chart_version(value: str) -> str:
    _refuse_floating(value)
    if not _CHART.match(value):
        raise ValueError(f"'{value}' is not an exact GPU Operator release (expected e.g. v26.7.0)")
    return value


def _image_release(value: str) -> str:
    _refuse_floating(value)
    if not _IMAGE_RELEASE.match(value):
        raise ValueError(f"'{value}' is not a node image release (expected e.g. 1.33.5-20251120)")
    return value


# A driver version as configured: an exact release, or a bare branch (only legal with precompiled
# drivers; FleetSpec enforces that, since it needs to see usePrecompiled).
DriverVersion = Annotated[str, BeforeValidator(_refuse_numbers), AfterValidator(_driver_version)]
CudaVersion = Annotated[str, BeforeValidator(_refuse_numbers), AfterValidator(_cuda_version)]
ChartVersion = Annotated[str, BeforeValidator(_refuse_numbers), AfterValidator(_chart_version)]
ImageRelease = Annotated[str, BeforeValidator(_refuse_numbers), AfterValidator(_image_release)]


def is_branch_only(driver_version: str) -> bool:
    """True for a bare branch such as ``580`` (precompiled driver images are tagged by branch)."""
    return bool(DRIVER_BRANCH.match(driver_version))


def is_exact_release(driver_version: object) -> bool:
    """True for an exact driver release such as ``580.173.02`` or ``570.26`` (not a bare branch)."""
    return isinstance(driver_version, str) and bool(DRIVER_RELEASE.match(driver_version.strip()))


def parse_driver(driver_version: object) -> tuple[int, ...] | None:
    """``580.105.08`` -> (580, 105, 8), a bare branch ``580`` -> (580,); None for anything else."""
    if not isinstance(driver_version, str):
        return None
    value = driver_version.strip()
    match = DRIVER_RELEASE.match(value) or DRIVER_BRANCH.match(value)
    if match is None:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def driver_given_for(given: str, driver: str) -> bool:
    """Whether something given for ``given`` (a branch ``580`` or a version ``580.173.02``: a waiver) holds for
    ``driver``: its own version, or any version of its branch."""
    bound, target = parse_driver(given), parse_driver(driver)
    return bound is not None and target is not None and target[:len(bound)] == bound


def parse_cuda(cuda_version: object) -> tuple[int, int, int] | None:
    """``12.8`` -> (12, 8, 0), ``13.0.2`` -> (13, 0, 2); None for anything else."""
    match = _CUDA.match(cuda_version.strip()) if isinstance(cuda_version, str) else None
    if match is None:
        return None
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch or 0))


def parse_chart(chart_version: object) -> tuple[int, int, int] | None:
    """``v26.7.0`` -> (26, 7, 0); None for anything else."""
    match = _CHART.match(chart_version.strip()) if isinstance(chart_version, str) else None
    if match is None:
        return None
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch))


def chart_key(chart_version: str) -> tuple[int, int, int]:
    """The sortable key of a validated chart version."""
    key = parse_chart(chart_version)
    if key is None:
        raise ValueError(f"'{chart_version}' is not a GPU Operator release")
    return key
