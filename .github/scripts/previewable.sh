#!/usr/bin/env bash
# Whether the preview job runs the engine preview of a stack (configured=true|false in $GITHUB_OUTPUT), and why
# not in the job summary. Not without a backend. Not for a stack whose secrets a passphrase decrypts
# (`encryptionsalt` or `secretsprovider: passphrase` in its stack file): the passphrase decrypts the same stacks
# the deploy writes, so it is never handed to a pull request's code; such a stack gets the offline diff only.
# This decides what is shown, not what is safe: the preview environment holds no passphrase either way.
set -euo pipefail
backend="$1"
stack="$2"
why=""
if [ -z "$backend" ]; then
  why="No Pulumi backend is configured (repository variable PULUMI_BACKEND_URL): the engine preview of $stack did not run; the offline diff and the policy report of gpu-rollout plan did."
elif grep -Eqs '^(encryptionsalt:|secretsprovider:[[:space:]]*"?passphrase)' "Pulumi.$stack.yaml" "Pulumi.$stack.yml"; then
  why="The secrets of $stack are decrypted with a passphrase, which decrypts the same stacks the deploy writes and is never given to a pull request: no engine preview on pull requests (docs/cicd.md); the offline diff ran."
fi
if [ -z "$why" ]; then
  echo "configured=true" >> "$GITHUB_OUTPUT"
else
  echo "configured=false" >> "$GITHUB_OUTPUT"
  echo "$why" >> "$GITHUB_STEP_SUMMARY"
fi
