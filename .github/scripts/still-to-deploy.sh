#!/usr/bin/env bash
# Run by each deploy job of deploy.yml right before its `up`, after waiting for its stack's concurrency group:
# deploy only while this run's commit is still main's head (a newer run plans what differs from that head, and
# its job for this stack runs after this one) and while the stack still differs from what it runs (an earlier
# run may have deployed it meanwhile). Writes deploy=true|false and pack=<commit> to $GITHUB_OUTPUT.
# Needs STACK, GH_TOKEN (contents: read) and the Pulumi backend's variables.
set -euo pipefail

main="$(gh api "repos/${GITHUB_REPOSITORY}/commits/${GITHUB_REF_NAME}" --jq .sha)"
if [ "$main" != "$GITHUB_SHA" ]; then
  echo "deploy=false" >> "$GITHUB_OUTPUT"
  echo "- \`$STACK\`: main moved on to ${main:0:12}; the run of that commit deploys what differs" >> "$GITHUB_STEP_SUMMARY"
  exit 0
fi
.venv/bin/gpu-rollout deploy-plan --stack "$STACK" --json > "$RUNNER_TEMP/still.json"
pack="$(jq -r '(.canary + .prod)[0].packRef // ""' "$RUNNER_TEMP/still.json")"
if [ -z "$pack" ]; then
  echo "deploy=false" >> "$GITHUB_OUTPUT"
  jq -r '.skip[] | "- `\(.stack)`: \(.reason)"' "$RUNNER_TEMP/still.json" >> "$GITHUB_STEP_SUMMARY"
  exit 0
fi
echo "deploy=true" >> "$GITHUB_OUTPUT"
echo "pack=$pack" >> "$GITHUB_OUTPUT"
