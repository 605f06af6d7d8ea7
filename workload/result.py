"""The validation result: one per node and driver version, the contract between the job and its readers.

The job writes it on its own Node object, in one merge patch (docs/validation.md, "The result"):

- label ``gpu-driver-upgrade.io/validated-driver: <driver>``: the driver this node was last validated on,
  whatever the outcome. The job's DaemonSet selects nodes *without* it for their pool's target, so the pod
  leaves the node (and gives its GPUs back) as soon as this label is written.
- label ``gpu-driver-upgrade.io/validation: passed|failed``: the outcome on that driver.
- annotation ``validation.gpu-driver-upgrade.io/<driver>``: the whole result as JSON (``Result.to_json``),
  one annotation per driver version the node was validated on.
- on a failed result only, the hold: ``spec.unschedulable: true`` (the node is cordoned) and the annotation
  ``gpu-driver-upgrade.io/validation-hold`` saying why (``hold_record``: node, pool, driver, the checks that
  failed, when). A person releases the node (`gpu-rollout release-node`); the job never uncordons.

and, where the stack names a node-exporter textfile directory, ``gpu_driver_validation.prom`` there
(``prometheus_text``). `gpu-rollout verify` reads the annotation through the API server (``parse_result``);
Prometheus reads the labels through kube-state-metrics and the numbers through the textfile collector.

Standard library only: this module is shipped to the pod with the program.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

RESULT_API_VERSION = "gpu-driver-upgrade.io/validation-result/v1"
CONFIG_API_VERSION = "gpu-driver-upgrade.io/validation-config/v1"

DOMAIN = "gpu-driver-upgrade.io"
LABEL_VALIDATED_DRIVER = f"{DOMAIN}/validated-driver"
LABEL_OUTCOME = f"{DOMAIN}/validation"
RESULT_ANNOTATION_PREFIX = f"validation.{DOMAIN}"
NODE_LABELS = (LABEL_VALIDATED_DRIVER, LABEL_OUTCOME)  # the only labels the job may change (its admission policy)
HOLD_ANNOTATION = f"{DOMAIN}/validation-hold"  # on a node the job cordoned after a failed result: why
HOLD_API_VERSION = "gpu-driver-upgrade.io/validation-hold/v1"
TEXTFILE_NAME = "gpu_driver_validation.prom"

# The files of the program, shipped to the pod in this order; the digest over them names the program that ran.
PROGRAM_FILES = ("__init__.py", "result.py", "nvml.py", "openai.py", "kube.py", "serving.py", "validate.py")
ENTRY_MODULE = "workload.validate"

PASSED, FAILED = "passed", "failed"  # outcomes
PASS, FAIL, SKIPPED = "pass", "fail", "skipped"  # check statuses
STATUSES = (PASS, FAIL, SKIPPED)

# Every check, in the order the program runs them (docs/validation.md, "What the job checks").
CHECKS = (
    "nvml",
    "driver-version",
    "gpu-count",
    "server-ready",
    "model-answers",
    "token-digest",
    "time-to-first-token",
    "tokens-per-second",
    "no-xid",
    "no-new-uncorrectable-ecc",
    "no-row-remap-failure",
)

EXIT_PASSED = 0
EXIT_FAILED = 1  # a check failed (and the result, with the hold, is recorded)
EXIT_INVALID = 2  # the program's configuration is invalid
EXIT_UNRECORDED = 3  # the result could not be recorded (it is in the pod's log): never validated again in this pod
EXIT_INTERRUPTED = 143  # SIGTERM before the result was recorded: nothing is written
# Container starts that try to record one result, each with a few quick attempts (workload.kube); the kubelet's
# restart backoff spaces the starts (10 s, doubling, at most 5 min: about 15 minutes in all). After the last
# the program only reports, so a pod never reruns a validation nor retries forever.
RECORD_STARTS = 8

_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def result_annotation(driver: str) -> str:
    """The node annotation that holds the result for one driver version."""
    return f"{RESULT_ANNOTATION_PREFIX}/{driver}"


def driver_matches(target: str, reported: str) -> bool:
    """An exact release must match exactly; a bare branch (precompiled drivers, "580") matches its releases."""
    if "." in target:
        return reported == target
    return reported.split(".", 1)[0] == target


def program_digest(files: Mapping[str, bytes]) -> str:
    """sha256 over the program's files (name, length, bytes), in PROGRAM_FILES order."""
    digest = hashlib.sha256()
    for name in PROGRAM_FILES:
        body = files[name]
        digest.update(f"{name}\n{len(body)}\n".encode())
        digest.update(body)
    return "sha256:" + digest.hexdigest()


@dataclass
class Check:
    id: str
    status: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "message": self.message, "evidence": self.evidence}


@dataclass
class Result:
    node: str
    pool: str
    stage: str
    cluster: str
    targetDriver: str  # noqa: N815 - spelled as in the JSON
    image: str
    model: str
    program: str
    startedAt: str  # noqa: N815
    finishedAt: str  # noqa: N815
    durationSeconds: float  # noqa: N815
    checks: list[Check]
    measurements: dict[str, Any] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        return FAILED if any(c.status == FAIL for c in self.checks) else PASSED

    @property
    def exit_code(self) -> int:
        return EXIT_PASSED if self.outcome == PASSED else EXIT_FAILED

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "apiVersion": RESULT_API_VERSION,
            "node": self.node,
            "pool": self.pool,
            "stage": self.stage,
            "cluster": self.cluster,
            "targetDriver": self.targetDriver,
            "outcome": self.outcome,
            "image": self.image,
            "model": self.model,
            "program": self.program,
            "startedAt": self.startedAt,
            "finishedAt": self.finishedAt,
            "durationSeconds": self.durationSeconds,
            "checks": [c.to_json() for c in self.checks],
            "measurements": self.measurements,
            "gpus": self.gpus,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))


def node_patch(result: Result) -> dict[str, Any]:
    """The JSON merge patch the job sends to its own Node: two labels and the result annotation and, when the
    result failed, the hold: the node cordoned and the hold record (one patch: all of it lands, or none)."""
    patch: dict[str, Any] = {
        "metadata": {
            "labels": {LABEL_VALIDATED_DRIVER: result.targetDriver, LABEL_OUTCOME: result.outcome},
            "annotations": {result_annotation(result.targetDriver): result.dumps()},
        }
    }
    if result.outcome == FAILED:
        patch["metadata"]["annotations"][HOLD_ANNOTATION] = json.dumps(
            hold_record(result), sort_keys=True, separators=(",", ":"))
        patch["spec"] = {"unschedulable": True}
    return patch


# ---------------------------------------------------------------- the hold of a failed node


@dataclass(frozen=True)
class Hold:
    """Why the job cordoned a node: the hold record of its failed result (``HOLD_ANNOTATION``)."""

    node: str
    pool: str
    stage: str
    driver: str  # the driver the failed validation ran on
    checks: tuple[str, ...]  # the checks that failed, in the program's order
    message: str  # what the first failed check said
    at: str  # when the validation finished (RFC 3339 UTC)

    def describe(self) -> str:
        return f"{', '.join(self.checks)} failed on driver {self.driver} at {self.at}"


def hold_record(result: Result) -> dict[str, Any]:
    failed = [c for c in result.checks if c.status == FAIL]
    return {"apiVersion": HOLD_API_VERSION, "node": result.node, "pool": result.pool, "stage": result.stage,
            "driver": result.targetDriver, "checks": [c.id for c in failed],
            "message": failed[0].message[:500] if failed else "", "at": result.finishedAt}


def parse_hold(text: str) -> Hold:
    """A hold record as the job wrote it; ValueError naming what is wrong otherwise."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("apiVersion") != HOLD_API_VERSION:
        raise ValueError(f"apiVersion is {document.get('apiVersion')!r}, expected {HOLD_API_VERSION!r}")
    for key in ("node", "pool", "stage", "driver", "at"):
        if not isinstance(document.get(key), str) or not document[key]:
            raise ValueError(f"{key} must be a non-empty string")
    checks = document.get("checks")
    if not isinstance(checks, list) or not checks or not all(isinstance(c, str) and c for c in checks):
        raise ValueError("checks must be a non-empty list of check ids")
    message = document.get("message", "")
    if not isinstance(message, str):
        raise ValueError("message must be a string")
    return Hold(node=document["node"], pool=document["pool"], stage=document["stage"], driver=document["driver"],
                checks=tuple(checks), message=message, at=document["at"])


def parse_result(text: str) -> Result:
    """A result as the job wrote it (the annotation's value); ValueError naming what is wrong otherwise.

    For readers (`gpu-rollout verify`): the outcome is recomputed from the checks and must agree with the
    recorded one, so a hand-edited "passed" over a failed check is refused.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("apiVersion") != RESULT_API_VERSION:
        raise ValueError(f"apiVersion is {document.get('apiVersion')!r}, expected {RESULT_API_VERSION!r}")
    strings = ("node", "pool", "stage", "cluster", "targetDriver", "outcome", "image", "model", "program",
               "startedAt", "finishedAt")
    for key in strings:
        if not isinstance(document.get(key), str) or not document[key]:
            raise ValueError(f"{key} must be a non-empty string")
    for key in ("startedAt", "finishedAt"):
        if not _TIMESTAMP.fullmatch(document[key]):
            raise ValueError(f"{key} {document[key]!r} is not an RFC 3339 UTC timestamp")
    duration = document.get("durationSeconds")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration < 0:
        raise ValueError("durationSeconds must be a number >= 0")
    raw_checks = document.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise ValueError("checks must be a non-empty list")
    checks = []
    for index, raw in enumerate(raw_checks):
        if not isinstance(raw, dict) or raw.get("status") not in STATUSES or not isinstance(raw.get("id"), str):
            raise ValueError(f"checks[{index}] needs an id and a status among {', '.join(STATUSES)}")
        checks.append(Check(raw["id"], raw["status"], str(raw.get("message", "")), dict(raw.get("evidence") or {})))
    for key in ("measurements",):
        if not isinstance(document.get(key, {}), dict):
            raise ValueError(f"{key} must be an object")
    result = Result(
        node=document["node"], pool=document["pool"], stage=document["stage"], cluster=document["cluster"],
        targetDriver=document["targetDriver"], image=document["image"], model=document["model"],
        program=document["program"], startedAt=document["startedAt"], finishedAt=document["finishedAt"],
        durationSeconds=float(duration), checks=checks, measurements=dict(document.get("measurements") or {}),
        gpus=list(document.get("gpus") or []),
    )
    if document["outcome"] != result.outcome:
        raise ValueError(f"outcome {document['outcome']!r} disagrees with its checks ({result.outcome})")
    return result


# ---------------------------------------------------------------- Prometheus text format (textfile collector)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(values: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{key}="{_escape(str(value))}"' for key, value in values.items()) + "}"


def _number(value: float) -> str:
    return repr(float(value))


def prometheus_text(result: Result, finished_unix: float) -> str:
    """The result as gauges for node-exporter's textfile collector (the last validation of this node)."""
    base = {"node": result.node, "pool": result.pool, "stage": result.stage, "driver": result.targetDriver}
    families: list[tuple[str, str, list[tuple[dict[str, str], float]]]] = [
        ("gpu_driver_validation_passed", "1 if the last validation of this node passed, 0 if it failed.",
         [(base, 1.0 if result.outcome == PASSED else 0.0)]),
        ("gpu_driver_validation_finished_timestamp_seconds", "When the last validation of this node finished.",
         [(base, finished_unix)]),
        ("gpu_driver_validation_duration_seconds", "How long the last validation of this node took.",
         [(base, result.durationSeconds)]),
        ("gpu_driver_validation_check_passed", "1 if the check passed, 0 if it failed (skipped checks absent).",
         [({**base, "check": c.id}, 1.0 if c.status == PASS else 0.0) for c in result.checks if c.status != SKIPPED]),
    ]
    measured = result.measurements
    for key, name, text in (
        ("timeToFirstTokenSeconds", "gpu_driver_validation_time_to_first_token_seconds",
         "Median time to the first token of the timed requests."),
        ("tokensPerSecond", "gpu_driver_validation_tokens_per_second",
         "Median decode tokens per second of the timed requests."),
    ):
        if isinstance(measured.get(key), (int, float)):
            families.append((name, text, [(base, float(measured[key]))]))
    xids = (result.check("no-xid") or Check("no-xid", SKIPPED, "")).evidence.get("xids") or []
    counts: dict[str, int] = {}
    for event in xids:
        counts[str(event.get("xid"))] = counts.get(str(event.get("xid")), 0) + 1
    families.append(("gpu_driver_validation_xid_events", "Xid events seen during the last validation, by Xid.",
                     [({**base, "xid": xid}, float(n)) for xid, n in sorted(counts.items())]))
    lines = []
    for name, text, samples in families:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{_labels(labels)} {_number(value)}" for labels, value in samples]
    return "\n".join(lines) + "\n"
