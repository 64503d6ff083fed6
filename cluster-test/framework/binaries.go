package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ClusterBinaries is build.sh's folder (CLUSTER_BIN, or build.sh run now).
func ClusterBinaries(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CLUSTER_BIN"); bin != "" {
		return bin
	}
	if os.Getenv("CAPI_MODULE_DIR") != "" {
		// build.sh alone builds go.mod's CAPI release, not the one named.
		t.Fatal("CAPI_MODULE_DIR is set but CLUSTER_BIN is not: run.sh sets both (build.sh <CAPI module> builds its binaries)")
	}
	out, err := exec.Command("./build.sh").Output()
	if err != nil {
		t.Fatalf("./build.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// CAPIBinaries is capi/build.sh's folder of a module's managers (built now unless done).
func CAPIBinaries(t *testing.T, folder string) string {
	t.Helper()
	out, err := exec.Command("capi/build.sh", folder).Output()
	if err != nil {
		t.Fatalf("capi/build.sh %s: %v", folder, err)
	}
	return strings.TrimSpace(string(out))
}

func RolloutCheckBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("ROLLOUT_CHECK")
	if bin == "" {
		bin = filepath.Join("..", "target", "debug", "capi-rollout-check")
	}
	abs, err := filepath.Abs(bin)
	Must(t, err)
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no capi-rollout-check at %s (ROLLOUT_CHECK=, or cargo build -p capi-rollout-check): %v", abs, err)
	}
	return abs
}
