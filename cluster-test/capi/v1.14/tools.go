//go:build tools

// CAPI v1.14's managers and clusterctl, pinned by this module's go.mod and built by
// ../../build.sh. A module of its own: CAPI v1.14 needs k8s.io/* v0.36, the main module's
// kube-apiserver is v1.34.
package tools

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/core"
)
