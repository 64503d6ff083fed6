package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

// UserWithRole makes a person of that name bound to the ClusterRole, and their kubectl.
func (m *ManagementCluster) UserWithRole(t *testing.T, name, role string) Kubectl {
	t.Helper()
	kubeconfig := m.CP.User(t, m.Artifacts, name)
	m.CP.bindClusterRole(t, role, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name})
	return Kubectl{Bin: m.Person.Bin, Kubeconfig: kubeconfig, Dir: m.Artifacts.Dir}
}

// ServiceAccountKubectl is kubectl as the ServiceAccount namespace/name, with a token from the
// TokenRequest API, as a Pod of it runs.
func (m *ManagementCluster) ServiceAccountKubectl(t *testing.T, namespace, name string) Kubectl {
	t.Helper()
	return Kubectl{Bin: m.Person.Bin, Kubeconfig: m.CP.serviceAccountKubeconfig(t, m.Artifacts, namespace, name), Dir: m.Artifacts.Dir}
}

// RolloutCheckRun is one run of capi-rollout-check: its output, exit code and wall time.
type RolloutCheckRun struct {
	Stdout, Stderr string
	Code           int
	Took           time.Duration
}

// RunRolloutCheck runs capi-rollout-check (ROLLOUT_CHECK) with args as a person runs it: in
// dir, their kubeconfig and kubectl given on the command line.
func RunRolloutCheck(t *testing.T, dir string, k Kubectl, args ...string) RolloutCheckRun {
	t.Helper()
	all := append(append([]string{}, args...), "--kubeconfig", k.Kubeconfig, "--kubectl", k.Bin)
	cmd := exec.Command(RolloutCheckBinary(t), all...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), KubectlCacheEnv(k.Kubeconfig))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := RolloutCheckRun{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.Code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("capi-rollout-check: %v", err)
	}
	t.Logf("capi-rollout-check %s -> %d in %s\n  stdout:\n%s\n  stderr: %s", strings.Join(all, " "), r.Code, r.Took.Round(time.Millisecond),
		strings.TrimRight(r.Stdout, "\n"), strings.TrimSpace(r.Stderr))
	return r
}

// DriftReport is `capi-rollout-check drift -o json` (schema capi-rollout-check.drift/v2),
// decoded strictly: a key the schema does not name fails the decode.
type DriftReport struct {
	Schema  string `json:"schema"`
	Now     string `json:"now"`
	Summary struct {
		Objects int            `json:"objects"`
		Kinds   map[string]int `json:"kinds"`
		Current int            `json:"current"`
		Stale   int            `json:"stale"`
		Unknown int            `json:"unknown"`
	} `json:"summary"`
	Items []DriftPool `json:"items"`
}

// DriftPool is one MachinePool, MachineDeployment or MachineSet of a DriftReport.
type DriftPool struct {
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Verdict    string `json:"verdict"`
	Confidence struct {
		Level   string   `json:"level"`
		Reasons []string `json:"reasons"`
	} `json:"confidence"`
	Bootstrap struct {
		Group     string  `json:"group"`
		Kind      string  `json:"kind"`
		Name      string  `json:"name"`
		Provider  *string `json:"provider"`
		Rendering *string `json:"rendering"`
	} `json:"bootstrap"`
	Infrastructure struct {
		Kind               *string `json:"kind"`
		Provider           *string `json:"provider"`
		ReadsBootstrapData *bool   `json:"readsBootstrapData"`
		OnRotation         *string `json:"onRotation"`
		OnContentChange    *string `json:"onContentChange"`
	} `json:"infrastructure"`
	DataSecret *struct {
		Name           string  `json:"name"`
		Created        *string `json:"created"`
		ContentWritten *string `json:"contentWritten"`
	} `json:"dataSecret"`
	Instances struct {
		Source                    *string           `json:"source"`
		Total                     *int              `json:"total"`
		StaleCount                int               `json:"staleCount"`
		EveryInstanceNowAndFuture bool              `json:"everyInstanceNowAndFuture"`
		Stale                     []DriftStaleEntry `json:"stale"`
	} `json:"instances"`
	Causes       []DriftCause `json:"causes"`
	ClusterClass *struct {
		Cluster      string  `json:"cluster"`
		TopologyName *string `json:"topologyName"`
	} `json:"clusterClass"`
	Fix []string `json:"fix"`
}

// DriftStaleEntry is an instance drift finds running older bootstrap data.
type DriftStaleEntry struct {
	Name     string   `json:"name"`
	Launched string   `json:"launched"`
	Because  string   `json:"because"`
	Certain  bool     `json:"certain"`
	Paths    []string `json:"paths"`
}

// DriftCause is what made a pool stale.
type DriftCause struct {
	Kind               string   `json:"kind"`
	Manager            *string  `json:"manager"`
	Operation          *string  `json:"operation"`
	Time               *string  `json:"time"`
	Paths              []string `json:"paths"`
	PathsAre           string   `json:"pathsAre"`
	InDataSecret       *bool    `json:"inDataSecret"`
	ReplacedByProvider bool     `json:"replacedByProvider"`
	Summary            string   `json:"summary"`
}

// ParseDrift decodes drift's JSON, failing the test on a key the schema does not name.
func ParseDrift(t *testing.T, stdout string) DriftReport {
	t.Helper()
	var r DriftReport
	d := json.NewDecoder(strings.NewReader(stdout))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		t.Fatalf("drift's JSON does not decode as capi-rollout-check.drift/v2: %v\n%s", err, stdout)
	}
	return r
}

// Pool is the report's MachinePool of that namespace and name, nil when it is not listed.
func (r DriftReport) Pool(namespace, name string) *DriftPool {
	return r.Object("MachinePool", namespace, name)
}

// Object is the report's object of that kind, namespace and name, nil when it is not listed.
func (r DriftReport) Object(kind, namespace, name string) *DriftPool {
	for i := range r.Items {
		if r.Items[i].Kind == kind && r.Items[i].Namespace == namespace && r.Items[i].Name == name {
			return &r.Items[i]
		}
	}
	return nil
}

// CauseKinds: the kinds of the pool's causes, in order.
func (p DriftPool) CauseKinds() []string {
	kinds := []string{}
	for _, c := range p.Causes {
		kinds = append(kinds, c.Kind)
	}
	return kinds
}

// Str is a JSON string that may be null, "<null>" when it is.
func Str(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// FixShell runs a command line that capi-rollout-check printed, as the person pastes it into
// their shell: bash, in dir, with `kubectl` and `capi-rollout-check` on PATH (the test's
// kubectl and ROLLOUT_CHECK).
func FixShell(t *testing.T, dir string, k Kubectl, line string) KubectlResult {
	t.Helper()
	bin := filepath.Join(dir, "fix-bin")
	Must(t, os.MkdirAll(bin, 0o755))
	for name, target := range map[string]string{"kubectl": k.Bin, "capi-rollout-check": RolloutCheckBinary(t)} {
		link := filepath.Join(bin, name)
		if _, err := os.Lstat(link); err != nil {
			Must(t, os.Symlink(target, link))
		}
	}
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), KubectlCacheEnv(k.Kubeconfig))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("$ %s\n%s%s", line, stdout.String(), stderr.String())
	return KubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}
