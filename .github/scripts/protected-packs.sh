#!/usr/bin/env bash
# Every protected pack the fleet's next `up`s may enforce: one per commit `gpu-rollout deploy-plan` names (packRef)
# for a stack that differs from what it runs, in DIR/<commit>/ (protected-pack.sh), which `gpu-rollout fleet
# advance --packs DIR` reads. Needs the Pulumi backend's variables.
# Usage: protected-packs.sh DIR
set -euo pipefail

dir="$1"
mkdir -p "$dir"
.venv/bin/gpu-rollout deploy-plan --json > "$RUNNER_TEMP/deploy-plan.json"
for ref in $(jq -r '(.canary + .prod)[].packRef' "$RUNNER_TEMP/deploy-plan.json" | sort -u); do
  .github/scripts/protected-pack.sh "$ref" "$dir/$ref"
done
