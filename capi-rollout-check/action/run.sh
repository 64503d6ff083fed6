#!/usr/bin/env bash
# Runs capi-rollout-check for the GitHub Action in action.yml, with the action's inputs.
# Environment: CHECK (the binary install.sh installed), BASE, HEAD, SETTINGS (may be empty),
# OUTPUT. The exit code is capi-rollout-check's: 1 when a change would be rejected fails the
# step, 2 for unreadable input or settings.
set -euo pipefail

args=(--base "${BASE:?the base input}" --head "${HEAD:?the head input}" --output "${OUTPUT:-github}")
if [ -n "${SETTINGS:-}" ]; then
  args+=(--settings "$SETTINGS")
fi
exec "${CHECK:?the installed binary}" "${args[@]}"
