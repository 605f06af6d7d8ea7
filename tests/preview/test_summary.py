"""preview.summary: the promotion record shows its attestations in one line each, not their whole text."""

from __future__ import annotations

import json

from preview.run import ProgramRun
from preview.summary import review_fields
from engine_contracts import resource_facts as rf


def _record(run: ProgramRun) -> dict:
    (record,) = [r for r in run.of_type(rf.CONFIG_MAP) if rf.is_promotion_record(r.inputs)]
    return record.inputs


def test_the_promotion_record_shows_each_attestation_in_one_line(rendered: dict[str, ProgramRun]) -> None:
    inputs = _record(rendered["eks-prod"])
    fields = dict(review_fields(rf.CONFIG_MAP, inputs))
    assert "attestations=" not in fields["data"] and "canaryStack=eks-canary" in fields["data"]
    text = json.loads(inputs["data"]["attestations"])["580.173.02"]
    assert len(text) > 2000  # the record carries the whole file, evidence and all
    shown = fields["attestations"]
    assert shown.startswith("580.173.02: stack organization/gpu-driver-upgrade/eks-canary, ada, ampere, soak ")
    assert "\n" not in shown
    assert json.loads(text)["digest"][:19] in shown


def test_a_record_whose_attestation_is_not_json_says_so(rendered: dict[str, ProgramRun]) -> None:
    inputs = _record(rendered["prod"])
    broken = {**inputs, "data": {**inputs["data"], "attestations": json.dumps({"580.173.02": "{broken"})}}
    assert dict(review_fields(rf.CONFIG_MAP, broken))["attestations"] == (
        "580.173.02: not an attestation (the pack refuses it)")
