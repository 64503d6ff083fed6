#!/usr/bin/env bash
# `make cluster-test` (and `make cluster-soak`: CLUSTER_TEST_RUN=TestSoak): builds the real
# cluster's binaries (build.sh) and the Go test, then runs
# the test in a private network namespace. CAPI's managers bind their webhook servers to every
# address (they have no flag for the host); in the namespace every address is its own loopback,
# so nothing the test starts is reachable from outside. The test needs no network: the Go
# module cache is filled by the builds before it.
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
bin=$(./build.sh)
# CAPI v1.10.10 and the RKE2 and k3s bootstrap providers (TestV1beta1Era, TestProviderWebhooks)
# come from modules of their own under capi/.
for module in v1.10 rke2-v0.20; do capi/build.sh "$module" >/dev/null; done
go vet ./...
go test -count=1 -run 'TestStaging' .
test_binary=../target/cluster-test.test
go test -c -o "$test_binary" .

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
# shellcheck disable=SC2016 # $0 is expanded by the inner shell: the test binary.
CLUSTER_BIN=$bin GOPROXY=off "${netns[@]}" sh -c \
	'ip link set lo up && exec "$0" -test.v -test.timeout "$1" -test.run "$2"' "$test_binary" \
	"${CLUSTER_TEST_TIMEOUT:-30m}" "${CLUSTER_TEST_RUN:-^(TestCluster|TestV1beta1Era|TestProviderWebhooks)$}"
