"""Write the config reference from the model: docs/config.md and docs/schemas/stack-config.schema.json.

    .venv/bin/python -m scripts.config_docs        # make docs

tests/fleetspec/test_config_reference.py fails when either committed file differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from fleetspec import reference

PROJECT_DIR = Path(__file__).resolve().parent.parent


def main() -> None:
    for relative, text in ((reference.CONFIG_DOC, reference.config_markdown()),
                           (reference.STACK_SCHEMA, reference.stack_schema_json())):
        path = PROJECT_DIR / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {relative}")


if __name__ == "__main__":
    main()
