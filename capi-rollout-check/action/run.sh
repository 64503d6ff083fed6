#!/usr/bin/env bash
# Runs capi-rollout-check for the GitHub Action in action.yml, with the action's inputs.
# Environment: CHECK (the binary install.sh installed), BASE and HEAD (both, or neither),
# SETTINGS (may be empty), POLICIES (policy manifests for `capi-rollout-check settings`: paths
# or globs separated by spaces or newlines; may be empty), OUTPUT. The exit code is
# capi-rollout-check's, the highest of the two runs: 1 when a change would be rejected or a
# policy's settings are invalid fails the step, 2 for unreadable input or settings.
set -euo pipefail

check=${CHECK:?the installed binary}
output=${OUTPUT:-github}
base=${BASE:-}
head=${HEAD:-}
if { [ -n "$base" ] && [ -z "$head" ]; } || { [ -z "$base" ] && [ -n "$head" ]; }; then
  echo "::error title=capi-rollout-check::base and head go together: give both, or neither (policies only)"
  exit 2
fi
if [ -z "$base" ] && [ -z "${POLICIES:-}" ]; then
  echo "::error title=capi-rollout-check::nothing to check: give base and head, or policies, or all three"
  exit 2
fi

status=0
if [ -n "${POLICIES:-}" ]; then
  files=()
  shopt -s nullglob globstar
  # Split on spaces and newlines, expand the globs (a literal path is kept, so that a missing
  # file is named by the check; a glob matching nothing is dropped).
  IFS=$' \t\n' read -r -d '' -a patterns <<<"$POLICIES" || true
  for pattern in "${patterns[@]}"; do
    case $pattern in
      *[*?[]*)
        # shellcheck disable=SC2206 # the glob is meant to expand
        matches=($pattern)
        files+=("${matches[@]}")
        ;;
      *) files+=("$pattern") ;;
    esac
  done
  shopt -u nullglob globstar
  if [ ${#files[@]} -eq 0 ]; then
    echo "::notice title=capi-rollout-check settings::no file matches policies: ${POLICIES//$'\n'/ }"
  else
    "$check" settings --output "$output" -- "${files[@]}" || status=$?
  fi
fi

if [ -n "$base" ]; then
  args=(--base "$base" --head "$head" --output "$output")
  if [ -n "${SETTINGS:-}" ]; then
    args+=(--settings "$SETTINGS")
  fi
  code=0
  "$check" "${args[@]}" || code=$?
  if [ "$code" -gt "$status" ]; then status=$code; fi
fi
exit "$status"
