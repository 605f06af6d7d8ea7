"""The result format readers rely on: what parses, what is refused, the node patch and the metrics text."""

from __future__ import annotations

import json

import pytest

from workload import result
from workload.result import FAIL, PASS, SKIPPED, Check, Result


def sample(*checks: Check) -> Result:
    return Result(
        node="gpu-l40s-c01", pool="l40s-canary", stage="canary", cluster="lab-gpu-1", targetDriver="580.173.02",
        image="vllm/vllm-openai:v0.10.2", model="m", program="sha256:" + "0" * 64,
        startedAt="2026-12-02T10:00:00Z", finishedAt="2026-12-02T10:01:30Z", durationSeconds=90.0,
        checks=list(checks) or [Check("driver-version", PASS, "ok")],
        measurements={"timeToFirstTokenSeconds": 0.05, "tokensPerSecond": 180.5},
    )


def test_a_result_round_trips_through_its_annotation() -> None:
    original = sample(Check("driver-version", PASS, "ok", {"reported": "580.173.02"}),
                      Check("token-digest", SKIPPED, "no digest recorded"))
    patch = result.node_patch(original)
    text = patch["metadata"]["annotations"]["validation.gpu-driver-upgrade.io/580.173.02"]
    assert patch["metadata"]["labels"] == {"gpu-driver-upgrade.io/validated-driver": "580.173.02",
                                           "gpu-driver-upgrade.io/validation": "passed"}
    parsed = result.parse_result(text)
    assert parsed.to_json() == original.to_json()
    assert json.loads(text)["apiVersion"] == result.RESULT_API_VERSION


def test_one_failed_check_fails_the_outcome_and_skipped_ones_do_not() -> None:
    assert sample(Check("a", PASS, ""), Check("b", SKIPPED, "")).outcome == result.PASSED
    failed = sample(Check("a", PASS, ""), Check("b", FAIL, ""))
    assert failed.outcome == result.FAILED and failed.exit_code == result.EXIT_FAILED


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda d: d.update(outcome="passed"), "disagrees with its checks"),  # a hand-edited pass over a failure
    (lambda d: d.update(apiVersion="v0"), "apiVersion"),
    (lambda d: d.pop("node"), "node must be"),
    (lambda d: d.update(finishedAt="yesterday"), "finishedAt"),
    (lambda d: d.update(checks=[]), "checks must be"),
    (lambda d: d["checks"][0].update(status="ok"), r"checks\[0\] needs an id and a status"),
    (lambda d: d.update(durationSeconds=-1), "durationSeconds"),
])
def test_a_malformed_or_tampered_result_is_refused(edit, reason: str) -> None:
    document = sample(Check("driver-version", FAIL, "570.195.03")).to_json()
    edit(document)
    with pytest.raises(ValueError, match=reason):
        result.parse_result(json.dumps(document))


def test_not_json_is_refused() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        result.parse_result("{")


@pytest.mark.parametrize(("target", "reported", "matches"), [
    ("580.173.02", "580.173.02", True), ("580.173.02", "580.173.03", False), ("580.173.02", "580.173.020", False),
    ("580", "580.95.05", True), ("580", "5800.1", False), ("580", "570.195.03", False),
])
def test_driver_matching(target: str, reported: str, matches: bool) -> None:
    assert result.driver_matches(target, reported) is matches


def test_metrics_escape_label_values() -> None:
    odd = sample()
    odd.pool = 'a"b\\c'
    text = result.prometheus_text(odd, 1.5)
    assert 'pool="a\\"b\\\\c"' in text
    assert "gpu_driver_validation_finished_timestamp_seconds{" in text and text.endswith("\n")
    assert "# TYPE gpu_driver_validation_passed gauge" in text


def test_the_program_digest_covers_every_file_and_its_boundaries() -> None:
    files = {name: b"x" for name in result.PROGRAM_FILES}
    base = result.program_digest(files)
    moved = dict(files, **{result.PROGRAM_FILES[0]: b"xx", result.PROGRAM_FILES[1]: b""})
    assert result.program_digest(moved) != base  # the same bytes split differently is another program
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64


def test_a_failed_result_holds_the_node_and_a_passed_one_does_not() -> None:
    failed = sample(Check("driver-version", PASS, "ok"), Check("no-xid", FAIL, "Xid 79 on GPU 0"),
                    Check("tokens-per-second", FAIL, "12.0 tokens/s, below 40"))
    patch = result.node_patch(failed)
    assert patch["spec"] == {"unschedulable": True}
    hold = result.parse_hold(patch["metadata"]["annotations"][result.HOLD_ANNOTATION])
    assert hold == result.Hold(node="gpu-l40s-c01", pool="l40s-canary", stage="canary", driver="580.173.02",
                               checks=("no-xid", "tokens-per-second"), message="Xid 79 on GPU 0",
                               at="2026-12-02T10:01:30Z")
    assert hold.describe() == "no-xid, tokens-per-second failed on driver 580.173.02 at 2026-12-02T10:01:30Z"
    passed = result.node_patch(sample())
    assert "spec" not in passed and result.HOLD_ANNOTATION not in passed["metadata"]["annotations"]


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda d: d.update(apiVersion="v0"), "apiVersion"),
    (lambda d: d.pop("node"), "node must be"),
    (lambda d: d.update(driver=""), "driver must be"),
    (lambda d: d.update(checks=[]), "checks must be"),
    (lambda d: d.update(checks=["no-xid", 3]), "checks must be"),
    (lambda d: d.update(message=None), "message must be"),
])
def test_a_malformed_hold_record_is_refused(edit, reason: str) -> None:
    document = result.hold_record(sample(Check("no-xid", FAIL, "Xid 79")))
    edit(document)
    with pytest.raises(ValueError, match=reason):
        result.parse_hold(json.dumps(document))
    with pytest.raises(ValueError, match="not JSON"):
        result.parse_hold("{")
