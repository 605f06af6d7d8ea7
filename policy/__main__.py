"""The CrossGuard pack: `pulumi preview --policy-pack policy --policy-pack-config policy/prod.json`, or
published from the folder `make policy-pack` assembles (docs/policies.md, Publishing the pack).

Only assembles the pack; constructing PolicyPack starts the analyzer server and blocks.
"""

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack

# The engine runs the pack's folder (runpy.run_path), which puts that folder first on sys.path. In the
# checkout that folder is policy/ and the packages the rules import (policy, spec) live one level up; in
# the published pack (policy/bundle.py) this file sits beside them.
_HERE = Path(__file__).resolve().parent
if not (_HERE / "policy" / "__init__.py").is_file():
    sys.path.insert(0, str(_HERE.parent))

from policy.pack import PACK_NAME, build_policies

PolicyPack(
    name=PACK_NAME,
    policies=build_policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description="Every pre-change check of the GPU driver upgrade runbook as a gate.",
)
