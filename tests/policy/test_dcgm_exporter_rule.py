"""policy dcgm-exporter-supports-driver on rendered stacks: an operator-owned stack declares the DCGM Exporter it
runs (gpuOperator.dcgmExporterVersion), and its DCGM is no older than the one NVIDIA ships with the target branch."""

from __future__ import annotations

import pytest

from fleetspec.load import SpecError, spec_from_config
from policy import compat_rules
from preview.run import run_program
from renderers import manifests
from tests.conftest import change, eks_operator_owned, stack_config
from tests.policy.rules import resources, stack


def _findings(config: dict[str, str], name: str = "prod") -> list:
    return list(compat_rules.dcgm_exporter_supports_driver(stack(resources(run_program(config, name)))))


def _exporter(tag: str | None, name: str = "prod") -> dict[str, str]:
    return change(stack_config(name), "gpuOperator", lambda op: op.update(dcgmExporterVersion=tag))


@pytest.mark.parametrize("name", ["prod", "canary", "existing-prod", "existing-canary"])
def test_the_example_stacks_declare_an_exporter_that_supports_their_driver(name: str) -> None:
    assert _findings(stack_config(name), name) == []


def test_an_operator_owned_stack_that_declares_no_exporter_is_refused() -> None:
    (found,) = _findings(_exporter(None))
    assert not found.advisory and "gpuOperator.dcgmExporterVersion" in found.message


def test_an_exporter_older_than_the_branch_needs_is_refused() -> None:
    (found,) = _findings(_exporter("3.3.7-3.5.0-ubuntu22.04"))  # what GPU Operator 24.6 ships; no R580 there
    assert not found.advisory
    assert "DCGM Exporter 3.3.7-3.5.0-ubuntu22.04" in found.message and "older than" in found.message


def test_an_image_owned_stack_is_not_asked_for_an_exporter() -> None:
    assert _findings(stack_config("eks-prod"), "eks-prod") == []


def test_a_malformed_exporter_tag_is_refused_at_its_key() -> None:
    with pytest.raises(SpecError) as error:
        spec_from_config(_exporter("latest"))
    assert "gpuOperator.dcgmExporterVersion" in str(error.value) and "<DCGM>-<exporter>" in str(error.value)


def test_the_declared_exporter_is_pinned_where_the_stack_owns_the_cluster_policy() -> None:
    """Patch mode writes it into ClusterPolicy spec.dcgmExporter.version, helm mode into the chart's value (a
    Release carries no annotations, so the pack reads the value there)."""
    spec = spec_from_config(stack_config("prod"))
    assert manifests.cluster_policy_spec(spec)["dcgmExporter"] == {"version": "4.5.2-4.8.1-ubuntu22.04"}
    helm = spec.model_copy(update={"gpuOperator": spec.gpuOperator.model_copy(update={"clusterPolicy": "helm"})})
    assert manifests.helm_values(helm)["dcgmExporter"] == {"version": "4.5.2-4.8.1-ubuntu22.04"}


def test_a_helm_release_is_judged_by_its_chart_value() -> None:
    def cluster_wide(op: dict) -> None:
        op.update(useNvidiaDriverCrd=False, unpinnedHoldReason="fixed-size pools; CHG-1",
                  dcgmExporterVersion="3.3.7-3.5.0-ubuntu22.04")

    config = change(eks_operator_owned(), "gpuOperator", cluster_wide)
    (found,) = _findings(config, "eks-prod")
    assert not found.advisory and "DCGM Exporter 3.3.7-3.5.0-ubuntu22.04" in found.message
    config = change(eks_operator_owned(), "gpuOperator", lambda op: (cluster_wide(op), op.pop("dcgmExporterVersion")))
    (found,) = _findings(config, "eks-prod")
    assert "declares no DCGM Exporter" in found.message
