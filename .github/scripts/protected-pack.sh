#!/usr/bin/env bash
# The policy pack of one protected commit, as `pulumi policy publish` takes it (make policy-pack, policy/bundle.py),
# from that commit's own code, with a virtualenv of its own, and that commit's stage configs:
#   OUT/pack/           the pack folder (--policy-pack)
#   OUT/<stage>.json    policy/canary.json and policy/prod.json of the commit (--policy-pack-config)
# The commit is the one `gpu-rollout deploy-plan` names (packRef): main before the earliest change the pack judges
# that is not deployed yet, never the commit being deployed (docs/cicd.md). Needs a checkout with that commit
# (fetch-depth: 0) and the project's .venv.
# Usage: protected-pack.sh COMMIT OUT
set -euo pipefail

ref="$1"
out="$2"
base="$RUNNER_TEMP/protected-base-$ref"
rm -rf "$out" "$base"
mkdir -p "$out"
git worktree add --force --detach "$base" "$ref" >/dev/null
(cd "$base" && "$GITHUB_WORKSPACE/.venv/bin/python" -m policy.bundle "$out/pack")
for config in "$base"/policy/*.json; do
  cp "$config" "$out/"
done
python3 -m venv "$out/pack/venv"
"$out/pack/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$out/pack/requirements.txt"
git worktree remove --force "$base"
echo "- policy pack and stage configs of $ref (a protected base)" >> "$GITHUB_STEP_SUMMARY"
