package clustertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rolloutCheck runs capi-rollout-check (ROLLOUT_CHECK, or the one cargo builds) as the person
// runs it: their kubeconfig, the test's kubectl.
type rolloutCheckResult struct {
	stdout, stderr string
	code           int
}

func (c *testCluster) rolloutCheck(t *testing.T, kubeconfig string, env []string, args ...string) rolloutCheckResult {
	t.Helper()
	return c.rolloutCheckIn(t, framework.Namespace, kubeconfig, env, args...)
}

// rolloutCheckIn: capi-rollout-check rotate in the namespace named.
func (c *testCluster) rolloutCheckIn(t *testing.T, namespace, kubeconfig string, env []string, args ...string) rolloutCheckResult {
	t.Helper()
	all := append([]string{"rotate"}, args...)
	all = append(all, "--kubeconfig", kubeconfig, "--kubectl", c.Person.Bin, "-n", namespace)
	cmd := exec.Command(framework.RolloutCheckBinary(t), all...)
	cmd.Dir = c.Artifacts.Dir
	cmd.Env = append(append(os.Environ(), framework.KubectlCacheEnv(kubeconfig)), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("capi-rollout-check: %v", err)
	}
	t.Logf("capi-rollout-check %s -> %d\n  stdout: %s\n  stderr: %s", strings.Join(all, " "), code, strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	return rolloutCheckResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

var suggestedName = regexp.MustCompile(`create a new KubeadmConfig "([a-z0-9.-]+)"`)

// rotateCommand: a person's in-place edit of the pool's config is refused; then
// `capi-rollout-check rotate` does the rotation the refusal asks for, under the name it
// suggests, and CAPI takes it up (the pool's new dataSecretName). The audit log holds the
// person's writes (the refused edit, the new config, the repointed pool) and CAPI's, nothing
// else. Then each bad input the command refuses, against the real API server, changing nothing.
func (c *testCluster) rotateCommand(t *testing.T) {
	since := time.Now()
	pool := c.Get(t, framework.MachinePoolGVK, framework.PoolName)
	current, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	manifest := string(framework.ReadFile(t, c.Artifacts.Path(current+".yaml")))
	sysctl := regexp.MustCompile(`vm\.max_map_count = [0-9]+`)
	if !sysctl.MatchString(manifest) {
		t.Fatalf("%s.yaml has no sysctl to change:\n%s", current, manifest)
	}
	const wanted = "vm.max_map_count = 2097152"
	edited := current + "-edited.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(edited), []byte(sysctl.ReplaceAllString(manifest, wanted)), 0o644))

	// The edit in place is refused, and names the rotation.
	r := c.Person.Run(t, "apply", "-f", edited)
	if r.Err == nil {
		t.Fatalf("the in-place edit of %s was admitted", current)
	}
	m := suggestedName.FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("the refusal names no new config:\n%s", r.Stderr)
	}
	name := m[1]

	// The command does it.
	got := c.rolloutCheck(t, c.Person.Kubeconfig, nil, "machinepool/"+framework.PoolName, "-f", edited, "--timeout", "3m")
	if got.code != 0 {
		t.Fatalf("capi-rollout-check rotate exited %d:\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("created KubeadmConfig %s/%s\n", framework.Namespace, name),
		fmt.Sprintf("MachinePool %s/%s: configRef.name %s -> %s\n", framework.Namespace, framework.PoolName, current, name),
		fmt.Sprintf("MachinePool %s/%s: CAPI copied dataSecretName ", framework.Namespace, framework.PoolName),
		fmt.Sprintf("left: KubeadmConfig %s/%s, rotated out", framework.Namespace, current),
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("capi-rollout-check's output lacks %q:\n%s", want, got.stdout)
		}
	}
	config := c.WaitFor(t, framework.KubeadmConfigGVK, name, time.Minute, "adopted by the pool", func(u *unstructured.Unstructured) bool {
		return framework.ControlledByPool(u, framework.PoolName)
	})
	secret, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName")
	pool = c.Get(t, framework.MachinePoolGVK, framework.PoolName)
	if copied, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "dataSecretName"); copied != secret || secret == "" {
		t.Errorf("the pool's dataSecretName is %q, want the new config's %q", copied, secret)
	}
	if s := c.Secret(t, secret); !strings.Contains(string(s.Data["value"]), wanted) {
		t.Errorf("the new data secret %s does not carry %q", secret, wanted)
	}
	// The person's checkout, as the command leaves it to them: the new config's manifest.
	framework.Must(t, os.WriteFile(c.Artifacts.Path(name+".yaml"), []byte(strings.Replace(sysctl.ReplaceAllString(manifest, wanted), "name: "+current, "name: "+name, 1)), 0o644))

	// The audit log: the person's writes are the refused edit, the config and the repoint;
	// every other write to CAPI's kinds is a controller's, and none was refused.
	var person []string
	for _, e := range c.EventsSince(t, since) {
		if !e.IsWrite() || e.ObjectRef == nil || !strings.HasSuffix(e.ObjectRef.APIGroup, "cluster.x-k8s.io") {
			continue
		}
		switch e.User.Username {
		case c.PersonName:
			verdict := "admitted"
			if e.Code() >= 300 {
				verdict = "refused"
			}
			person = append(person, fmt.Sprintf("%s %s %s %s", e.Verb, e.Resource(), e.ObjectRef.Name, verdict))
		case c.CAPIManager, c.CABPK:
		default:
			t.Errorf("a write of neither the person nor CAPI during the rotation: %s", e)
		}
	}
	want := []string{
		fmt.Sprintf("patch kubeadmconfigs %s refused", current),
		fmt.Sprintf("create kubeadmconfigs %s admitted", name),
		fmt.Sprintf("patch machinepools %s admitted", framework.PoolName),
	}
	if strings.Join(person, "\n") != strings.Join(want, "\n") {
		t.Errorf("the person's writes to CAPI's kinds:\n%s\nwant:\n%s", strings.Join(person, "\n"), strings.Join(want, "\n"))
	}
	c.CheckControllersAdmitted(t, since)

	c.rotateRefusals(t, name)
}

// rotateRefusals: the command's refusals against the real API server, each exit code and
// message asserted, and nothing written (the person's writes counted in the audit log).
func (c *testCluster) rotateRefusals(t *testing.T, current string) {
	since := time.Now()
	files := c.rotateRefusalFiles(t, current)

	// A person who may read CAPI's kinds and patch pools, not create configs.
	viewer := "rotate-viewer@example.com"
	viewerConfig := c.rotateViewer(t, viewer)

	before := c.Get(t, framework.MachinePoolGVK, framework.PoolName)
	c.rotateRefusalCases(t, current, files, viewerConfig)
	c.rotateRefusalsWroteNothing(t, since, before, viewer, files.suggested)
}

// refusalFiles: the manifests rotateRefusals' cases give the command (artifact file names),
// and the config name the command suggests for the edited one.
type refusalFiles struct{ edited, stale, taken, suggested string }

// rotateRefusalFiles writes the manifests from current's: an edit, a rotated-out config's, and
// one of the suggested name with another spec, created.
func (c *testCluster) rotateRefusalFiles(t *testing.T, current string) refusalFiles {
	manifest := string(framework.ReadFile(t, c.Artifacts.Path(current+".yaml")))
	edit := func(file, from, to string) string {
		text := strings.Replace(manifest, from, to, 1)
		if text == manifest {
			t.Fatalf("%s.yaml has no %q", current, from)
		}
		framework.Must(t, os.WriteFile(c.Artifacts.Path(file), []byte(text), 0o644))
		return file
	}
	edited := edit("rotate-edited.yaml", "vm.max_map_count = 2097152", "vm.max_map_count = 4194304")
	// A rotated-out config's manifest (the one before).
	stale := edit("rotate-stale.yaml", "name: "+current, "name: pool-1-a")

	// The name the policy suggests for the edit, taken by hand with another spec.
	dry := c.rolloutCheck(t, c.Person.Kubeconfig, nil, "machinepool/"+framework.PoolName, "-f", edited, "--dry-run=client")
	m := regexp.MustCompile(`would create KubeadmConfig [a-z0-9-]+/([a-z0-9.-]+)`).FindStringSubmatch(dry.stdout)
	if dry.code != 0 || m == nil {
		t.Fatalf("the client dry run: exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	}
	taken := edit("rotate-taken.yaml", "name: "+current, "name: "+m[1])
	if r := c.Person.Run(t, "create", "-f", taken); r.Err != nil {
		t.Fatalf("kubectl create -f %s: %v\n%s", taken, r.Err, r.Stderr)
	}
	return refusalFiles{edited: edited, stale: stale, taken: taken, suggested: m[1]}
}

// rotateViewer gives viewer a ClusterRole to read CAPI's kinds and patch pools, not create
// configs; viewer's kubeconfig.
func (c *testCluster) rotateViewer(t *testing.T, viewer string) (kubeconfig string) {
	role := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: rotate-viewer
rules:
  - apiGroups: [cluster.x-k8s.io, bootstrap.cluster.x-k8s.io]
    resources: ["*"]
    verbs: [get, list, watch]
  - apiGroups: [cluster.x-k8s.io]
    resources: [machinepools]
    verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: rotate-viewer
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: rotate-viewer}
subjects:
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: %s}
`, viewer)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("rotate-viewer.yaml"), []byte(role), 0o644))
	if r := c.Person.Run(t, "apply", "-f", "rotate-viewer.yaml"); r.Err != nil {
		t.Fatalf("kubectl apply -f rotate-viewer.yaml: %v\n%s", r.Err, r.Stderr)
	}
	return c.CP.User(t, c.Artifacts, viewer)
}

// rotateRefusalCases runs the command for each refusal, checking its exit code and message;
// before the RBAC case (viewerConfig's) it deletes the taken config, so that create is the verb
// asked.
func (c *testCluster) rotateRefusalCases(t *testing.T, current string, f refusalFiles, viewerConfig string) {
	edited, stale, taken := f.edited, f.stale, f.taken
	cases := []struct {
		name       string
		kubeconfig string
		env        []string
		args       []string
		code       int
		message    string
	}{
		{"no such pool", "", nil, []string{"machinepool/pool-9", "-f", edited}, 2, fmt.Sprintf("MachinePool pool-9 not found in namespace %s", framework.Namespace)},
		{"not the current config", "", nil, []string{"machinepool/" + framework.PoolName, "-f", stale},
			2, fmt.Sprintf("MachinePool %s/%s uses KubeadmConfig %s, not KubeadmConfig pool-1-a", framework.Namespace, framework.PoolName, current)},
		{"nothing changed (--edit, saved unchanged)", "", []string{"KUBE_EDITOR=true"}, []string{"machinepool/" + framework.PoolName, "--edit"},
			1, fmt.Sprintf("nothing to rotate: the edited spec of KubeadmConfig %s/%s is the one it has", framework.Namespace, current)},
		{"the suggested name taken", "", nil, []string{"machinepool/" + framework.PoolName, "-f", edited},
			2, fmt.Sprintf("KubeadmConfig %s/%s already exists with another spec: nothing was changed", framework.Namespace, f.suggested)},
		{"RBAC", viewerConfig, nil, []string{"machinepool/" + framework.PoolName, "-f", edited},
			2, fmt.Sprintf("RBAC: you may not create kubeadmconfigs.bootstrap.cluster.x-k8s.io in namespace %s; nothing was changed", framework.Namespace)},
	}
	for _, tc := range cases {
		kubeconfig := tc.kubeconfig
		if kubeconfig == "" {
			kubeconfig = c.Person.Kubeconfig
		}
		if tc.name == "RBAC" {
			// The name is free again for the RBAC case, so that create is the verb asked.
			if r := c.Person.Run(t, "delete", "-f", taken); r.Err != nil {
				t.Fatalf("kubectl delete -f %s: %v\n%s", taken, r.Err, r.Stderr)
			}
		}
		r := c.rolloutCheck(t, kubeconfig, tc.env, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.message) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.code, r.stderr, tc.code, tc.message)
		}
	}
}

// rotateRefusalsWroteNothing: nothing was written by the command: the pool names the same
// config as before, and the person's (and viewer's) writes to CAPI's kinds since are the
// test's own (the suggested name, taken and freed).
func (c *testCluster) rotateRefusalsWroteNothing(t *testing.T, since time.Time, before *unstructured.Unstructured, viewer, suggested string) {
	after := c.Get(t, framework.MachinePoolGVK, framework.PoolName)
	a, _, _ := unstructured.NestedString(after.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	b, _, _ := unstructured.NestedString(before.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	if a != b {
		t.Errorf("the pool's configRef moved from %s to %s during the refused rotations", b, a)
	}
	var writes []string
	for _, e := range c.EventsSince(t, since) {
		if e.IsWrite() && e.ObjectRef != nil && strings.HasSuffix(e.ObjectRef.APIGroup, "cluster.x-k8s.io") && (e.User.Username == c.PersonName || e.User.Username == viewer) {
			writes = append(writes, fmt.Sprintf("%s %s %s", e.Verb, e.Resource(), e.ObjectRef.Name))
		}
	}
	want := []string{
		"create kubeadmconfigs " + suggested,
		"delete kubeadmconfigs " + suggested,
	}
	if strings.Join(writes, "\n") != strings.Join(want, "\n") {
		t.Errorf("writes to CAPI's kinds during the refused rotations:\n%s\nwant only the test's own:\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}
}

// rotateTopologyPool: `capi-rollout-check rotate` of the pool the topology controller made for
// ClusterClass quick-start's Cluster (topologyBringUp), with the person's edit of the
// KubeadmConfig it names: refused, sending the person to the class, and nothing written.
func (c *testCluster) rotateTopologyPool(t *testing.T) {
	since := time.Now()
	o := c.topologyObjects(t)
	topologyConfig := &unstructured.Unstructured{Object: map[string]any{"spec": o.config.Object["spec"]}}
	topologyConfig.SetGroupVersionKind(framework.KubeadmConfigGVK)
	topologyConfig.SetName(o.config.GetName())
	topologyConfig.SetNamespace(o.config.GetNamespace())
	files, _, _ := unstructured.NestedSlice(topologyConfig.Object, "spec", "files")
	files[0].(map[string]any)["content"] = "vm.max_map_count = 4194304\n"
	framework.Must(t, unstructured.SetNestedSlice(topologyConfig.Object, files, "spec", "files"))
	framework.Must(t, os.WriteFile(c.Artifacts.Path("rotate-topology.yaml"), framework.ToYAML(t, []*unstructured.Unstructured{topologyConfig}), 0o644))
	r := c.rolloutCheckIn(t, framework.TopologyNamespace, c.Person.Kubeconfig, nil, "machinepool/"+o.pool.GetName(), "-f", "rotate-topology.yaml")
	if want := fmt.Sprintf("MachinePool %s/%s is managed by Cluster %s's topology (label %s): change the ClusterClass's bootstrap template instead",
		framework.TopologyNamespace, o.pool.GetName(), framework.TopologyCluster, framework.TopologyOwnedLabel); r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("topology: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
	if after := c.GetIn(t, framework.MachinePoolGVK, framework.TopologyNamespace, o.pool.GetName()); bootstrapRef(after) != o.config.GetName() {
		t.Errorf("the topology pool's configRef moved from %s to %s during the refused rotation", o.config.GetName(), bootstrapRef(after))
	}
	for _, e := range c.EventsSince(t, since) {
		if e.IsWrite() && e.User.Username == c.PersonName {
			t.Errorf("a write of the person during the refused rotation: %s", e)
		}
	}
}
