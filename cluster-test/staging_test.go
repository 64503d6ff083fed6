package clustertest

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"golang.org/x/mod/modfile"
)

// go.mod replaces each staging module of k8s.io/kubernetes with its published version, and
// exactly those: hack/staging-replaces.sh writes them from the tag's own go.mod. This fails
// when the k8s.io/kubernetes version changed and the script was not run again.
func TestStagingReplacesFollowTheKubernetesTag(t *testing.T) {
	ours := parseModFile(t, "go.mod")
	var version string
	for _, r := range ours.Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			version = r.Mod.Version
		}
	}
	if version == "" {
		t.Fatal("go.mod does not require k8s.io/kubernetes")
	}
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+version).Output()
	framework.Must(t, err)
	var download struct{ GoMod string }
	framework.Must(t, json.Unmarshal(out, &download))
	theirs := parseModFile(t, download.GoMod)

	staging := "v0." + strings.TrimPrefix(version, "v1.")
	want := map[string]string{}
	for _, r := range theirs.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			want[r.Old.Path] = r.Old.Path + "@" + staging
		}
	}
	got := map[string]string{}
	for _, r := range ours.Replace {
		if strings.HasPrefix(r.Old.Path, "k8s.io/") {
			got[r.Old.Path] = r.New.Path + "@" + r.New.Version
		}
	}
	if len(want) == 0 {
		t.Fatalf("k8s.io/kubernetes %s lists no staging modules", version)
	}
	for module, target := range want {
		if got[module] != target {
			t.Errorf("go.mod: replace %s => %q, want %s (run hack/staging-replaces.sh)", module, got[module], target)
		}
	}
	for module := range got {
		if _, ok := want[module]; !ok {
			t.Errorf("go.mod replaces %s, which is no staging module of k8s.io/kubernetes %s", module, version)
		}
	}
}

func parseModFile(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	framework.Must(t, err)
	f, err := modfile.Parse(path, data, nil)
	framework.Must(t, err)
	return f
}
