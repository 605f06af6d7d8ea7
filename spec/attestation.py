"""The canary attestation: what a passing `gpu-rollout verify` of the canary stack records, and the prod gate reads.

One file per canary stack and driver version, ``attestations/<canary-stack>/<driver>.json``: each fleet's
canary attests a driver for its own prod stack, and several fleets move to the same driver. It holds the stack
and cluster it was verified on, the pools and GPU products (with their architecture) it covers, the operator
chart, every check with its evidence, when the soak started and when verify saw it clean, the git commit, and
a sha256 digest over the canonical content (every other field as JSON with sorted keys, no whitespace,
UTF-8). The digest makes a hand edit visible; an optional HMAC-SHA256 over the same bytes, keyed from
``GPU_ROLLOUT_ATTESTATION_KEY``, makes forging one need the key as well.

``seal`` builds a sealed attestation, ``write`` stores it (never over a newer one, atomically), ``load``
reads one back and refuses anything malformed, of an unknown format, tampered with or wrongly keyed;
``admission_problems`` says what keeps an attestation from admitting a driver on a GPU architecture after a
soak.
Pure data and files; no Pulumi.
"""

from __future__ import annotations

import hashlib
import hmac as hmac_lib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from spec import compat, stacks
from spec.versions import parse_driver

API_VERSION: Final = "gpu-driver-upgrade.io/attestation/v1"
ATTESTATION_DIR = "attestations"  # under the project folder (beside Pulumi.yaml)
HMAC_KEY_ENV = "GPU_ROLLOUT_ATTESTATION_KEY"  # the HMAC key, as text, when attestations are keyed
DIGEST_PREFIX = "sha256:"
MAX_BYTES = 4 * 1024 * 1024  # an attestation is a few kilobytes; anything this big is not one

CheckStatus = Literal["pass", "fail", "inconclusive"]
Text = Annotated[str, StringConstraints(min_length=1)]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Hmac = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class AttestationError(ValueError):
    """An attestation that cannot be written, read or trusted; the message is one line naming the file."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AttestedCheck(_Record):
    """One `verify` check as it ran on the canary: its registry id, status, subject, message and evidence."""

    id: Text
    status: CheckStatus
    subject: Text
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)

    @field_validator("evidence")
    @classmethod
    def _json_evidence(cls, value: dict[str, Any]) -> dict[str, Any]:
        # The digest is over JSON: evidence that JSON cannot carry exactly (NaN, objects) could never verify.
        try:
            canonical_json(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"evidence must be plain JSON (strings, finite numbers, lists, maps): {exc}") from None
        return value


class AttestedPool(_Record):
    """A canary pool the attestation covers. ``architecture`` is the GPU product's, from ``spec.compat``."""

    name: Text
    gpuProduct: Text
    architecture: Text
    nodeImage: str | None = None  # AKS node image / EKS AMI release, where the node image carries the driver

    @classmethod
    def of(cls, name: str, gpu_product: str, node_image: str | None = None) -> AttestedPool:
        """The pool with its architecture looked up; a product the table does not know cannot be attested."""
        answer = compat.architecture(gpu_product)
        if answer.value is None:
            raise AttestationError(f"pool {name}: {answer.reason}")
        return cls(name=name, gpuProduct=gpu_product, architecture=answer.value, nodeImage=node_image)

    @model_validator(mode="after")
    def _known_architecture(self) -> Self:
        answer = compat.architecture(self.gpuProduct)
        if answer.value is None:
            raise ValueError(f"pool {self.name}: {answer.reason}")
        if answer.value != self.architecture:
            raise ValueError(
                f"pool {self.name}: architecture '{self.architecture}' is not that of {self.gpuProduct} ({answer.value})"
            )
        return self


def _utc(value: datetime) -> datetime:
    """Whole seconds in UTC: the form the file holds, so a loaded attestation digests as it was sealed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must carry a time zone (UTC), e.g. 2026-12-01T08:00:00Z")
    return value.astimezone(UTC).replace(microsecond=0)


# The commit of a verify run outside a git checkout (or without git): recorded as such, never invented.
UNKNOWN_COMMIT = "unknown"


class Attestation(_Record):
    apiVersion: Literal["gpu-driver-upgrade.io/attestation/v1"] = API_VERSION
    stack: Text
    cluster: Text
    driver: Text
    operatorChart: Text
    pools: list[AttestedPool] = Field(min_length=1)
    checks: list[AttestedCheck] = Field(min_length=1)
    soakStart: datetime
    soakEnd: datetime
    gitCommit: Annotated[str, StringConstraints(pattern=rf"^([0-9a-f]{{7,64}}|{UNKNOWN_COMMIT})$")]
    digest: Digest
    hmac: Hmac | None = None

    @field_validator("driver")
    @classmethod
    def _driver(cls, value: str) -> str:
        if parse_driver(value) is None or value != value.strip():
            raise ValueError(f"'{value}' is not a driver version such as 580.173.02")
        return value

    @field_validator("soakStart", "soakEnd")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return _utc(value)

    @field_serializer("soakStart", "soakEnd")
    def _timestamp(self, value: datetime) -> str:
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.soakEnd < self.soakStart:
            raise ValueError(f"soakEnd {self._timestamp(self.soakEnd)} is before soakStart {self._timestamp(self.soakStart)}")
        failed = [f"{c.id} ({c.subject}: {c.status})" for c in self.checks if c.status != "pass"]
        if failed:
            raise ValueError(f"an attestation records a passing canary only; not passed: {', '.join(failed)}")
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"a pool is listed twice: {', '.join(sorted(n for n in set(names) if names.count(n) > 1))}")
        return self

    @property
    def architectures(self) -> frozenset[str]:
        return frozenset(pool.architecture for pool in self.pools)

    @property
    def soak_hours(self) -> float:
        """How long the canary ran clean, as verify saw it: from the soak's start to the passing run."""
        return (self.soakEnd - self.soakStart).total_seconds() / 3600

    def content(self) -> bytes:
        """The canonical bytes the digest and the HMAC are over: every field but those two."""
        return canonical_json(self.model_dump(mode="json", exclude={"digest", "hmac"}))

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no whitespace, UTF-8; NaN and infinities are refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def digest_of(content: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(content).hexdigest()


def hmac_of(content: bytes, key: bytes) -> str:
    return hmac_lib.new(key, content, hashlib.sha256).hexdigest()


def key_from_environment(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The HMAC key from ``GPU_ROLLOUT_ATTESTATION_KEY`` (UTF-8 text); None when unset or empty."""
    value = (os.environ if environ is None else environ).get(HMAC_KEY_ENV, "")
    return value.encode("utf-8") if value else None


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def seal(
    *,
    stack: str,
    cluster: str,
    driver: str,
    operator_chart: str,
    pools: Sequence[AttestedPool | Mapping[str, Any]],
    checks: Sequence[AttestedCheck | Mapping[str, Any]],
    soak_start: datetime,
    soak_end: datetime,
    git_commit: str,
    hmac_key: bytes | None = None,
) -> Attestation:
    """A sealed attestation: the digest over its canonical content, and the HMAC when a key is given."""
    fields: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "stack": stack,
        "cluster": cluster,
        "driver": driver,
        "operatorChart": operator_chart,
        "pools": [p.model_dump() if isinstance(p, AttestedPool) else dict(p) for p in pools],
        "checks": [c.model_dump() if isinstance(c, AttestedCheck) else dict(c) for c in checks],
        "soakStart": soak_start,
        "soakEnd": soak_end,
        "gitCommit": git_commit,
    }
    try:
        # A placeholder digest lets the model check every other field; the real one is over its content.
        draft = Attestation.model_validate({**fields, "digest": DIGEST_PREFIX + "0" * 64})
    except ValidationError as exc:
        raise AttestationError(f"attestation for driver {driver}: {_one_line(exc)}") from None
    content = draft.content()
    return draft.model_copy(
        update={"digest": digest_of(content), "hmac": hmac_of(content, hmac_key) if hmac_key else None}
    )


def folder_for(directory: Path, stack: str) -> Path:
    """The attestations of one canary stack: ``<directory>/<stack>`` (its own name, without org/project:
    ``org/project/canary`` and ``canary`` are the same canary stack)."""
    name = stacks.stack_name(stack)
    if not stacks.is_stack_name(name):
        raise AttestationError(f"'{stack}' is not a stack name; no attestation folder is named after it")
    return directory / name


def path_for(directory: Path, stack: str, driver: str) -> Path:
    """Where the canary stack's attestation of ``driver`` lives: ``<directory>/<stack>/<driver>.json``."""
    if parse_driver(driver) is None or driver != driver.strip():
        raise AttestationError(f"'{driver}' is not a driver version; no attestation file is named after it")
    return folder_for(directory, stack) / f"{driver}.json"


def _well_formed(document: object, source: str) -> Attestation:
    """An attestation of the known format from its parsed JSON, its digest and HMAC not yet checked."""
    if not isinstance(document, dict):
        raise AttestationError(f"{source}: not an attestation (a JSON object is expected)")
    api_version = document.get("apiVersion")
    if api_version != API_VERSION:
        raise AttestationError(f"{source}: unknown apiVersion {api_version!r} (this version reads {API_VERSION})")
    try:
        return Attestation.model_validate(document)
    except ValidationError as exc:
        raise AttestationError(f"{source}: {_one_line(exc)}") from None


def from_document(document: object, source: str, hmac_key: bytes | None = None) -> Attestation:
    """An attestation from its parsed JSON, trusted only when its digest (and HMAC, given a key) match."""
    attestation = _well_formed(document, source)
    content = attestation.content()
    if not hmac_lib.compare_digest(digest_of(content), attestation.digest):
        raise AttestationError(f"{source}: digest mismatch: the content was changed after verify sealed it")
    if hmac_key is not None:
        if attestation.hmac is None:
            raise AttestationError(f"{source}: no hmac, but {HMAC_KEY_ENV} is set: it was not sealed with the key")
        if not hmac_lib.compare_digest(hmac_of(content, hmac_key), attestation.hmac):
            raise AttestationError(f"{source}: hmac mismatch: sealed with another key, or changed after sealing")
    return attestation


def _json(text: str, source: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AttestationError(f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def parse(text: str, source: str, hmac_key: bytes | None = None) -> Attestation:
    """An attestation from the text of its file (``source`` names it in errors)."""
    return from_document(_json(text, source), source, hmac_key)


def parse_unverified(text: str, source: str) -> Attestation:
    """What an attestation file states, its digest and HMAC not checked: for showing it to a reviewer, never
    for admitting a driver (``parse`` is for that)."""
    return _well_formed(_json(text, source), source)


def read_text(path: Path) -> str:
    """The text of an attestation file, bounded in size; a missing or unreadable file is an AttestationError."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise AttestationError(f"{path}: no such attestation") from None
    except OSError as exc:
        raise AttestationError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise AttestationError(f"{path}: larger than {MAX_BYTES} bytes; not an attestation")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AttestationError(f"{path}: not UTF-8 text") from None


def load(path: Path, hmac_key: bytes | None = None) -> Attestation:
    """Read and check one attestation file: well-formed, known apiVersion, digest (and HMAC) intact."""
    return parse(read_text(path), str(path), hmac_key)


def write(directory: Path, attestation: Attestation) -> Path:
    """Store ``attestation`` as ``<directory>/<stack>/<driver>.json``, atomically.

    Refuses to replace an attestation of the same stack and driver whose soak ended later (a newer verify must
    not be undone by an older one), and one it cannot read (remove it by hand after looking at it)."""
    path = path_for(directory, attestation.stack, attestation.driver)
    folder = path.parent
    if path.exists():
        try:
            existing = load(path)
        except AttestationError as exc:
            raise AttestationError(f"{path}: refusing to replace an attestation that cannot be read ({exc})") from None
        if existing.soakEnd > attestation.soakEnd:
            raise AttestationError(
                f"{path}: refusing to replace a newer attestation (its soak ended {existing.document()['soakEnd']}, "
                f"this one {attestation.document()['soakEnd']})"
            )
    text = json.dumps(attestation.document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=folder, prefix=f".{path.name}.", suffix=".tmp", delete=False
        )
        try:
            with handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(handle.name, path)
        except BaseException:
            Path(handle.name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise AttestationError(f"{path}: cannot write: {exc.strerror}") from None
    return path


def covers(attestation: Attestation, driver: str, architecture: str) -> bool:
    """Does the attestation vouch for ``driver`` on GPUs of ``architecture``."""
    return attestation.driver == driver and architecture in attestation.architectures


def admission_problems(
    attestation: Attestation, *, driver: str, architectures: Sequence[str], min_soak_hours: float,
    now: datetime | None = None,
) -> list[str]:
    """Why this attestation does not admit ``driver`` on these GPU architectures; empty when it does.

    The soak is what verify saw: from ``soakStart`` to the passing run at ``soakEnd``. A soak that ends in
    the future (``now``, default the clock) is refused: a clock that wrong makes its length meaningless."""
    problems = []
    if attestation.driver != driver:
        problems.append(f"it attests driver {attestation.driver}, not {driver}")
    missing = sorted(set(architectures) - attestation.architectures)
    if missing:
        covered = ", ".join(sorted(attestation.architectures))
        problems.append(f"it covers {covered} GPUs, not {', '.join(missing)}")
    if attestation.soak_hours < min_soak_hours:
        problems.append(
            f"its soak lasted {attestation.soak_hours:.1f} h, less than promotion.minSoakHours ({min_soak_hours:g} h)"
        )
    current = _utc(now) if now is not None else datetime.now(UTC).replace(microsecond=0)
    if attestation.soakEnd > current:
        problems.append(f"its soak ends in the future ({attestation.document()['soakEnd']})")
    return problems


__all__ = [
    "API_VERSION", "ATTESTATION_DIR", "HMAC_KEY_ENV", "Attestation", "AttestationError", "AttestedCheck",
    "AttestedPool", "admission_problems", "canonical_json", "covers", "digest_of", "folder_for", "from_document",
    "hmac_of", "key_from_environment", "load", "parse", "parse_unverified", "path_for", "read_text", "seal", "write",
]
