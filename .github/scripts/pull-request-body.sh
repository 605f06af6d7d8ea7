#!/usr/bin/env bash
# The text of a pull request soak.yml or rollback.yml opens, on stdout: what it carries, and whether its checks
# run by themselves. A pull request opened with the default GITHUB_TOKEN starts no workflow, so required checks
# never start on it; one opened with a GitHub App's token or a fine-grained token does.
# Needs KIND (attestation|rollback), STACK, APP_TOKEN and PR_TOKEN (empty where not configured), and for a
# rollback TO_VERSION and REASON.
set -euo pipefail

case "${KIND:-attestation}" in
  attestation)
    echo "Written by \`gpu-rollout verify --stack $STACK\` in the soak workflow, once the canary's soak lasted the"
    echo "\`promotion.minSoakHours\` of every prod stack promoted from it, judged over the whole soak."
    echo
    echo "Merging it lets a prod change that moves to this driver through the \`canary-attested\` gate; the gate"
    echo "checks its digest (and signature), the GPU architectures it covers and its soak again."
    ;;
  rollback)
    echo "Written by \`gpu-rollout rollback --stack $STACK\` in the rollback workflow: the stack file with the"
    echo "config the stack runs since the rollback to update ${TO_VERSION:-(the newest earlier one)} (reason: $REASON)."
    echo
    echo "Until this merges, main's stack file holds the config rolled back from, and the deploy workflow leaves"
    echo "this stack alone. Merge it (or revert the parts that should go forward again) to hand the stack back"
    echo "to the deploy workflow."
    ;;
esac
echo
if [ -n "$APP_TOKEN" ]; then
  echo "Opened with the GitHub App's token: the required checks run on it as on any pull request."
elif [ -n "$PR_TOKEN" ]; then
  echo "Opened with the fine-grained token ATTESTATION_PR_TOKEN: the required checks run on it as on any pull request."
else
  echo "**The required checks did not start by themselves.** This pull request was opened with the workflow's"
  echo "default GITHUB_TOKEN, and GitHub starts no workflow for what that token does. Start them by hand (close"
  echo "and reopen the pull request, or push a commit to its branch), or configure a GitHub App"
  echo "(ATTESTATION_APP_CLIENT_ID, ATTESTATION_APP_PRIVATE_KEY) or a fine-grained token (ATTESTATION_PR_TOKEN)"
  echo "so that they start (docs/cicd.md)."
fi
