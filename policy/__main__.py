"""The CrossGuard pack: `pulumi preview --policy-pack policy --policy-pack-config policy/prod.json`.

Only assembles the pack; constructing PolicyPack starts the analyzer server and blocks.
"""

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack

# The engine runs this file by path with policy/ on sys.path; the rules import the project's packages.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policy.pack import PACK_NAME, build_policies

PolicyPack(
    name=PACK_NAME,
    policies=build_policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description="Every pre-change check of the GPU driver upgrade runbook as a gate.",
)
