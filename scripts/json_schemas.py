"""Write docs/schemas/<verb>.schema.json for every verb's --json document (rollout/schemas.py); `make docs`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rollout.schemas import DOCUMENTS, schema

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def rendered() -> dict[str, str]:
    """File name -> text, for every verb's document."""
    return {f"{verb}.schema.json": json.dumps(schema(verb), indent=2, sort_keys=True) + "\n" for verb in DOCUMENTS}


def main() -> int:
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (SCHEMA_DIR / name).write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {len(DOCUMENTS)} verb schemas to {SCHEMA_DIR}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
