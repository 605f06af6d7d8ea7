#!/usr/bin/env bash
# Opens, or updates, the one issue that records the quarterly review of pinned versions: the open issue labelled
# quarterly-review with this title gets the new report (the file $1) as its body, or is opened with it. Through the
# REST API at $GITHUB_API_URL with $GH_TOKEN (the job's token: issues write), for $GITHUB_REPOSITORY.
set -euo pipefail

report="$1"
title="Quarterly review: pinned GPU driver, CUDA, operator and Fabric Manager versions"
label="quarterly-review"
api="${GITHUB_API_URL:-https://api.github.com}/repos/${GITHUB_REPOSITORY}"
headers=(-H "Authorization: Bearer ${GH_TOKEN}" -H "Accept: application/vnd.github+json"
         -H "X-GitHub-Api-Version: 2022-11-28")

number="$(curl -fsS "${headers[@]}" "$api/issues?state=open&labels=$label&per_page=100" |
  jq -r --arg title "$title" '[.[] | select(.title == $title and (has("pull_request") | not))][0].number // empty')"
body="$(jq -Rs --arg title "$title" --arg name "$label" '{title: $title, body: ., labels: [$name]}' < "$report")"
if [ -n "$number" ]; then
  curl -fsS -X PATCH "${headers[@]}" "$api/issues/$number" -d "$body" > /dev/null
  echo "updated issue #$number"
else
  number="$(curl -fsS -X POST "${headers[@]}" "$api/issues" -d "$body" | jq -r .number)"
  echo "opened issue #$number"
fi
