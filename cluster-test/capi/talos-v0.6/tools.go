//go:build tools

// The Talos bootstrap provider's manager (CABPT), pinned by this module's go.mod and built by
// ../build.sh for TestProviderWebhooks.
package tools

import (
	_ "github.com/siderolabs/cluster-api-bootstrap-provider-talos"
)
