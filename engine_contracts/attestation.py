"""The canary attestation: what a passing `gpu-rollout verify` of the canary stack records, and the prod gate reads.

One file per canary stack and driver version, ``attestations/<canary-stack>/<driver>.json``: each fleet's
canary attests a driver for its own prod stack, and several fleets move to the same driver. It holds the stack
and cluster it was verified on, the operator release and driver mode, what each attested pool is as the live
cluster showed it (GPU product and architecture, GPUs per node, NVSwitch and where Fabric Manager comes from,
MIG layout, node image, kernel and OS image, and whether it served model traffic during the soak), every check
with its evidence, when the soak started and when verify saw it clean, and the git commit.

Two seals over the canonical content (every other field as JSON with sorted keys, no whitespace, UTF-8): a
sha256 ``digest``, the integrity check anyone can recompute, and an Ed25519 ``signature`` by the key verify
ran with (``GPU_ROLLOUT_SIGNING_KEY`` or ``--signing-key``), which only the holder of that private key can make.
The prod gate trusts the public keys listed in its pack config (``canary-attested.trustedKeys`` in
``policy/prod.json``, read with :func:`read_trusted_keys`); :func:`trust_problems` says why an attestation is
not trusted (unsigned, a key not trusted, a bad signature).

``seal`` builds a sealed attestation, ``write`` stores it (never over a newer one, atomically), ``load``
reads one back and refuses anything malformed, of an unknown or retired format, or tampered with;
``admission_problems`` says what keeps an attestation from admitting a driver on a GPU architecture after a
soak. Pure data and files; no Pulumi.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import hmac
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self, cast

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from gpu_knowledge import compat, labels
from fleetspec import stacks
from gpu_knowledge.versions import parse_driver

API_VERSION: Final = "gpu-driver-upgrade.io/attestation/v3"
# Formats this version no longer reads, and why: each is refused with the command that re-attests.
RETIRED_FORMATS: Final[dict[str, str]] = {
    # v1 had no signature (its optional HMAC needed a shared secret the pack never had).
    "gpu-driver-upgrade.io/attestation/v1": "unsigned; it binds neither the pool's topology nor its traffic",
    # v2 was trusted by the canary stack's last name and the cluster's free-text name (issue 30).
    "gpu-driver-upgrade.io/attestation/v2": "it binds no cluster identity (kube-system UID, cloud resource ID), no "
    "qualified stack or stage, and no kernel module type",
}
RETIRED_API_VERSIONS: Final = tuple(RETIRED_FORMATS)
ATTESTATION_DIR = "attestations"  # under the project folder (beside Pulumi.yaml)
SIGNING_KEY_ENV = "GPU_ROLLOUT_SIGNING_KEY"  # the Ed25519 private key verify signs with, as PEM text
DIGEST_PREFIX = "sha256:"
KEY_ID_PREFIX = "ed25519:"
SIGNATURE_ALGORITHM: Final = "ed25519"
MAX_BYTES = 4 * 1024 * 1024  # an attestation is a few kilobytes; anything this big is not one
MIG_DISABLED = labels.MIG_CONFIG_DISABLED  # the mig-manager layout of whole GPUs

# The example key: the example attestations are signed with it, and its private half lives only in the tests
# (tests/data/example-attestation-key.pem), so anyone can sign with it. No pack config a team deploys with
# trusts it (policy/prod.json does not): only the examples' own config (policy/examples/prod.json, which
# `make plan`, the tests and the example e2e runs read), scoped to the example prod stacks; trusting it
# without that scope, or for another stack, is refused (policy canary-attested; docs/validation.md, "Keys").
EXAMPLE_KEY_ID: Final = "ed25519:27fa18a89bfcaaf8e1d77b4767078bda"

CheckStatus = Literal["pass", "fail", "inconclusive"]
DriverMode = Literal["nvidiadriver", "clusterpolicy", "image"]
KernelModuleType = Literal["open", "proprietary"]  # the modules the driver loaded (an operator's "auto" resolved)
CANARY_STAGE: Final = "canary"  # the only stage whose attestation admits a driver
FabricManagerSource = Literal["driver-container", "image", "host"]
Text = Annotated[str, StringConstraints(min_length=1)]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
KeyId = Annotated[str, StringConstraints(pattern=r"^ed25519:[0-9a-f]{32}$")]


class AttestationError(ValueError):
    """An attestation that cannot be written, read or trusted; the message is one line naming the file."""


class RetiredFormatError(AttestationError):
    """An attestation of a format this version no longer reads (``RETIRED_API_VERSIONS``)."""


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
    """A canary pool the attestation covers, as the live cluster showed its upgraded nodes.

    ``gpuProduct`` is GFD's ``nvidia.com/gpu.product`` (a MIG profile suffix removed), ``architecture`` that
    product's (``gpu_knowledge.compat``), ``gpusPerNode`` GFD's ``nvidia.com/gpu.count``, ``nvswitch`` whether the nodes
    are NVSwitch systems (with ``fabricManager``: where Fabric Manager comes from), ``migConfig`` the MIG layout
    (``nvidia.com/mig.config``; ``all-disabled``: whole GPUs), ``nodeImage``/``kernel``/``osImage`` what the nodes
    boot, ``kernelModuleType`` the driver's kernel modules (open or proprietary), and ``servedTraffic`` whether a model on the pool answered requests during the soak (``traffic`` says
    what was seen)."""

    name: Text
    gpuProduct: Text
    architecture: Text
    gpusPerNode: Annotated[StrictInt, Field(gt=0)]
    nvswitch: StrictBool
    fabricManager: FabricManagerSource | None = None
    migConfig: Text
    nodeImage: str | None = None  # AKS node image / EKS AMI release, where one is known
    kernel: str | None = None  # node.status.nodeInfo.kernelVersion
    osImage: str | None = None  # node.status.nodeInfo.osImage
    kernelModuleType: KernelModuleType | None = None  # None: not known (a driver the node image owns)
    servedTraffic: StrictBool
    traffic: str = ""

    @property
    def kernels(self) -> frozenset[str]:
        """The kernels the pool's nodes ran (``kernel`` lists them comma-separated where they differed)."""
        return frozenset(k.strip() for k in (self.kernel or "").split(",") if k.strip())

    @classmethod
    def of(cls, name: str, gpu_product: str, node_image: str | None = None, *, gpus_per_node: int = 1,
           nvswitch: bool = False, fabric_manager: FabricManagerSource | None = None, mig_config: str = MIG_DISABLED,
           kernel: str | None = None, os_image: str | None = None, served_traffic: bool = False,
           traffic: str = "", kernel_module_type: KernelModuleType | None = None) -> AttestedPool:
        """The pool with its architecture looked up; a product the table does not know cannot be attested."""
        answer = compat.architecture(gpu_product)
        if answer.value is None:
            raise AttestationError(f"pool {name}: {answer.reason}")
        try:
            return cls(name=name, gpuProduct=gpu_product, architecture=answer.value, gpusPerNode=gpus_per_node,
                       nvswitch=nvswitch, fabricManager=fabric_manager, migConfig=mig_config, nodeImage=node_image,
                       kernel=kernel, osImage=os_image, kernelModuleType=kernel_module_type,
                       servedTraffic=served_traffic, traffic=traffic)
        except ValidationError as exc:
            raise AttestationError(f"pool {name}: {_one_line(exc)}") from None

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


class PoolCoverage(_Record):
    """How much of the soak verify judged on one attested canary pool's models: of the soak's ``buckets``
    (``validation.bucketMinutes``), the share ``judgedFraction`` in which every comparison of a model on the pool
    had requests enough to judge (the lowest of its models), and the ``requests`` their pods on the pool's
    upgraded nodes served over the soak. The gate compares them with the prod stack's ``promotion.minJudgedFraction``
    and ``promotion.minRequests`` (:func:`coverage_problem`)."""

    judgedFraction: Annotated[float, Field(ge=0, le=1)]
    requests: Annotated[StrictInt, Field(ge=0)]
    buckets: Annotated[StrictInt, Field(ge=0)]


def coverage_problem(attestation: Attestation, pool: str, min_judged: float | None, min_requests: int | None
                     ) -> str | None:
    """Why the attested canary ``pool`` did not serve traffic enough for the prod floors; None when it did. An
    attestation that records no coverage for the pool, or a floor not stated, is never enough."""
    found = (attestation.coverage or {}).get(pool)
    if found is None:
        return f"the attestation records no coverage for canary pool {pool} (re-attest with this version's verify)"
    if min_judged is None or min_requests is None:
        return "the promotion record states no minJudgedFraction or minRequests"
    short = []
    if found.judgedFraction < min_judged:
        short.append(f"{found.judgedFraction:.0%} of its {found.buckets} soak bucket(s) judged, less than "
                     f"promotion.minJudgedFraction ({min_judged:.0%})")
    if found.requests < min_requests:
        short.append(f"{found.requests} request(s) served over the soak, fewer than promotion.minRequests "
                     f"({min_requests})")
    return f"canary pool {pool}: " + "; ".join(short) if short else None


QualifiedStack = Annotated[str, StringConstraints(pattern=r"^[^/\s]+/[^/\s]+/[A-Za-z0-9_.-]{1,100}$")]


class ClusterIdentity(_Record):
    """Which cluster the canary ran on: what verify read from it, beside what the canary stack declares.

    ``kubeSystemUid`` is ``metadata.uid`` of the ``kube-system`` Namespace as verify read it (set by the API
    server when the cluster was made; another cluster, even one of the same name, has another). ``cloudId`` is
    the AKS managed cluster's resource ID or the EKS cluster's ARN as the canary stack declares them
    (``cloud_id``); None on a cluster the project does not create (``cloud: existing``)."""

    kubeSystemUid: Text
    cloudId: str | None = None


class Signature(_Record):
    """An Ed25519 signature over the attestation's canonical content, and the id of the key that made it."""

    algorithm: Literal["ed25519"] = SIGNATURE_ALGORITHM
    keyId: KeyId
    value: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9+/]{86}==$")]  # 64 bytes, base64


def _utc(value: datetime) -> datetime:
    """Whole seconds in UTC: the form the file holds, so a loaded attestation digests as it was sealed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must carry a time zone (UTC), e.g. 2026-12-01T08:00:00Z")
    return value.astimezone(UTC).replace(microsecond=0)


# The commit of a verify run outside a git checkout (or without git): recorded as such, never invented.
UNKNOWN_COMMIT = "unknown"


class Attestation(_Record):
    """A canary's passing verify. ``stack`` is the qualified canary stack (``org/project/stack``, as the backend
    names it), ``stage`` its stage (only ``canary`` admits), ``identity`` its cluster's identity, ``cluster``
    its ``cluster.name``. ``coverage``, per attested pool, how much of the soak was judged and the requests served
    (None: an attestation that records none, which the gate never takes as served traffic)."""

    apiVersion: Literal["gpu-driver-upgrade.io/attestation/v3"] = API_VERSION
    stack: QualifiedStack
    stage: Text
    cluster: Text
    identity: ClusterIdentity
    driver: Text
    operatorChart: Text  # the GPU Operator release the canary ran (gpuOperator.chartVersion)
    driverMode: DriverMode  # who installed the driver: per-pool NVIDIADrivers, the ClusterPolicy, the node image
    pools: list[AttestedPool] = Field(min_length=1)
    checks: list[AttestedCheck] = Field(min_length=1)
    soakStart: datetime
    soakEnd: datetime
    gitCommit: Annotated[str, StringConstraints(pattern=rf"^([0-9a-f]{{7,64}}|{UNKNOWN_COMMIT})$")]
    coverage: dict[str, PoolCoverage] | None = None
    digest: Digest
    signature: Signature | None = None

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
        """The canonical bytes the digest and the signature are over: every field but those two."""
        return canonical_json(self.model_dump(mode="json", exclude={"digest", "signature"}))

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no whitespace, UTF-8; NaN and infinities are refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def digest_of(content: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(content).hexdigest()


# ---------------------------------------------------------------- keys


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """A public key's id: ``ed25519:`` and the first 32 hex digits of the sha256 of its 32 raw bytes."""
    return KEY_ID_PREFIX + hashlib.sha256(_raw_public(key)).hexdigest()[:32]


def public_key_text(key: Ed25519PublicKey) -> str:
    """The public key as a trusted-key entry holds it: its 32 raw bytes, base64."""
    return base64.b64encode(_raw_public(key)).decode("ascii")


def generate_signing_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """The private key as PKCS#8 PEM, unencrypted: what ``GPU_ROLLOUT_SIGNING_KEY`` or ``--signing-key`` holds."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def read_signing_key(pem: bytes, source: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PKCS#8 PEM (``source`` names where it came from in errors)."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        why = "it is encrypted (give it without a passphrase)" if "encrypted" in str(exc).lower() else "not a PEM private key"
        raise AttestationError(f"{source}: {why}") from None
    except Exception:  # noqa: BLE001 - cryptography raises its own types for unsupported keys
        raise AttestationError(f"{source}: not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise AttestationError(f"{source}: not an Ed25519 key ({type(key).__name__}); make one with `gpu-rollout keygen`")
    return key


def signing_key_from_environment(environ: Mapping[str, str] | None = None) -> Ed25519PrivateKey | None:
    """The signing key in ``GPU_ROLLOUT_SIGNING_KEY`` (PEM text); None when unset or empty."""
    value = (os.environ if environ is None else environ).get(SIGNING_KEY_ENV, "")
    return read_signing_key(value.encode("utf-8"), SIGNING_KEY_ENV) if value.strip() else None


@dataclass(frozen=True)
class TrustedKey:
    """A public key the prod gate trusts: its id, the key, and what it is (who holds the private half); the
    window it is valid in (``notBefore``/``notAfter``, UTC; None: open on that side) and its scope, the prod
    stacks it may admit drivers into (qualified ``org/project/stack`` names, ``*`` patterns for a team's,
    e.g. ``acme/gpu-driver-upgrade/team-a-*``; empty: every stack that reads the config)."""

    id: str
    key: Ed25519PublicKey
    comment: str = ""
    not_before: datetime | None = None
    not_after: datetime | None = None
    scope: tuple[str, ...] = ()

    def entry(self) -> dict[str, Any]:
        """The key as ``trustedKeys`` lists it in the pack config."""
        out: dict[str, Any] = {"id": self.id, "publicKey": public_key_text(self.key), "comment": self.comment}
        if self.not_before is not None:
            out["notBefore"] = _stamp(self.not_before)
        if self.not_after is not None:
            out["notAfter"] = _stamp(self.not_after)
        if self.scope:
            out["scope"] = list(self.scope)
        return out

    def scoped_to(self, prod_stack: str | None) -> bool:
        """Does the key's scope take this prod stack (qualified); an unscoped key takes every stack."""
        if not self.scope:
            return True
        return prod_stack is not None and any(fnmatch.fnmatchcase(prod_stack, pattern) for pattern in self.scope)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def trusted_key_of(public: Ed25519PublicKey, comment: str = "") -> TrustedKey:
    return TrustedKey(key_id(public), public, comment)


_KEY_FIELDS = ("id", "publicKey", "comment", "notBefore", "notAfter", "scope")

# The JSON Schema of ``trustedKeys`` (CrossGuard validates the pack config against it; read_trusted_keys too).
TRUSTED_KEYS_SCHEMA: Final[dict[str, Any]] = {
    "type": "array",
    "description": "Public keys whose attestations the gate trusts: add a key to rotate, remove one to revoke.",
    "items": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "ed25519:<32 hex>, the key's id (gpu-rollout keygen prints it)."},
            "publicKey": {"type": "string", "description": "The 32-byte Ed25519 public key, base64."},
            "comment": {"type": "string", "description": "Who holds the private half, and since when."},
            "notBefore": {"type": "string", "description": "UTC time (2026-12-01T00:00:00Z) before which an "
                          "attestation signed by the key is refused."},
            "notAfter": {"type": "string", "description": "UTC time after which the key admits nothing (expired)."},
            "scope": {"type": "array", "items": {"type": "string"},
                      "description": "The prod stacks (org/project/stack; '*' patterns for a team's) the key may "
                      "admit drivers into; none: every stack reading this config."},
        },
        "required": ["id", "publicKey"],
        "additionalProperties": False,
    },
}


def _moment(value: Any, at: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{at}: must be a UTC time such as 2026-12-01T00:00:00Z")
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{at}: {value!r} is not a UTC time such as 2026-12-01T00:00:00Z") from None


def read_trusted_keys(value: Any, where: str = "trustedKeys") -> tuple[TrustedKey, ...]:
    """The trusted keys of a pack config entry; a malformed one is a ValueError naming its index and key."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise ValueError(f"{where}: must be a list of {{id, publicKey, comment}}")
    keys: list[TrustedKey] = []
    for index, entry in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{at}: must be an object {{id, publicKey, comment}}")
        unknown = sorted(set(entry) - set(_KEY_FIELDS))
        if unknown:
            raise ValueError(f"{at}: unknown key {', '.join(unknown)} (an entry holds {', '.join(_KEY_FIELDS)})")
        text, stated, comment = entry.get("publicKey"), entry.get("id"), entry.get("comment", "")
        if not isinstance(comment, str):
            raise ValueError(f"{at}.comment: must be text")
        try:
            raw = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != 32:
            raise ValueError(f"{at}.publicKey: must be a 32-byte Ed25519 public key in base64 (gpu-rollout keygen "
                             "prints the entry)")
        public = Ed25519PublicKey.from_public_bytes(raw)
        if stated != key_id(public):
            raise ValueError(f"{at}.id: {stated!r} is not the id of that publicKey ({key_id(public)})")
        if any(k.id == stated for k in keys):
            raise ValueError(f"{at}.id: {stated} is listed twice")
        not_before = _moment(entry.get("notBefore"), f"{at}.notBefore")
        not_after = _moment(entry.get("notAfter"), f"{at}.notAfter")
        if not_before is not None and not_after is not None and not_after <= not_before:
            raise ValueError(f"{at}: notAfter {entry['notAfter']} is not after notBefore {entry['notBefore']}")
        scope = entry.get("scope", [])
        if not isinstance(scope, list) or not all(isinstance(s, str) and s.count("/") == 2 for s in scope):
            raise ValueError(f"{at}.scope: must be a list of prod stacks as org/project/stack ('*' patterns allowed)")
        keys.append(TrustedKey(key_id(public), public, comment, not_before, not_after, tuple(scope)))
    return tuple(keys)


def sign(content: bytes, key: Ed25519PrivateKey) -> Signature:
    return Signature(keyId=key_id(key.public_key()), value=base64.b64encode(key.sign(content)).decode("ascii"))


def trust_problems(attestation: Attestation, trusted: Sequence[TrustedKey], source: str, canary: str,
                   prod_stack: str | None = None, now: datetime | None = None) -> list[str]:
    """Why the attestation's signature does not make it trusted: unsigned, signed by a key ``trusted`` does not
    hold, or holds for another prod stack (its scope) or outside its validity window (``now``, default the
    clock: an expired key admits nothing; a soak that ended before ``notBefore`` was not signed in it), or a
    signature that does not match its content; empty when a trusted key signed exactly this content."""
    signature = attestation.signature
    again = f"`gpu-rollout verify --stack {canary}` with {SIGNING_KEY_ENV} (or --signing-key) set"
    if signature is None:
        return [f"{source} is unsigned: the gate admits only attestations signed by a trusted key; re-attest with "
                f"{again}"]
    known = next((k for k in trusted if k.id == signature.keyId), None)
    if known is None:
        listed = ", ".join(k.id for k in trusted) or "none"
        return [f"{source} is signed by key {signature.keyId}, which the gate does not trust (canary-attested."
                f"trustedKeys in the pack config lists: {listed})"]
    try:
        known.key.verify(base64.b64decode(signature.value), attestation.content())
    except (InvalidSignature, binascii.Error, ValueError):
        return [f"{source}: bad signature by key {signature.keyId}: changed after it was signed, or not signed by "
                "that key"]
    problems = []
    if not known.scoped_to(prod_stack):
        problems.append(f"{source} is signed by key {signature.keyId}, whose scope ({', '.join(known.scope)}) does "
                        f"not take prod stack '{prod_stack or '(not stated)'}'")
    current = _utc(now) if now is not None else datetime.now(UTC).replace(microsecond=0)
    if known.not_after is not None and current > known.not_after:
        problems.append(f"{source} is signed by key {signature.keyId}, which expired at {_stamp(known.not_after)} "
                        "(notAfter): re-attest with a current key")
    if known.not_before is not None and attestation.soakEnd < known.not_before:
        problems.append(f"{source} was made at {_stamp(attestation.soakEnd)}, before key {signature.keyId} was valid "
                        f"(notBefore {_stamp(known.not_before)})")
    return problems


# ---------------------------------------------------------------- sealing, reading, writing


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def seal(
    *,
    stack: str,
    stage: str,
    cluster: str,
    identity: ClusterIdentity | Mapping[str, Any],
    driver: str,
    operator_chart: str,
    driver_mode: DriverMode,
    pools: Sequence[AttestedPool | Mapping[str, Any]],
    checks: Sequence[AttestedCheck | Mapping[str, Any]],
    soak_start: datetime,
    soak_end: datetime,
    git_commit: str,
    signing_key: Ed25519PrivateKey | None,
    coverage: Mapping[str, PoolCoverage | Mapping[str, Any]] | None = None,
) -> Attestation:
    """A sealed attestation: the digest over its canonical content, and its signature by ``signing_key``
    (None leaves it unsigned, which the gate refuses)."""
    fields: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "stack": stack,
        "stage": stage,
        "cluster": cluster,
        "identity": identity.model_dump() if isinstance(identity, ClusterIdentity) else dict(identity),
        "driver": driver,
        "operatorChart": operator_chart,
        "driverMode": driver_mode,
        "pools": [p.model_dump() if isinstance(p, AttestedPool) else dict(p) for p in pools],
        "checks": [c.model_dump() if isinstance(c, AttestedCheck) else dict(c) for c in checks],
        "soakStart": soak_start,
        "soakEnd": soak_end,
        "gitCommit": git_commit,
        "coverage": {pool: c.model_dump() if isinstance(c, PoolCoverage) else dict(c) for pool, c in coverage.items()}
        if coverage is not None else None,
    }
    try:
        # A placeholder digest lets the model check every other field; the real one is over its content.
        draft = Attestation.model_validate({**fields, "digest": DIGEST_PREFIX + "0" * 64})
    except ValidationError as exc:
        raise AttestationError(f"attestation for driver {driver}: {_one_line(exc)}") from None
    content = draft.content()
    return draft.model_copy(update={
        "digest": digest_of(content), "signature": sign(content, signing_key) if signing_key is not None else None,
    })


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
    """An attestation of the known format from its parsed JSON, its digest and signature not yet checked."""
    if not isinstance(document, dict):
        raise AttestationError(f"{source}: not an attestation (a JSON object is expected)")
    api_version = document.get("apiVersion")
    if isinstance(api_version, str) and api_version in RETIRED_FORMATS:
        stack = document.get("stack")
        canary = stack if isinstance(stack, str) and stacks.is_stack_name(stacks.stack_name(stack)) else "<canary>"
        raise RetiredFormatError(
            f"{source}: apiVersion {api_version} is no longer read ({RETIRED_FORMATS[api_version]}): re-attest with "
            f"`gpu-rollout verify --stack {stacks.stack_name(canary)}` and a signing key ({SIGNING_KEY_ENV}), which "
            f"writes {API_VERSION}"
        )
    if api_version != API_VERSION:
        raise AttestationError(f"{source}: unknown apiVersion {api_version!r} (this version reads {API_VERSION})")
    try:
        return Attestation.model_validate(document)
    except ValidationError as exc:
        raise AttestationError(f"{source}: {_one_line(exc)}") from None


def from_document(document: object, source: str) -> Attestation:
    """An attestation from its parsed JSON, intact: its digest matches its content. Whether a trusted key
    signed it is :func:`trust_problems`'s question."""
    attestation = _well_formed(document, source)
    if not hmac.compare_digest(digest_of(attestation.content()), attestation.digest):
        raise AttestationError(f"{source}: digest mismatch: the content was changed after verify sealed it")
    return attestation


def _json(text: str, source: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AttestationError(f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def parse(text: str, source: str) -> Attestation:
    """An intact attestation from the text of its file (``source`` names it in errors)."""
    return from_document(_json(text, source), source)


def parse_unverified(text: str, source: str) -> Attestation:
    """What an attestation file states, its digest and signature not checked: for showing it to a reviewer,
    never for admitting a driver (``parse`` and ``trust_problems`` are for that)."""
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


def load(path: Path) -> Attestation:
    """Read and check one attestation file: well-formed, of this format, digest intact."""
    return parse(read_text(path), str(path))


def write(directory: Path, attestation: Attestation) -> Path:
    """Store ``attestation`` as ``<directory>/<stack>/<driver>.json``, atomically.

    Refuses to replace an attestation of the same stack and driver whose soak ended later (a newer verify must
    not be undone by an older one), and one it cannot read (remove it by hand after looking at it); an
    attestation of a retired format is replaced."""
    path = path_for(directory, attestation.stack, attestation.driver)
    folder = path.parent
    if path.exists():
        try:
            existing: Attestation | None = load(path)
        except RetiredFormatError:
            existing = None  # re-attesting is how a retired format is replaced
        except AttestationError as exc:
            raise AttestationError(f"{path}: refusing to replace an attestation that cannot be read ({exc})") from None
        if existing is not None and existing.soakEnd > attestation.soakEnd:
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
    now: datetime | None = None, max_age_days: float | None = None,
) -> list[str]:
    """Why this attestation does not admit ``driver`` on these GPU architectures; empty when it does.

    The soak is what verify saw: from ``soakStart`` to the passing run at ``soakEnd``. A soak that ends in
    the future (``now``, default the clock) is refused: a clock that wrong makes its length meaningless. What
    each pool was (product, topology, MIG, traffic) is compared per prod pool by the gate (policy
    canary-attested)."""
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
    if max_age_days is not None:
        age = (current - attestation.soakEnd).total_seconds() / 86400
        if age > max_age_days:
            problems.append(f"it was made {age:.0f} days ago ({attestation.document()['soakEnd']}), more than "
                            f"promotion.maxAttestationAgeDays ({max_age_days:g}): re-attest with `gpu-rollout verify "
                            f"--stack {stacks.stack_name(attestation.stack)}` after a fresh soak")
    return problems


# ---------------------------------------------------------------- identity and install factors


def qualified_stack(stack: str, organization: str, project: str) -> str:
    """A stack as the backend names it, ``org/project/stack``; a bare name is ``project``'s in ``organization``."""
    return stack if stack.count("/") == 2 else f"{organization}/{project}/{stacks.stack_name(stack)}"


def aks_resource_id(resource_group: str, cluster_name: str, subscription: str | None = None) -> str:
    """The managed cluster's ARM resource ID; without the subscription (stacks do not declare it) from
    ``/resourceGroups/`` on, which still names one cluster of the subscription the stack's credentials reach."""
    tail = f"/resourceGroups/{resource_group}/providers/Microsoft.ContainerService/managedClusters/{cluster_name}"
    return f"/subscriptions/{subscription}{tail}" if subscription else tail


def eks_cluster_arn(cluster_name: str, region: str, node_role_arn: str) -> str:
    """The EKS cluster's ARN: partition and account of the node role (the stack's own account), its region."""
    parts = node_role_arn.split(":")
    partition, account = (parts[1], parts[4]) if len(parts) > 4 else ("aws", "")
    return f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}"


def kernel_series(kernel: str) -> str:
    """A kernel's release series: ``5.15.0-1079-azure`` -> ``5.15.0-*-azure`` (the ABI number is the build;
    the flavour and base release are what modules are built against). A kernel of another shape is its own."""
    head, sep, rest = kernel.partition("-")
    if not sep:
        return kernel
    build, dash, flavour = rest.partition("-")
    if build.isdigit() or (build.split(".")[0].isdigit() and "." in build):
        return f"{head}-*" + (f"-{flavour}" if dash else "")
    return kernel


_OS_IMAGES: Final = (
    (re.compile(r"^Ubuntu (\d{2}\.\d{2})"), "ubuntu{0}"),
    (re.compile(r"^(?:Microsoft Azure Linux|CBL-Mariner)"), "azurelinux"),
    (re.compile(r"^Amazon Linux (2023)"), "amazonlinux{0}"),
    (re.compile(r"^Bottlerocket"), "bottlerocket"),
    (re.compile(r"^Red Hat Enterprise Linux(?: CoreOS)? (\d+)"), "rhel{0}"),
)


def os_family(os_image: str) -> str | None:
    """The OS a node's ``status.nodeInfo.osImage`` names, spelled as stacks declare it (``gpu_knowledge.platform``):
    "Ubuntu 22.04.5 LTS" is ``ubuntu22.04``; None for one this table does not know. Several (nodes that
    disagreed, joined by ", ") read as the first's family only when all agree."""
    found = set()
    for image in (i.strip() for i in os_image.split(",")):
        family = next((template.format(*m.groups()) for pattern, template in _OS_IMAGES if (m := pattern.match(image))),
                      None)
        found.add(family)
    return found.pop() if len(found) == 1 else None


def resolved_module_type(declared: str | None, driver: str | None) -> KernelModuleType | None:
    """The kernel modules an operator-installed driver loads: ``open``/``proprietary`` as declared; ``auto``
    (the operator's default since 25.3.0) loads open modules from R570 on, proprietary before; None: unknown."""
    if declared in ("open", "proprietary"):
        return cast(KernelModuleType, declared)
    if declared in (None, "auto") and driver:
        parsed = parse_driver(driver)
        if parsed is not None:
            return "open" if parsed[0] >= 570 else "proprietary"
    return None


__all__ = [
    "API_VERSION", "ATTESTATION_DIR", "PoolCoverage", "coverage_problem", "CANARY_STAGE", "ClusterIdentity", "RETIRED_FORMATS", "RetiredFormatError", "EXAMPLE_KEY_ID", "MIG_DISABLED", "RETIRED_API_VERSIONS",
    "SIGNING_KEY_ENV", "TRUSTED_KEYS_SCHEMA", "Attestation", "AttestationError", "AttestedCheck", "AttestedPool",
    "Signature", "TrustedKey", "admission_problems", "aks_resource_id", "canonical_json", "eks_cluster_arn",
    "kernel_series", "os_family", "qualified_stack", "resolved_module_type", "covers", "digest_of", "folder_for",
    "from_document", "generate_signing_key", "key_id", "load", "parse", "parse_unverified", "path_for",
    "private_key_pem", "public_key_text", "read_signing_key", "read_text", "read_trusted_keys", "seal", "sign",
    "signing_key_from_environment", "trust_problems", "trusted_key_of", "write",
]
