package clustertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"
)

// Every step that builds the cluster's binaries (build.sh, capi/build.sh) and every folder run.sh
// reads must work on a machine whose Go module cache is empty: a new user's first `make test`.
// Each script runs here against an empty GOMODCACHE with CLUSTER_BUILD_RESOLVE_ONLY=1: it finds
// every package it would build, as it finds them for real (its module downloaded, nothing
// compiled), and writes the package path where the binary would be; run.sh reads each release's
// folder (CAPI_MODULE_DIR) with the same function as build.sh. The modules come from the
// machine's own module cache as a file:// proxy when it has them (no network, seconds), else
// from GOPROXY.
//
// What it catches: a step that reads a module's folder or files before anything downloaded them
// (`go list -m -f {{.Dir}}` prints nothing then), a package path that a release moved, a
// binary name or module that a script takes from the cache's state. What it cannot: a failure of
// the compile itself, or of a step that only fails on a cold Go build cache (not emptied here).
func TestBuildStepsOnAnEmptyModuleCache(t *testing.T) {
	proxy := os.Getenv("GOPROXY")
	if proxy == "" {
		proxy = "https://proxy.golang.org,direct"
	}
	if cache := goEnv(t, "GOMODCACHE"); cache != "" {
		proxy = "file://" + filepath.Join(cache, "cache", "download") + "," + proxy
	}
	// One cache, empty when the first script starts, for all of them: each module is extracted
	// once.
	env := emptyModuleCacheEnv(t, proxy)
	for _, tc := range []struct {
		name   string
		script []string
		// binary name -> the package it is built from
		want map[string]string
	}{
		{
			name:   "CAPI v1.12 and the control plane",
			script: []string{"./build.sh"},
			want: map[string]string{
				"etcd":                           "go.etcd.io/etcd/server/v3",
				"kube-apiserver":                 "k8s.io/kubernetes/cmd/kube-apiserver",
				"kube-controller-manager":        "k8s.io/kubernetes/cmd/kube-controller-manager",
				"kubectl":                        "k8s.io/kubernetes/cmd/kubectl",
				"capi-manager":                   "sigs.k8s.io/cluster-api",
				"capi-kubeadm-bootstrap-manager": "sigs.k8s.io/cluster-api/bootstrap/kubeadm",
				"clusterctl":                     "sigs.k8s.io/cluster-api/cmd/clusterctl",
			},
		},
		{
			// The module that failed on a new machine: v1.14 moved the core manager to core/.
			name:   "CAPI v1.14",
			script: []string{"./build.sh", "capi/v1.14"},
			want: map[string]string{
				// Linked from build.sh's folder: the same control plane under both releases.
				"kube-controller-manager":        "k8s.io/kubernetes/cmd/kube-controller-manager",
				"capi-manager":                   "sigs.k8s.io/cluster-api/core",
				"capi-kubeadm-bootstrap-manager": "sigs.k8s.io/cluster-api/bootstrap/kubeadm",
				"clusterctl":                     "sigs.k8s.io/cluster-api/cmd/clusterctl",
			},
		},
		{
			name:   "CAPI v1.10 with RKE2 and k3s",
			script: []string{"capi/build.sh", "v1.10"},
			want: map[string]string{
				"capi-manager":                   "sigs.k8s.io/cluster-api",
				"capi-kubeadm-bootstrap-manager": "sigs.k8s.io/cluster-api/bootstrap/kubeadm",
				"rke2-bootstrap-manager":         "github.com/rancher/cluster-api-provider-rke2/bootstrap",
				"k3s-bootstrap-manager":          "github.com/k3s-io/cluster-api-k3s/bootstrap",
			},
		},
		{
			name:   "RKE2 v0.20",
			script: []string{"capi/build.sh", "rke2-v0.20"},
			want: map[string]string{
				"rke2-bootstrap-manager": "github.com/rancher/cluster-api-provider-rke2/bootstrap",
			},
		},
		{
			name:   "k3s v0.4",
			script: []string{"capi/build.sh", "k3s-v0.4"},
			want: map[string]string{
				"k3s-bootstrap-manager": "github.com/k3s-io/cluster-api-k3s/bootstrap",
			},
		},
		{
			name:   "Talos CABPT v0.6",
			script: []string{"capi/build.sh", "talos-v0.6"},
			want: map[string]string{
				"cabpt-manager": "github.com/siderolabs/cluster-api-bootstrap-provider-talos",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(tc.script[0], tc.script[1:]...)
			// A binaries' root of its own: `./build.sh capi/v1.14` runs `./build.sh` first,
			// which would rewrite the folder another script's case is reading.
			cmd.Env = append(env[:len(env):len(env)], "CLUSTER_BUILD_RESOLVE_ONLY=1", "CLUSTER_BIN_ROOT="+t.TempDir())
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s with an empty module cache: %v\n%s", strings.Join(tc.script, " "), err, stderr.String())
			}
			folder := strings.TrimSpace(string(out))
			for bin, pkg := range tc.want {
				got, err := os.ReadFile(filepath.Join(folder, bin))
				if err != nil {
					t.Errorf("%s: no %s: %v", strings.Join(tc.script, " "), bin, err)
					continue
				}
				if strings.TrimSpace(string(got)) != pkg {
					t.Errorf("%s builds %s from %q, want %q", strings.Join(tc.script, " "), bin, strings.TrimSpace(string(got)), pkg)
				}
			}
		})
	}
}

// emptyModuleCacheEnv is this process's environment with a new, empty GOMODCACHE, modules taken
// from proxy, and no CLUSTER_BIN_ROOT (each script gets its own).
func emptyModuleCacheEnv(t *testing.T, proxy string) []string {
	t.Helper()
	cache := t.TempDir()
	// The module cache is read-only; t.TempDir's cleanup could not remove it otherwise.
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", cache).Run() })
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMODCACHE=") && !strings.HasPrefix(kv, "GOPROXY=") && !strings.HasPrefix(kv, "CLUSTER_BIN_ROOT=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOMODCACHE="+cache, "GOPROXY="+proxy)
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	framework.Must(t, err)
	return strings.TrimSpace(string(out))
}
