"""Compatibility tables answer the known cases from the reference; unknowns are explicit."""

from __future__ import annotations

import pytest

from gpu_knowledge import compat, compat_data
from gpu_knowledge.compat import OperatorSupport, Verdict


@pytest.mark.parametrize(
    ("cuda", "minimum"),
    [("12.8", "570.26"), ("12.8.1", "570.124.06"), ("13.0", "580.65.06"), ("13.0.2", "580.95.05"), ("12.4", "550.54.14")],
)
def test_min_driver_for_cuda(cuda, minimum):
    answer = compat.min_driver_for_cuda(cuda)
    assert answer.verdict == Verdict.YES and answer.value == minimum


@pytest.mark.parametrize("cuda", ["12.7", "14.0", "12.8.9", "twelve"])
def test_unknown_cuda_is_unknown(cuda):
    assert compat.min_driver_for_cuda(cuda).unknown
    assert compat.cuda_runs_on(cuda, "580.105.08").unknown


def test_cuda_runs_on_newer_driver_not_older():
    assert compat.cuda_runs_on("12.8", "570.26").yes
    assert compat.cuda_runs_on("12.8", "570.195.03").yes
    assert compat.cuda_runs_on("13.0", "575.57.08").no
    assert compat.cuda_runs_on("13.0", "580.65.06").yes
    assert compat.cuda_runs_on("12.8", "570").unknown  # a precompiled branch cannot prove the build
    assert compat.cuda_runs_on("12.8", "580").yes


def test_max_cuda():
    assert compat.max_cuda("580.105.08").value == "13.0.2"
    assert compat.max_cuda("570.195.03").value == "12.8.1"
    assert compat.max_cuda("595.91.07").value == "13.1"
    assert compat.max_cuda("400.1.1").unknown


def test_max_cuda_of_a_bare_branch():
    # R580 releases run CUDA 13.0 to 13.0.2 depending on the build: the branch alone cannot claim 12.9.1.
    answer = compat.max_cuda("580")
    assert answer.unknown and "13.0.2" in answer.reason
    assert compat.max_cuda("595").value == "13.1"  # every table minimum is in an older branch


def test_bare_branches_compare_by_branch_number():
    assert compat.cuda_runs_on("12.8", "535").no  # 535 < 570, even though both are bare branches
    assert compat.cuda_runs_on("12.8", "580").yes
    assert compat.supports("535", "Tesla-T4").yes  # Turing's minimum is the bare branch 410
    assert compat.supports("400", "Tesla-T4").no
    assert compat.supports("570", "NVIDIA-B200").unknown  # B200 needs 570.133.20: the build decides


@pytest.mark.parametrize(
    ("product", "arch"),
    [
        ("NVIDIA-H100-80GB-HBM3", "hopper"), ("NVIDIA-H100-NVL", "hopper"), ("NVIDIA-A100-80GB-PCIe", "ampere"),
        ("Tesla-T4", "turing"), ("NVIDIA-L40S", "ada"), ("NVIDIA-A10G", "ampere"), ("Tesla-V100-SXM2-16GB", "volta"),
        ("NVIDIA-B200", "blackwell"), ("A100-SXM4-40GB-MIG-1g.5gb", "ampere"), ("NVIDIA-L4", "ada"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "blackwell"),
    ],
)
def test_architecture_of_gfd_products(product, arch):
    assert compat.architecture(product).value == arch


def test_v100_is_not_supported_after_r580():
    assert compat.supports("580.105.08", "Tesla-V100-SXM2-16GB").yes
    answer = compat.supports("590.48.01", "Tesla-V100-SXM2-16GB")
    assert answer.no and "R580" in answer.reason
    assert compat.supports("595.91.07", "Tesla-P100-PCIE-16GB").no


def test_blackwell_minimums():
    assert compat.supports("565.57.01", "NVIDIA-GB200").no
    assert compat.supports("570.124.06", "NVIDIA-B200").no  # HGX B200 needs >= 570.133.20
    assert compat.supports("570.133.20", "NVIDIA-B200").yes


def test_unknown_product_is_unknown_never_yes():
    answer = compat.supports("580.105.08", "NVIDIA-GeForce-RTX-4090")
    assert answer.verdict == Verdict.UNKNOWN and "RTX-4090" in answer.reason


def test_operator_lists():
    assert compat.operator_lists("v26.7.0", "595.91.07").support == OperatorSupport.LISTED
    assert compat.operator_lists("v26.7.0", "580.105.08").support == OperatorSupport.BRANCH_ONLY
    assert compat.operator_lists("v26.7.0", "570.195.03").support == OperatorSupport.UNSUPPORTED
    assert compat.operator_lists("v25.10.1", "580.105.08").support == OperatorSupport.LISTED
    assert compat.operator_lists("v25.10.0", "580.105.08").support == OperatorSupport.BRANCH_ONLY
    assert compat.operator_lists("v26.3.2", "580.126.20").support == OperatorSupport.LISTED
    assert compat.operator_lists("v27.1.0", "595.91.07").support == OperatorSupport.UNKNOWN


def test_operator_rows_answer_for_the_releases_their_doc_covers():
    # The 24.9 and 25.3 rows were read from the 24.9.2 and 25.3.3 docs: other patch releases are unknown.
    assert compat.operator_lists("v24.9.2", "570.86.15").support == OperatorSupport.LISTED
    unknown = compat.operator_lists("v24.9.0", "570.86.15")
    assert unknown.support == OperatorSupport.UNKNOWN and "24.9.2" in unknown.reason
    assert compat.operator_lists("v25.3.3", "580.82.07").support == OperatorSupport.LISTED
    assert compat.operator_lists("v25.3.1", "580.82.07").support == OperatorSupport.UNKNOWN
    # The 26.3 doc covers 26.3.0-26.3.3; 24.6.x is one row for the whole line.
    assert compat.operator_lists("v26.3.0", "580.126.20").support == OperatorSupport.LISTED
    assert compat.operator_lists("v26.3.4", "580.126.20").support == OperatorSupport.UNKNOWN
    assert compat.operator_lists("v24.6.2", "550.90.07").support == OperatorSupport.LISTED


def test_forward_compat_targets():
    assert compat.forward_compat_supported("13.0", "570.195.03").yes
    assert compat.forward_compat_supported("12.9", "580.105.08").no
    assert compat.forward_compat_supported("12.8", "535.309.01").yes
    assert compat.forward_compat_supported("13.0", "610.57.04").no  # New Feature Branch
    # "Older compat packages are not supported on newer drivers": 12-9 runs on R535 and R570 only.
    assert compat.forward_compat_supported("12.9", "580.173.02").no
    assert compat.forward_compat_supported("12.4", "570.195.03").no  # <= 12-8 runs on R535 only


def test_forward_compat_on_an_unlisted_branch_is_no():
    # "Branches not listed ... are end of life and are not supported targets."
    answer = compat.forward_compat_supported("13.0", "550.163.01")
    assert answer.no and "R550" in answer.reason
    assert compat.forward_compat_supported("13.0", "620.10.01").no
    assert compat.forward_compat_supported("14.0", "580.173.02").unknown  # no data for that CUDA


def test_branch_lifecycle():
    info = compat.branch_info("580.105.08")
    assert isinstance(info, compat.BranchInfo) and info.kind == compat_data.LTSB and info.max_cuda_major == 13
    from datetime import date

    assert compat.branch_info("610.57.04").end_of_life_by(date(2026, 12, 1))
    assert not info.end_of_life_by(date(2026, 12, 1))
    assert isinstance(compat.branch_info("570.195.03"), compat.Answer)


def test_fabric_manager_must_match_exactly():
    assert compat.fabric_manager_matches("580.105.08", "580.105.08").yes
    assert compat.fabric_manager_matches("580.95.05", "580.105.08").no
    assert compat.fabric_manager_matches(None, "580.105.08").unknown


def test_every_table_names_its_source():
    for name in dir(compat_data):
        if name.endswith("_SOURCE"):
            assert "docs.nvidia.com" in getattr(compat_data, name) or ".rst" in getattr(compat_data, name)
