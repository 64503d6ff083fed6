//go:build tools

// The managers of the v1beta1-era cluster, pinned by this module's go.mod and built by build.sh.
package tools

import (
	_ "github.com/k3s-io/cluster-api-k3s/bootstrap"
	_ "github.com/rancher/cluster-api-provider-rke2/bootstrap"
	_ "sigs.k8s.io/cluster-api"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
)
