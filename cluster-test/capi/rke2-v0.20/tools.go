//go:build tools

// RKE2 v0.20.1's bootstrap manager, pinned by this module's go.mod and built by ../build.sh.
package tools

import _ "github.com/rancher/cluster-api-provider-rke2/bootstrap"
