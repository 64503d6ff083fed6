# shellcheck shell=bash
# Sourced by build.sh, capi/build.sh and run.sh: what a step reads of a Go module that the
# module in the current folder pins. Nothing here may assume the module cache already holds a
# module (a new machine's first build): `go list -m -f {{.Dir}}` prints nothing for a module
# not downloaded yet, so a folder is only ever read from `go mod download -json`, which fetches
# the module first. TestBuildStepsOnAnEmptyModuleCache (staging_test.go) runs these steps
# against an empty GOMODCACHE.

# pinned_version MODULE: the version of MODULE in the build list (go.mod and its requirements).
pinned_version() { go list -m -f '{{.Version}}' "$1"; }

# module_dir MODULE: the folder of MODULE at its pinned version, downloaded first.
module_dir() {
	local version dir
	version=$(pinned_version "$1")
	dir=$(go mod download -json "$1@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	if [ ! -d "$dir" ]; then
		echo "cluster-test: go mod download $1@$version named no folder" >&2
		return 1
	fi
	echo "$dir"
}

# The binaries' folder, ../target/cluster-bin of the repository; CLUSTER_BIN_ROOT moves it.
bin_root() {
	echo "${CLUSTER_BIN_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/cluster-bin}"
}

# go_build NAME PACKAGE LDFLAGS OUT: builds PACKAGE into OUT/NAME. With
# CLUSTER_BUILD_RESOLVE_ONLY=1 it compiles nothing: OUT/NAME then holds the package's import
# path, found as the build would find it (its module downloaded, its dependencies not).
go_build() {
	if [ "${CLUSTER_BUILD_RESOLVE_ONLY:-}" = 1 ]; then
		go list -find -f '{{.ImportPath}}' "$2" >"$4/$1"
		return
	fi
	echo "cluster-test: building $1 ($2)" >&2
	go build -trimpath -ldflags "$3" -o "$4/$1" "$2"
}
