#!/usr/bin/env bash
# k8s.io/kubernetes maps its staging modules (k8s.io/api, k8s.io/client-go, ...) to ./staging in
# its own go.mod, which a consuming module cannot follow. This writes one
#   replace k8s.io/X => k8s.io/X v0.<minor>.<patch>
# per staging module into ../go.mod, taken from the go.mod of the k8s.io/kubernetes version that
# go.mod requires, so the list is never kept by hand. Run it after changing that version;
# `go test ./...` (staging_test.go) fails when go.mod and the tag disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || true)
[ -n "$version" ] || version=${1:?usage: $0 v1.34.N (when go.mod does not require k8s.io/kubernetes yet)}
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
staging="v0.${version#v1.}"
args=()
while read -r module; do
	args+=("-replace=$module=$module@$staging")
done < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$gomod")
[ "${#args[@]}" -gt 0 ] || { echo "no staging replaces in $gomod" >&2; exit 1; }
go mod edit "${args[@]}"
echo "go.mod: ${#args[@]} staging modules of k8s.io/kubernetes $version at $staging" >&2
