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

// repositoryBinary is the binary the variable env names, else the one cargo builds into
// ../target/<profile>/<name>, as an absolute path.
func repositoryBinary(t *testing.T, env, profile, name string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		bin = filepath.Join("..", "target", profile, name)
	}
	abs, err := filepath.Abs(bin)
	Must(t, err)
	return abs
}

// PolicyHostBinary is POLICY_HOST, or the one `make host` builds.
func PolicyHostBinary(t *testing.T) string {
	t.Helper()
	return repositoryBinary(t, "POLICY_HOST", "release", "policy-host")
}

func RolloutCheckBinary(t *testing.T) string {
	t.Helper()
	abs := repositoryBinary(t, "ROLLOUT_CHECK", "debug", "capi-rollout-check")
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no capi-rollout-check at %s (ROLLOUT_CHECK=, or cargo build -p capi-rollout-check): %v", abs, err)
	}
	return abs
}
