#!/usr/bin/env bash
# Builds the real cluster's binaries from the modules go.mod pins: kube-apiserver,
# kube-controller-manager and kubectl (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3),
# CAPI's core manager, CABPK and clusterctl (sigs.k8s.io/cluster-api). Output:
# ../target/cluster-bin/<first 12 hex of sha256(go.sum, this script, hack/go-modules.sh)>/,
# printed on stdout; reused as long as go.sum (and so every pinned version) and what this script
# builds are unchanged.
#
# `build.sh capi/v1.14` takes CAPI's binaries from that Go module instead (a CAPI release whose
# k8s.io libraries differ from this module's): its folder is keyed by both go.sums and these
# scripts, and holds links to this module's etcd, kube-apiserver, kube-controller-manager and
# kubectl.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=SCRIPTDIR/hack/go-modules.sh
. hack/go-modules.sh
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
capi_module=${1:-.}
if [ "$capi_module" != . ]; then
	kube=$(./build.sh)
	key=$(cat go.sum "$capi_module/go.sum" build.sh hack/go-modules.sh | sha256sum | cut -c1-12)
else
	key=$(cat go.sum build.sh hack/go-modules.sh | sha256sum | cut -c1-12)
fi
out=$(bin_root)/$key
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
mkdir -p "$out"

date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
build() { go_build "$1" "$2" "$3" "$out"; } # name package ldflags
if [ "$capi_module" = . ]; then
	k8s=$(pinned_version k8s.io/kubernetes)
	# kube-apiserver reports the version baked in by these ldflags (a plain `go build` reports
	# v0.0.0-master, which CAPI's start-up check refuses); kube-controller-manager and kubectl too.
	kv=k8s.io/component-base/version
	minor=${k8s#v1.}; minor=${minor%%.*}
	k8s_ldflags="-s -w -X $kv.gitVersion=$k8s -X $kv.gitMajor=1 -X $kv.gitMinor=$minor \
	  -X $kv.gitTreeState=clean -X $kv.buildDate=$date \
	  -X k8s.io/client-go/pkg/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitMajor=1 \
	  -X k8s.io/client-go/pkg/version.gitMinor=$minor"
	build etcd go.etcd.io/etcd/server/v3 "-s -w"
	build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
	build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
	build kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
else
	for b in etcd kube-apiserver kube-controller-manager kubectl; do ln -f "$kube/$b" "$out/$b"; done
	cd "$capi_module"
fi

capi=$(pinned_version sigs.k8s.io/cluster-api)
cv=sigs.k8s.io/cluster-api/version
capi_ldflags="-s -w -X $cv.gitVersion=$capi -X $cv.gitMajor=1 -X $cv.gitTreeState=clean -X $cv.buildDate=$date"
# The core manager: the module's root package in v1.12, sigs.k8s.io/cluster-api/core in v1.14.
core=sigs.k8s.io/cluster-api
capi_dir=$(module_dir sigs.k8s.io/cluster-api)
if [ -f "$capi_dir/core/main.go" ]; then core=sigs.k8s.io/cluster-api/core; fi
build capi-manager "$core" "$capi_ldflags"
build capi-kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm "$capi_ldflags"
build clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl "$capi_ldflags"
touch "$out/.complete"
echo "$out"
