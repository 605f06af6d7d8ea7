"""The canary attestation format (engine_contracts/attestation.py): sealing, signing, writing, loading, and what it admits."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from engine_contracts import attestation as att
from engine_contracts.attestation import AttestationError, AttestedCheck, AttestedPool
from tests.conftest import example_signing_key

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
END = START + timedelta(hours=170)


def _check(check_id: str = "driver-version", status: str = "pass", **evidence: Any) -> AttestedCheck:
    return AttestedCheck(id=check_id, status=status, subject="node aks-gpucanary-0", message="ok", evidence=evidence)


def _sealed(**overrides: Any) -> att.Attestation:
    fields: dict[str, Any] = {
        "stack": "organization/gpu-driver-upgrade/canary",
        "stage": "canary",
        "cluster": "inference-weu-1",
        "identity": att.ClusterIdentity(kubeSystemUid="5d9a2c1e-0f3b-4e6a-8c7d-1b2a3c4d5e6f",
                                        cloudId=att.aks_resource_id("rg-inference-weu-1", "aks-inference-weu-1")),
        "driver": "580.173.02",
        "operator_chart": "v26.7.0",
        "driver_mode": "nvidiadriver",
        "pools": [AttestedPool.of("gpucanary", "NVIDIA-H100-80GB-HBM3"), AttestedPool.of("gput4c", "Tesla-T4")],
        "checks": [_check(target="580.173.02", nodes=["aks-gpucanary-0"]), _check("gpu-count", expected=8, seen=8.0)],
        "soak_start": START,
        "soak_end": END,
        "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "signing_key": None,
    }
    fields.update(overrides)
    return att.seal(**fields)


KEY = att.generate_signing_key()
TRUSTED = (att.trusted_key_of(KEY.public_key(), "test"),)


def test_digest_is_sha256_over_canonical_json_of_every_other_field() -> None:
    sealed = _sealed()
    document = sealed.document()
    content = {k: v for k, v in document.items() if k not in ("digest", "signature")}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert sealed.digest == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert sealed.signature is None
    assert document["soakStart"] == "2026-11-20T08:00:00Z"
    assert document["apiVersion"] == att.API_VERSION


def test_the_signature_is_ed25519_over_the_same_bytes_by_the_key_it_names() -> None:
    sealed = _sealed(signing_key=KEY)
    assert sealed.signature is not None and sealed.signature.algorithm == "ed25519"
    assert sealed.signature.keyId == att.key_id(KEY.public_key()) == TRUSTED[0].id
    KEY.public_key().verify(base64.b64decode(sealed.signature.value), sealed.content())  # raises when it does not
    assert att.trust_problems(sealed, TRUSTED, "f.json", "canary") == []


def test_architecture_comes_from_the_compatibility_table() -> None:
    pool = AttestedPool.of("gpua100", "NVIDIA-A100-80GB-PCIe", node_image="AKSUbuntu-2204gen2containerd-202511.07.0")
    assert (pool.architecture, pool.nodeImage) == ("ampere", "AKSUbuntu-2204gen2containerd-202511.07.0")
    with pytest.raises(ValueError, match="architecture 'ampere' is not that of NVIDIA-H100-80GB-HBM3 \\(hopper\\)"):
        AttestedPool(name="x", gpuProduct="NVIDIA-H100-80GB-HBM3", architecture="ampere", gpusPerNode=8,
                     nvswitch=True, migConfig="all-disabled", servedTraffic=True)
    with pytest.raises(AttestationError, match="pool x: GPU product 'Acme-Z9' is not in the architecture table"):
        AttestedPool.of("x", "Acme-Z9")


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    sealed = _sealed(signing_key=KEY)
    path = att.write(tmp_path / att.ATTESTATION_DIR, sealed)
    assert path == tmp_path / "attestations" / "canary" / "580.173.02.json"
    assert att.load(path) == sealed
    assert att.trust_problems(att.load(path), TRUSTED, str(path), "canary") == []
    assert [p.name for p in path.parent.iterdir()] == ["580.173.02.json"]  # no temporary file left behind


def test_load_refuses_a_changed_field(tmp_path: Path) -> None:
    path = att.write(tmp_path, _sealed())
    document = json.loads(path.read_text())
    document["soakStart"] = "2026-11-01T08:00:00Z"  # a longer soak than verify saw
    path.write_text(json.dumps(document))
    with pytest.raises(AttestationError, match=r"580\.173\.02\.json: digest mismatch: the content was changed"):
        att.load(path)


def test_load_refuses_a_changed_check_evidence(tmp_path: Path) -> None:
    path = att.write(tmp_path, _sealed())
    document = json.loads(path.read_text())
    document["checks"][1]["evidence"]["seen"] = 7
    path.write_text(json.dumps(document))
    with pytest.raises(AttestationError, match="digest mismatch"):
        att.load(path)


def test_parse_unverified_reads_what_a_changed_file_states_and_nothing_that_is_no_attestation() -> None:
    document = _sealed().document()
    document["soakStart"] = "2026-11-01T08:00:00Z"  # changed after sealing: the pack refuses it, a reviewer sees it
    stated = att.parse_unverified(json.dumps(document), "580.173.02")
    assert stated.document()["soakStart"] == "2026-11-01T08:00:00Z" and stated.architectures == {"hopper", "turing"}
    with pytest.raises(AttestationError, match="digest mismatch"):
        att.parse(json.dumps(document), "580.173.02")
    with pytest.raises(AttestationError, match="580.173.02: unknown apiVersion 'v0'"):
        att.parse_unverified(json.dumps({**document, "apiVersion": "v0"}), "580.173.02")
    with pytest.raises(AttestationError, match="580.173.02: not JSON"):
        att.parse_unverified("{broken", "580.173.02")


def test_trust_names_an_unsigned_attestation_an_untrusted_key_and_a_bad_signature(tmp_path: Path) -> None:
    unsigned = att.load(att.write(tmp_path / "a", _sealed()))
    (problem,) = att.trust_problems(unsigned, TRUSTED, "attestations/canary/580.173.02.json", "canary")
    assert problem == (
        "attestations/canary/580.173.02.json is unsigned: the gate admits only attestations signed by a trusted "
        "key; re-attest with `gpu-rollout verify --stack canary` with GPU_ROLLOUT_SIGNING_KEY (or --signing-key) set")
    other = att.generate_signing_key()
    foreign = _sealed(signing_key=other)
    (problem,) = att.trust_problems(foreign, TRUSTED, "f.json", "canary")
    assert problem == (f"f.json is signed by key {att.key_id(other.public_key())}, which the gate does not trust "
                       f"(canary-attested.trustedKeys in the pack config lists: {TRUSTED[0].id})")
    assert att.trust_problems(foreign, (), "f.json", "canary")[0].endswith("lists: none)")
    # Several keys at once: rotation adds the new one, revocation removes the old one.
    both = (*TRUSTED, att.trusted_key_of(other.public_key()))
    assert att.trust_problems(foreign, both, "f.json", "canary") == []


def test_a_recomputed_digest_does_not_pass_the_signature(tmp_path: Path) -> None:
    """Whoever edits a signed attestation can fix its digest (it has no key), not its signature."""
    path = att.write(tmp_path, _sealed(signing_key=KEY))
    document = json.loads(path.read_text())
    document["driver"] = "595.91.07"
    forged = att.Attestation.model_validate(document)
    document["digest"] = att.digest_of(forged.content())
    path.write_text(json.dumps(document))
    loaded = att.load(path)
    assert loaded.driver == "595.91.07"  # the digest alone is satisfied
    (problem,) = att.trust_problems(loaded, TRUSTED, "f.json", "canary")
    assert problem == (f"f.json: bad signature by key {TRUSTED[0].id}: changed after it was signed, or not signed "
                       "by that key")
    # Re-signed with a key of the forger's own: intact and signed, but by a key the gate does not trust.
    resigned = _sealed(driver="595.91.07", signing_key=att.generate_signing_key())
    assert "which the gate does not trust" in att.trust_problems(resigned, TRUSTED, "f.json", "canary")[0]


def test_the_retired_format_is_refused_with_the_command_that_re_attests(tmp_path: Path) -> None:
    document = {**_sealed().document(), "apiVersion": "gpu-driver-upgrade.io/attestation/v1"}
    with pytest.raises(att.RetiredFormatError, match=(
            "f.json: apiVersion gpu-driver-upgrade.io/attestation/v1 is no longer read .*re-attest with "
            "`gpu-rollout verify --stack canary` and a signing key \\(GPU_ROLLOUT_SIGNING_KEY\\), which writes "
            "gpu-driver-upgrade.io/attestation/v3")):
        att.parse(json.dumps(document), "f.json")
    # v2 (issue 30): trusted by a name; refused with what it lacks and the command that re-attests.
    v2 = {**_sealed().document(), "apiVersion": "gpu-driver-upgrade.io/attestation/v2"}
    with pytest.raises(att.RetiredFormatError, match=(
            r"f.json: apiVersion gpu-driver-upgrade.io/attestation/v2 is no longer read \(it binds no cluster "
            r"identity .*\): re-attest with `gpu-rollout verify --stack canary`")):
        att.parse(json.dumps(v2), "f.json")
    # verify replaces an attestation of the retired format with a new one.
    path = att.path_for(tmp_path, "canary", "580.173.02")
    path.parent.mkdir()
    path.write_text(json.dumps(document))
    assert att.load(att.write(tmp_path, _sealed(signing_key=KEY))).signature is not None


def test_trusted_keys_are_read_with_errors_naming_the_entry() -> None:
    entry = TRUSTED[0].entry()
    assert att.read_trusted_keys([entry]) == TRUSTED
    cases = [
        ("x", "trustedKeys: must be a list"),
        (["x"], "trustedKeys\\[0\\]: must be an object"),
        ([{**entry, "publicKey": "AAAA"}], "trustedKeys\\[0\\].publicKey: must be a 32-byte Ed25519 public key"),
        ([{**entry, "id": "ed25519:" + "0" * 32}], "trustedKeys\\[0\\].id: 'ed25519:0+' is not the id of that"),
        ([entry, entry], "trustedKeys\\[1\\].id: ed25519:[0-9a-f]+ is listed twice"),
        ([{**entry, "owner": "me"}], "trustedKeys\\[0\\]: unknown key owner"),
    ]
    for value, reason in cases:
        with pytest.raises(ValueError, match=reason):
            att.read_trusted_keys(value)


def test_the_example_key_is_the_one_the_tests_hold() -> None:
    assert att.key_id(example_signing_key().public_key()) == att.EXAMPLE_KEY_ID


def test_signing_keys_are_read_from_pem_and_the_environment() -> None:
    pem = att.private_key_pem(KEY).decode()
    read = att.signing_key_from_environment({att.SIGNING_KEY_ENV: pem})
    assert read is not None and att.key_id(read.public_key()) == TRUSTED[0].id
    assert att.signing_key_from_environment({}) is None
    with pytest.raises(AttestationError, match="GPU_ROLLOUT_SIGNING_KEY: not a PEM private key"):
        att.signing_key_from_environment({att.SIGNING_KEY_ENV: "not a key"})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ("[1, 2]", "not an attestation \\(a JSON object is expected\\)"),
        ('{"apiVersion": "gpu-driver-upgrade.io/attestation/v0"}', "unknown apiVersion 'gpu-driver-upgrade.io/attestation/v0'"),
        ("{}", "unknown apiVersion None"),
    ],
)
def test_load_refuses_malformed_files(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "580.173.02.json"
    path.write_text(text)
    with pytest.raises(AttestationError, match=f"^{path}: {reason}"):
        att.load(path)


def test_load_refuses_a_missing_field_naming_it(tmp_path: Path) -> None:
    path = att.write(tmp_path, _sealed())
    document = json.loads(path.read_text())
    del document["gitCommit"]
    path.write_text(json.dumps(document))
    with pytest.raises(AttestationError, match=r"\.json: gitCommit: Field required$"):
        att.load(path)


def test_load_refuses_a_missing_file_and_non_text(tmp_path: Path) -> None:
    with pytest.raises(AttestationError, match="no such attestation"):
        att.load(tmp_path / "580.173.02.json")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(AttestationError, match="bin.json: not UTF-8 text"):
        att.load(binary)


def test_error_messages_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "580.173.02.json"
    path.write_text('{"apiVersion": "gpu-driver-upgrade.io/attestation/v3", "driver": 580}')
    with pytest.raises(AttestationError) as caught:
        att.load(path)
    assert "\n" not in str(caught.value)
    assert "more)" in str(caught.value)  # the other missing fields are counted, not listed


def test_seal_refuses_a_failed_or_inconclusive_check() -> None:
    with pytest.raises(AttestationError, match="records a passing canary only; not passed: no-new-xid \\(node aks-gpucanary-0: fail\\)"):
        _sealed(checks=[_check(), _check("no-new-xid", status="fail")])
    with pytest.raises(AttestationError, match="dcgm-metrics \\(node aks-gpucanary-0: inconclusive\\)"):
        _sealed(checks=[_check("dcgm-metrics", status="inconclusive")])


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"driver": "latest"}, "driver: 'latest' is not a driver version"),
        ({"soak_end": START - timedelta(hours=1)}, "soakEnd 2026-11-20T07:00:00Z is before soakStart"),
        ({"soak_start": datetime(2026, 11, 20, 8, 0)}, "soakStart: must carry a time zone"),
        ({"checks": []}, "checks: List should have at least 1 item"),
        ({"pools": []}, "pools: List should have at least 1 item"),
        ({"git_commit": "main"}, "gitCommit: String should match pattern"),
        (
            {"checks": [{"id": "gpu-count", "status": "pass", "subject": "n", "message": "", "evidence": {"r": float("nan")}}]},
            "checks.0.evidence: evidence must be plain JSON",
        ),
        ({"pools": [AttestedPool.of("a", "Tesla-T4"), AttestedPool.of("a", "Tesla-T4")]}, "a pool is listed twice: a"),
    ],
)
def test_seal_refuses_bad_fields(overrides: dict[str, Any], reason: str) -> None:
    with pytest.raises(AttestationError, match=reason):
        _sealed(**overrides)


def test_a_run_outside_git_records_its_commit_as_unknown(tmp_path: Path) -> None:
    sealed = _sealed(git_commit=att.UNKNOWN_COMMIT)
    path = att.write(tmp_path, sealed)
    assert att.load(path).gitCommit == "unknown"
    with pytest.raises(AttestationError, match="gitCommit: String should match pattern"):
        _sealed(git_commit="unknown-ish")


def test_times_are_kept_in_utc_whole_seconds(tmp_path: Path) -> None:
    cet = timezone(timedelta(hours=1))
    sealed = _sealed(soak_start=datetime(2026, 11, 20, 9, 0, 0, 123456, tzinfo=cet))
    assert sealed.document()["soakStart"] == "2026-11-20T08:00:00Z"
    assert att.load(att.write(tmp_path, sealed)) == sealed


def test_write_refuses_to_replace_a_newer_attestation(tmp_path: Path) -> None:
    newer = _sealed()
    path = att.write(tmp_path, newer)
    older = _sealed(soak_end=END - timedelta(hours=1))
    with pytest.raises(AttestationError, match="refusing to replace a newer attestation \\(its soak ended 2026-11-27T10:00:00Z"):
        att.write(tmp_path, older)
    assert att.load(path) == newer  # nothing changed
    later = _sealed(soak_end=END + timedelta(hours=24))
    att.write(tmp_path, later)
    assert att.load(path) == later


def test_write_refuses_to_replace_what_it_cannot_read(tmp_path: Path) -> None:
    path = att.path_for(tmp_path, "canary", "580.173.02")
    path.parent.mkdir()
    path.write_text("{broken")
    with pytest.raises(AttestationError, match="refusing to replace an attestation that cannot be read"):
        att.write(tmp_path, _sealed())
    assert path.read_text() == "{broken"


def test_path_for_names_the_canary_stack_and_the_driver_and_nothing_else(tmp_path: Path) -> None:
    assert att.path_for(tmp_path, "canary", "570.195.03") == tmp_path / "canary" / "570.195.03.json"
    assert att.path_for(tmp_path, "acme/gpu-driver-upgrade/eks-canary", "570.195.03") == (
        tmp_path / "eks-canary" / "570.195.03.json")  # a fully qualified stack: its own name
    with pytest.raises(AttestationError, match="'../580' is not a driver version"):
        att.path_for(tmp_path, "canary", "../580")
    for stack in ("..", "org/project/..", "can ary", ""):
        with pytest.raises(AttestationError, match="is not a stack name"):
            att.path_for(tmp_path, stack, "570.195.03")


def test_each_canary_stack_keeps_its_own_attestation_of_a_driver(tmp_path: Path) -> None:
    """Two fleets' canaries attest the same driver: neither file replaces the other."""
    aks, eks = _sealed(), _sealed(stack="organization/gpu-driver-upgrade/eks-canary", soak_end=END + timedelta(hours=1))
    assert att.write(tmp_path, aks) != att.write(tmp_path, eks)
    assert att.load(att.path_for(tmp_path, "canary", "580.173.02")) == aks
    assert att.load(att.path_for(tmp_path, "eks-canary", "580.173.02")) == eks


def test_covers_by_driver_and_architecture() -> None:
    sealed = _sealed()
    assert att.covers(sealed, "580.173.02", "hopper")
    assert att.covers(sealed, "580.173.02", "turing")
    assert not att.covers(sealed, "580.173.02", "ampere")
    assert not att.covers(sealed, "580.173.03", "hopper")


def test_admission_problems_names_every_reason() -> None:
    now = END + timedelta(days=1)
    sealed = _sealed(soak_end=START + timedelta(hours=30))
    assert att.admission_problems(sealed, driver="580.173.02", architectures=["hopper"], min_soak_hours=24, now=now) == []
    assert att.admission_problems(sealed, driver="580.173.03", architectures=["hopper", "ampere"], min_soak_hours=168, now=now) == [
        "it attests driver 580.173.02, not 580.173.03",
        "it covers hopper, turing GPUs, not ampere",
        "its soak lasted 30.0 h, less than promotion.minSoakHours (168 h)",
    ]
    assert att.admission_problems(sealed, driver="580.173.02", architectures=[], min_soak_hours=0, now=START) == [
        "its soak ends in the future (2026-11-21T14:00:00Z)"
    ]
