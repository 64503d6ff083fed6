#!/usr/bin/env bash
# `make cluster-test` (and `make cluster-soak`: CLUSTER_TEST_RUN=TestSoak): builds the real
# cluster's binaries (build.sh) and the Go test, then runs the test in a private network
# namespace. CAPI's managers bind their webhook servers to every
# address (they have no flag for the host); in the namespace every address is its own loopback,
# so nothing the test starts is reachable from outside. The test needs no network: the Go
# module cache is filled by the builds before it.
#
# It runs once for each CAPI release below, each a Go module pinning it (this one: v1.12;
# capi/v1.14: CAPI v1.14, whose k8s.io libraries are newer than this module's), with its own
# managers and clusterctl and its logs in ../target/cluster-test/<version>/.
# CAPI_VERSIONS="v1.14.2" runs only the releases it names.
set -euo pipefail
cd "$(dirname "$0")"
# One run at a time per checkout: the runs share the test binary, the managers' folder and the
# artifacts in ../target.
mkdir -p ../target
exec 9>../target/cluster-test.lock
if ! flock -n 9; then
	echo "cluster-test: another run in this checkout holds ../target/cluster-test.lock; waiting" >&2
	flock 9
fi
# shellcheck source=SCRIPTDIR/hack/go-modules.sh
. hack/go-modules.sh
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
# CAPI_MODULES=. (as make cluster-soak sets) runs this module's release only.
read -r -a capi_modules <<<"${CAPI_MODULES:-. capi/v1.14}"
# CAPI v1.10.10 and the RKE2, k3s and Talos bootstrap providers (TestV1beta1Era,
# TestProviderWebhooks, TestRKE2DefaulterNumbers, TestSoakProviders) come from modules of their
# own, built by capi/build.sh: CAPI_EXTRA_MODULES names them (make cluster-soak: v1.10 only).
read -r -a extra_modules <<<"${CAPI_EXTRA_MODULES-v1.10 rke2-v0.20 k3s-v0.4 talos-v0.6}"
for module in "${extra_modules[@]}"; do capi/build.sh "$module" >/dev/null; done
go vet ./...
go test -count=1 -run '^(TestStaging.*|TestBuildStepsOnAnEmptyModuleCache|TestStorageFacts.*)$' .
# The harness's own tests (framework/*_test.go): no cluster.
go test -count=1 ./framework
# testdata/storage-facts.txt (../docs/stored-versions.md): each module checks the lines of the
# releases it pins against their Go types, this one's above; storagefacts/ is the reflection
# they share. As capi/build.sh builds (CGO_ENABLED=0, -trimpath), so its compiled packages are
# reused.
(cd storagefacts && go test -count=1 .)
for module in capi/v1.14 capi/v1.10 capi/rke2-v0.20 capi/k3s-v0.4; do
	(cd "$module" && CGO_ENABLED=0 go test -trimpath -count=1 -run '^TestStorageFacts' .)
done
test_binary=../target/cluster-test.test
go test -c -o "$test_binary" .
# A pattern whose test name (before the first /) matches no test would run nothing and pass.
if [ -n "${CLUSTER_TEST_RUN:-}" ] && [ -z "$("$test_binary" -test.list "${CLUSTER_TEST_RUN%%/*}")" ]; then
	echo "cluster-test: CLUSTER_TEST_RUN=$CLUSTER_TEST_RUN names no test" >&2
	exit 1
fi
# TestKubewardenStack renders Kubewarden's charts with Helm, a Go module of its own
# (kubewarden/: its k8s.io libraries are not this module's, and its go.sum keys no binary of
# build.sh); built only when the charts are given.
if [ -n "${KUBEWARDEN_CHARTS:-}" ]; then
	KUBEWARDEN_RENDER=$(cd ../target && pwd)/kubewarden-render
	(cd kubewarden && go build -o "$KUBEWARDEN_RENDER" .)
	export KUBEWARDEN_RENDER
fi

if unshare --net true 2>/dev/null; then
	netns=(unshare --net)
elif unshare --net --map-root-user true 2>/dev/null; then
	netns=(unshare --net --map-root-user)
else
	echo "cluster-test: cannot make a private network namespace (unshare --net needs root or" \
		"unprivileged user namespaces); CAPI's webhook servers would listen on every address" >&2
	exit 1
fi
command -v ip >/dev/null || { echo "cluster-test: no ip command: apt-get install iproute2" >&2; exit 1; }

# run_tests PATTERN [VAR=value...]: the compiled test's PATTERN in the private network
# namespace, with those variables set. The namespace's loopback also carries the Pods' network
# (CLUSTER_TEST_POD_NETWORK: the node's address and prefix; on lo every address of the prefix
# is local): TestKubewardenStack's kubelet stand-in gives each Pod one of them, as a Pod's own
# network namespace would have one (kube-apiserver reaches a webhook Service's endpoints, which
# may not be in 127.0.0.0/8).
pod_network=10.244.0.1/24
run_tests() {
	local pattern=$1
	shift
	# shellcheck disable=SC2016 # $0 is expanded by the inner shell: the test binary.
	env "$@" GOPROXY=off CLUSTER_TEST_POD_NETWORK="$pod_network" "${netns[@]}" sh -c \
		'ip link set lo up && ip addr add "$CLUSTER_TEST_POD_NETWORK" dev lo &&
		exec "$0" -test.v -test.timeout "$1" -test.run "$2"' "$test_binary" \
		"${CLUSTER_TEST_TIMEOUT:-30m}" "$pattern"
}

failed=()
for module in "${capi_modules[@]}"; do
	if [[ "${CLUSTER_TEST_RUN:-}" == *TestKubewardenStack* ]]; then break; fi # once, below
	version=$(cd "$module" && pinned_version sigs.k8s.io/cluster-api)
	if [ -n "${CAPI_VERSIONS:-}" ] && [[ " $CAPI_VERSIONS " != *" $version "* ]]; then continue; fi
	bin=$(./build.sh "$module")
	dir=$(cd "$module" && module_dir sigs.k8s.io/cluster-api)
	echo "cluster-test: CAPI $version ($module), binaries in $bin" >&2
	run_tests "${CLUSTER_TEST_RUN:-TestCluster}" CLUSTER_BIN="$bin" CAPI_MODULE_DIR="$dir" CAPI_VERSION="$version" \
		CLUSTER_TEST_ARTIFACTS="${CLUSTER_TEST_ARTIFACTS:-../target/cluster-test}/$version" ||
		failed+=("${CLUSTER_TEST_RUN:-TestCluster} on CAPI $version (logs in ${CLUSTER_TEST_ARTIFACTS:-../target/cluster-test}/$version/)")
done
# TestV1beta1Era, TestProviderWebhooks and TestRKE2DefaulterNumbers install their own CAPI
# (v1.10.10) and providers: they run once, with this module's etcd, kube-apiserver and kubectl,
# logs in ../target/cluster-test/<test>/. One alone: CLUSTER_TEST_RUN=TestV1beta1Era CAPI_VERSIONS=v1.12.10.
# One step of TestCluster (cluster-test/README.md, "Layout, and one case alone"):
# CLUSTER_TEST_RUN='^TestCluster$/^reapply:' CAPI_VERSIONS=v1.12.10.
if [ -z "${CLUSTER_TEST_RUN:-}" ] && [ -z "${CAPI_MODULES:-}" ]; then
	run_tests '^(TestV1beta1Era|TestProviderWebhooks|TestRKE2DefaulterNumbers)$' CLUSTER_BIN="$(./build.sh .)" \
		CLUSTER_TEST_ARTIFACTS="${CLUSTER_TEST_ARTIFACTS:-../target/cluster-test}" ||
		failed+=("TestV1beta1Era, TestProviderWebhooks or TestRKE2DefaulterNumbers on CAPI v1.10.10 (logs in ${CLUSTER_TEST_ARTIFACTS:-../target/cluster-test}/<test>/)")
fi
# TestKubewardenStack (kubewarden_test.go): Kubewarden installed from its charts in front of
# CAPI v1.12.10, once, logs in ../target/cluster-test/TestKubewardenStack/; it skips, saying
# so, without Kubewarden's tools (KUBEWARDEN_CONTROLLER, POLICY_SERVER, KWCTL, KUBEWARDEN_CHARTS).
# One step of it: CLUSTER_TEST_RUN='^TestKubewardenStack$/^protect:' (the steps it needs run first).
if { [ -z "${CLUSTER_TEST_RUN:-}" ] && [ -z "${CAPI_MODULES:-}" ]; } || [[ "${CLUSTER_TEST_RUN:-}" == *TestKubewardenStack* ]]; then
	stack_run=${CLUSTER_TEST_RUN:-^TestKubewardenStack$}
	run_tests "$stack_run" CLUSTER_BIN="$(./build.sh .)" \
		CLUSTER_TEST_ARTIFACTS="${CLUSTER_TEST_ARTIFACTS:-../target/cluster-test}" ||
		failed+=("$stack_run on CAPI v1.12.10 (logs in ${CLUSTER_TEST_ARTIFACTS:-../target/cluster-test}/TestKubewardenStack/)")
fi
if [ ${#failed[@]} -gt 0 ]; then
	printf 'cluster-test: failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
