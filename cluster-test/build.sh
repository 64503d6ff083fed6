#!/usr/bin/env bash
# Builds the real cluster's binaries from the modules go.mod pins: kube-apiserver and kubectl
# (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3), CAPI's core manager, CABPK and
# clusterctl (sigs.k8s.io/cluster-api). Output: ../target/cluster-bin/<first 12 hex of
# sha256(go.sum)>/, printed on stdout; reused as long as go.sum (and so every pinned version) is unchanged.
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
key=$(sha256sum go.sum | cut -c1-12)
out=$(cd .. && pwd)/target/cluster-bin/$key
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
mkdir -p "$out"

version() { go list -m -f '{{.Version}}' "$1"; }
k8s=$(version k8s.io/kubernetes)
capi=$(version sigs.k8s.io/cluster-api)
# kube-apiserver reports the version baked in by these ldflags (a plain `go build` reports
# v0.0.0-master, which CAPI's start-up check refuses); kubectl too.
kv=k8s.io/component-base/version
minor=${k8s#v1.}; minor=${minor%%.*}
date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
k8s_ldflags="-s -w -X $kv.gitVersion=$k8s -X $kv.gitMajor=1 -X $kv.gitMinor=$minor \
  -X $kv.gitTreeState=clean -X $kv.buildDate=$date \
  -X k8s.io/client-go/pkg/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitMajor=1 \
  -X k8s.io/client-go/pkg/version.gitMinor=$minor"
cv=sigs.k8s.io/cluster-api/version
capi_ldflags="-s -w -X $cv.gitVersion=$capi -X $cv.gitMajor=1 -X $cv.gitTreeState=clean -X $cv.buildDate=$date"

build() { # name package ldflags
	echo "cluster-test: building $1 ($2)" >&2
	go build -trimpath -ldflags "$3" -o "$out/$1" "$2"
}
build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
build capi-manager sigs.k8s.io/cluster-api "$capi_ldflags"
build capi-kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm "$capi_ldflags"
build clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl "$capi_ldflags"
touch "$out/.complete"
echo "$out"
