#!/usr/bin/env bash
# `capi/build.sh <module>` builds the managers a module of this folder pins: every main
# package its tools.go imports, named as the providers' releases name them (CAPI's core
# manager capi-manager, CABPK capi-kubeadm-bootstrap-manager, RKE2's rke2-bootstrap-manager,
# k3s' k3s-bootstrap-manager, Talos' cabpt-manager). Output:
# ../target/cluster-bin/<module>-<first 12 hex of sha256(its go.sum)>/, printed on stdout;
# reused while go.sum is unchanged. The control plane (etcd, kube-apiserver, kubectl) stays
# build.sh's, one folder up.
set -euo pipefail
cd "$(dirname "$0")/$1"
# shellcheck source=SCRIPTDIR/../hack/go-modules.sh
. ../../hack/go-modules.sh
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
name=$(basename "$PWD")
out=$(bin_root)/$name-$(sha256sum go.sum | cut -c1-12)
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
mkdir -p "$out"

date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
# -e: tools.go imports programs, which go list reports as an error of the import. (Not -find:
# it lists no imports of a package it does not load.)
pkgs=$(go list -e -tags tools -f '{{join .Imports " "}}' .)
[ -n "$pkgs" ] || { echo "capi/build.sh: $1/tools.go imports nothing" >&2; exit 1; }
for pkg in $pkgs; do
	module=$(go list -find -f '{{.Module.Path}}' "$pkg")
	version=$(pinned_version "$module")
	case $pkg in
	sigs.k8s.io/cluster-api) bin=capi-manager ;;
	sigs.k8s.io/cluster-api/bootstrap/kubeadm) bin=capi-kubeadm-bootstrap-manager ;;
	github.com/rancher/cluster-api-provider-rke2/bootstrap) bin=rke2-bootstrap-manager ;;
	github.com/k3s-io/cluster-api-k3s/bootstrap) bin=k3s-bootstrap-manager ;;
	github.com/siderolabs/cluster-api-bootstrap-provider-talos) bin=cabpt-manager ;;
	*) echo "capi/build.sh: no binary name for $pkg" >&2; exit 1 ;;
	esac
	# CAPI's and RKE2's releases stamp their version package the same way (RKE2's
	# hack/version.sh); k3s and Talos (its Dockerfile: -s -w) stamp none.
	v=$module/version
	major=${version#v}; major=${major%%.*}
	ldflags="-s -w -X $v.gitVersion=$version -X $v.gitMajor=$major -X $v.gitTreeState=clean -X $v.buildDate=$date"
	go_build "$bin" "$pkg" "$ldflags" "$out"
done
touch "$out/.complete"
echo "$out"
