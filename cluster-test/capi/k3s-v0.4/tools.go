//go:build tools

// k3s' bootstrap provider v0.4.0's manager, pinned by this module's go.mod and built by
// ../build.sh for TestProviderWebhooks.
package tools

import (
	_ "github.com/k3s-io/cluster-api-k3s/bootstrap"
)
