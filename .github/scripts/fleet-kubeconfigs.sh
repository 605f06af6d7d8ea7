#!/usr/bin/env bash
# One kubeconfig per AKS or EKS stack of the fleet, DIR/<stack>, which `gpu-rollout fleet --kubeconfig-dir DIR`
# reads (the cloud logins are done: Azure/login, configure-aws-credentials). An existing cluster's stack needs none
# here: its context is in ~/.kube/config (the EXISTING_KUBECONFIG secret), where the program's provider reads it too.
# AKS: kubelogin's device-code login, which would wait for a person, is converted to the Azure CLI's session.
# A cluster whose kubeconfig cannot be had stops only what depends on it: it is named (a warning and the step
# summary) and the others are written; `fleet advance` then reports that cluster unread, acts on the rest, and fails.
# Usage: fleet-kubeconfigs.sh DIR
set -euo pipefail

dir="$1"
mkdir -p "$dir"
umask 077
.venv/bin/gpu-rollout stacks --json > "$RUNNER_TEMP/stacks.json"
missing=()
while read -r entry; do
  stack="$(jq -r .stack <<<"$entry")"
  status=0
  case "$(jq -r .cloud <<<"$entry")" in
    aks)
      { az aks get-credentials --resource-group "$(jq -r .aksResourceGroup <<<"$entry")" \
          --name "$(jq -r .aksClusterName <<<"$entry")" --file "$dir/$stack" --overwrite-existing &&
        kubelogin convert-kubeconfig --login azurecli --kubeconfig "$dir/$stack"; } || status=$?
      ;;
    eks)
      aws eks update-kubeconfig --name "$(jq -r .eksClusterName <<<"$entry")" \
        --region "$(jq -r .eksRegion <<<"$entry")" --kubeconfig "$dir/$stack" || status=$?
      ;;
  esac
  if [ "$status" -ne 0 ]; then
    rm -f "$dir/$stack"
    missing+=("$stack")
    echo "::warning::no kubeconfig for stack $stack (exit $status): its cluster is reported unread by fleet advance"
  fi
done < <(jq -c '.stacks[] | select(.cloud == "aks" or .cloud == "eks")' "$RUNNER_TEMP/stacks.json")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "- no kubeconfig for: ${missing[*]} (see the warnings); the other clusters are read and acted on" \
    >> "$GITHUB_STEP_SUMMARY"
fi
