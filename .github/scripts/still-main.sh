#!/usr/bin/env bash
# Run by each job of deploy.yml before its step: take it only while this run's commit is still main's head. A newer
# run reads the world against the newer head and takes the step from there (the world loses nothing meanwhile).
# Writes current=true|false to $GITHUB_OUTPUT. Needs GH_TOKEN (contents: read).
set -euo pipefail

main="$(gh api "repos/${GITHUB_REPOSITORY}/commits/${GITHUB_REF_NAME}" --jq .sha)"
if [ "$main" != "$GITHUB_SHA" ]; then
  echo "current=false" >> "$GITHUB_OUTPUT"
  echo "- main moved on to ${main:0:12}; the run of that commit takes the fleet's next step" >> "$GITHUB_STEP_SUMMARY"
else
  echo "current=true" >> "$GITHUB_OUTPUT"
fi
