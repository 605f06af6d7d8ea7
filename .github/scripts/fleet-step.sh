#!/usr/bin/env bash
# One step of the fleet's train (docs/fleet.md): `gpu-rollout fleet advance --yes --stage STAGE`, with the protected
# packs and the stacks' kubeconfigs, its JSON kept, the prod `up`s it withheld written to $GITHUB_OUTPUT (withheld,
# a JSON list) and what it did to the step summary. Exits as advance exits: 1 when the train is halted (now or
# before), an `up` failed, or another advance holds the lease.
# Usage: fleet-step.sh STAGE
set -euo pipefail

stage="$1"
status=0
.venv/bin/gpu-rollout fleet advance --yes --stage "$stage" --json --packs "$RUNNER_TEMP/packs" \
  --kubeconfig-dir "$RUNNER_TEMP/kubeconfigs" > "$RUNNER_TEMP/step.json" || status=$?
if jq -e . "$RUNNER_TEMP/step.json" >/dev/null 2>&1; then
  echo "withheld=$(jq -c '.withheld // []' "$RUNNER_TEMP/step.json")" >> "$GITHUB_OUTPUT"
  {
    echo "### Fleet step ($stage) for $GITHUB_SHA"
    jq -r '"- next: \(.next)"' "$RUNNER_TEMP/step.json"
    jq -r '.ups[]? | "- up `\(.stack)`: \(if .ok then "done" else "FAILED" end): \(.detail)"' "$RUNNER_TEMP/step.json"
    jq -r '.withheld[]? | "- `\(.)`: its prod `up` waits for the production environment"' "$RUNNER_TEMP/step.json"
    jq -r '.blocked[]? | "- \(.)"' "$RUNNER_TEMP/step.json"
    jq -r 'if .halt then "- HALTED: \(.halt.kind) in `\(.halt.stack)`: \(.halt.message)" else empty end' "$RUNNER_TEMP/step.json"
  } >> "$GITHUB_STEP_SUMMARY"
else
  echo "withheld=[]" >> "$GITHUB_OUTPUT"
fi
exit "$status"
