"""`gpu-rollout keygen --out DIR`: an Ed25519 key pair for signing canary attestations (docs/validation.md, Keys).

Writes ``DIR/attestation-signing-key.pem`` (the private key, PKCS#8 PEM, mode 0600: the CI secret
``GPU_ROLLOUT_SIGNING_KEY`` of the canary's verify job) and ``DIR/attestation-signing-key.pub.json`` (the
``trustedKeys`` entry), never over an existing file, and prints the entry to paste into ``policy/prod.json``
(``canary-attested.trustedKeys``). Exit 0 when both were written; 2 when a file exists or cannot be written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rollout.console import say
from refusals.errors import InvalidInput
from refusals.exits import Exit
from engine_contracts import attestation

PRIVATE_FILE = "attestation-signing-key.pem"
ENTRY_FILE = "attestation-signing-key.pub.json"


def execute(out: Path, comment: str) -> Exit:
    private, entry_file = out / PRIVATE_FILE, out / ENTRY_FILE
    for path in (private, entry_file):
        if path.exists():
            raise InvalidInput(f"--out {out}: {path.name} exists; refusing to replace a key (move it away first)")
    key = attestation.generate_signing_key()
    entry = attestation.trusted_key_of(key.public_key(), comment).entry()
    text = json.dumps(entry, indent=2) + "\n"
    try:
        out.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(attestation.private_key_pem(key))
        entry_file.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"--out {out}: cannot write: {exc.strerror}") from None
    sys.stdout.write(text)
    say(f"private key: {private} (store it as the CI secret {attestation.SIGNING_KEY_ENV} of the canary's verify, "
        "then delete this copy); add the entry above to canary-attested.trustedKeys in policy/prod.json")
    return Exit.OK
