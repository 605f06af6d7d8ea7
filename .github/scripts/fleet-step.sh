#!/usr/bin/env bash
# One step of the fleet's train (docs/fleet.md): `gpu-rollout fleet advance --yes --stage STAGE`, with the protected
# packs and the stacks' kubeconfigs, its JSON kept, the prod `up`s it withheld written to $GITHUB_OUTPUT (withheld,
# a JSON list of stacks; approval, the plan a person approves: each stack's config digest and pack commit) and what
# it did to the step summary. With $APPROVAL (the prod job: the step job's approval output) the step brings up
# exactly the approved `up`s or nothing (--expect). A step refused because another `fleet advance` holds the
# train's Lease is tried again for up to $LEASE_WAIT seconds (default 900): the approved job waits for the step job
# instead of failing. Exits as advance exits: 1 when the train is halted (now or before), an `up` failed, a cluster
# could not be read, the `up`s are not the approved ones, or the Lease stayed held.
# Usage: fleet-step.sh STAGE
set -euo pipefail

stage="$1"
args=(fleet advance --yes --stage "$stage" --json --packs "$RUNNER_TEMP/packs" --kubeconfig-dir "$RUNNER_TEMP/kubeconfigs")
if [ -n "${APPROVAL:-}" ]; then
  printf '%s\n' "$APPROVAL" > "$RUNNER_TEMP/approval.json"
  args+=(--expect "$RUNNER_TEMP/approval.json")
fi
deadline=$((SECONDS + ${LEASE_WAIT:-900}))
while :; do
  status=0
  .venv/bin/gpu-rollout "${args[@]}" > "$RUNNER_TEMP/step.json" || status=$?
  if [ "$status" -ne 0 ] && [ "$SECONDS" -lt "$deadline" ] &&
      jq -e '.error.message // "" | contains("holds the train'"'"'s lease")' "$RUNNER_TEMP/step.json" >/dev/null 2>&1; then
    echo "another fleet advance holds the train's lease; trying again in ${LEASE_RETRY:-30} s"
    sleep "${LEASE_RETRY:-30}"
    continue
  fi
  break
done
if jq -e '.applies' "$RUNNER_TEMP/step.json" >/dev/null 2>&1; then
  echo "withheld=$(jq -c '.withheld // []' "$RUNNER_TEMP/step.json")" >> "$GITHUB_OUTPUT"
  echo "approval=$(jq -c '.approval // null' "$RUNNER_TEMP/step.json")" >> "$GITHUB_OUTPUT"
  {
    echo "### Fleet step ($stage) for $GITHUB_SHA"
    jq -r '"- next: \(.next)"' "$RUNNER_TEMP/step.json"
    jq -r '.ups[]? | "- up `\(.stack)`: \(if .ok then "done" else "FAILED" end): \(.detail)"' "$RUNNER_TEMP/step.json"
    jq -r '.approval.ups[]? | "- `\(.stack)`: its prod `up` waits for the production environment (config \(.configDigest), pack \(.packRef))"' "$RUNNER_TEMP/step.json"
    jq -r '.blocked[]? | "- \(.)"' "$RUNNER_TEMP/step.json"
    jq -r '.unread[]? | "- NOT READ: \(.)"' "$RUNNER_TEMP/step.json"
    jq -r 'if .halt then "- HALTED: \(.halt.kind) in `\(.halt.stack)`: \(.halt.message)" else empty end' "$RUNNER_TEMP/step.json"
    jq -r 'if .halted then "- halted since \(.halted.at): \(.halted.cause)" else empty end' "$RUNNER_TEMP/step.json"
  } >> "$GITHUB_STEP_SUMMARY"
else
  echo "withheld=[]" >> "$GITHUB_OUTPUT"
  echo "approval=null" >> "$GITHUB_OUTPUT"
fi
exit "$status"
