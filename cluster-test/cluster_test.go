// Package clustertest puts the policy in front of a real control plane: etcd, kube-apiserver
// and CAPI's core manager and kubeadm bootstrap provider (CABPK), built from the modules
// go.mod pins, CAPI installed as clusterctl installs it, the policy behind a
// ValidatingWebhookConfiguration made from policy.yaml as kubewarden-controller makes it.
// Every request the policy judges here is one CAPI, kube-apiserver or kubectl really sent.
//
// Run it with `make cluster-test` (which builds the binaries, the policy and policy-host);
// POLICY_SERVER=/path/to/policy-server runs it against Kubewarden's real policy-server.
package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// testCluster is everything the steps share: the management cluster the fleet starts on, and
// what the move step needs to start a second one.
type testCluster struct {
	*framework.ManagementCluster
	bin string
	ca  *framework.Certificates
	// setContextAware, when set, switches the policy's contextAware as the cluster runs the
	// policy (the stack: the ClusterAdmissionPolicy's settings patched); without it the
	// test's own policy server is restarted with it.
	setContextAware func(t *testing.T, on bool)
}

// useContextAware sets the policy's contextAware for the steps that follow.
func (c *testCluster) useContextAware(t *testing.T, on bool) {
	t.Helper()
	if c.setContextAware != nil {
		c.setContextAware(t, on)
		return
	}
	c.Server.Stop()
	if on {
		c.Server.Start(c.Artifacts, map[string]any{"contextAware": true})
	} else {
		c.Server.Start(c.Artifacts, nil)
	}
}

func TestCluster(t *testing.T) {
	// envtest logs through controller-runtime's logger; the processes' own logs are the artifacts.
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.NewArtifacts(t)
	ca := framework.NewCA(t)
	// Set-up runs in the test itself: what it starts lives until the whole test ends.
	c := &testCluster{ManagementCluster: framework.StartManagementCluster(t, a, bin, ca, nil), bin: bin, ca: ca}
	// The person's Git checkout: the manifests of testdata/fleet.
	for _, name := range []string{"pool-1.yaml", "pool-1-a.yaml", "pool-2.v1beta1.yaml", "pool-2-a.v1beta1.yaml", "workers-md-0.v1beta1.yaml", "workers-md-0.yaml"} {
		framework.Must(t, os.WriteFile(a.Path(name), framework.ReadFile(t, filepath.Join("testdata", "fleet", name)), 0o644))
	}

	// Each step names the earlier steps it builds on (Needs): one run alone, with
	// `go test -run '^TestCluster$/^<its ID>:'`, runs them first.
	framework.RunSteps(t, []framework.Step{
		{ID: "bringUp", Name: "CAPI brings a pool up and every controller write is admitted", Run: c.bringUp},
		{ID: "reapply", Name: "re-applying unchanged manifests is admitted without a warning", Needs: []string{"bringUp"}, Run: c.reapply},
		{ID: "tokenRotations", Name: "CABPK rotates the pool's token three times, each admitted without a warning", Needs: []string{"bringUp"}, Run: c.tokenRotations},
		{ID: "personEdits", Name: "a person's in-place edit is refused with the field paths and the rotation to do", Needs: []string{"bringUp"}, Run: c.personEdits},
		{ID: "rotation", Name: "rotating configRef as the README says is admitted and CAPI rolls the new config", Needs: []string{"bringUp"}, Run: c.rotation},
		{ID: "contextAware", Name: "context-aware: an edit of the rotated-out config is admitted with the warning", Needs: []string{"rotation"}, Run: c.contextAware},
		{ID: "machinePoolDeletion", Name: "kubectl delete machinepool completes in every cascade, CAPI's and the garbage collector's deletes of its configs admitted", Needs: []string{"bringUp"}, Run: c.machinePoolDeletion},
		{ID: "replaceForce", Name: "kubectl replace --force of the config in use: refused with contextAware, admitted with a warning by default", Needs: []string{"bringUp"}, Run: c.replaceForce},
		{ID: "v1beta1Clients", Name: "v1beta1 clients through CAPI's conversion: re-applies admitted, edits refused by their v1beta1 path", Needs: []string{"bringUp"}, Run: c.v1beta1Clients},
		{ID: "outage", Name: "with the policy server down or hanging CAPI's writes pass, and verdicts return with it", Needs: []string{"rotation"}, Run: c.outage},
		{ID: "rotateCommand", Name: "capi-rollout-check rotate does the rotation a refusal asks for, CAPI takes it up; its bad inputs change nothing", Needs: []string{"bringUp"}, Run: c.rotateCommand},
		{ID: "clusterctlMove", Name: "clusterctl move to a second management cluster completes, nothing refused, the pool reconciles there", Needs: []string{"rotation", "v1beta1Clients"}, Run: c.clusterctlMove},
		// Stands alone: it reads the audit log of whatever ran before it.
		{ID: "noControllerRefused", Name: "no controller write was refused by the policy in the whole run", Run: c.noControllerRefused},
	})
}

// step runs a subtest and stops the test when it fails: a chain of steps each building on the
// ones before (a provider's, a template's; the cases' own steps are framework.RunSteps').
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.Fatalf("step %q failed; later steps need it", name)
	}
}

// --- the steps ---

func (c *testCluster) bringUp(t *testing.T) {
	c.CreateCluster(t)

	// The person applies the pool and its config, as from a Git repository.
	for _, file := range []string{"pool-1-a.yaml", "pool-1.yaml"} {
		r := c.Person.Run(t, "apply", "-f", file)
		if r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	c.ProvisionInfrastructure(t, framework.PoolName)

	// CAPI's MachinePool controller adopts the config, CABPK fills the join data.
	config := c.WaitFor(t, framework.KubeadmConfigGVK, "pool-1-a", 3*time.Minute, "adopted by the pool, token, discovery and data secret filled", func(u *unstructured.Unstructured) bool {
		token, _, _ := unstructured.NestedString(u.Object, framework.TokenPath...)
		endpoint, _, _ := unstructured.NestedString(u.Object, "spec", "joinConfiguration", "discovery", "bootstrapToken", "apiServerEndpoint")
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, framework.PoolName) && u.GetLabels()["cluster.x-k8s.io/cluster-name"] == framework.ClusterName &&
			token != "" && endpoint != "" && secret == "pool-1-a"
	})
	t.Logf("KubeadmConfig pool-1-a as CAPI left it:\n%s", framework.ToYAML(t, []*unstructured.Unstructured{config}))
	c.WaitFor(t, framework.MachinePoolGVK, framework.PoolName, 2*time.Minute, "dataSecretName copied from the config", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return name == "pool-1-a"
	})
	c.CheckControllersAdmitted(t, time.Time{})
}

func (c *testCluster) reapply(t *testing.T) {
	since := time.Now()
	for _, args := range [][]string{
		{"apply", "-f", "pool-1-a.yaml", "-f", "pool-1.yaml"},
		{"apply", "--server-side", "-f", "pool-1-a.yaml", "-f", "pool-1.yaml"},
	} {
		c.AdmittedWithoutWarning(t, args...)
	}
	c.CheckPersonAdmitted(t, since)
}

func (c *testCluster) tokenRotations(t *testing.T) {
	since := time.Now()
	tokens := c.WaitForTokens(t, 4, 4*time.Minute)
	t.Logf("tokens CABPK wrote into pool-1-a: %v", tokens)
	events := c.EventsSince(t, since)
	var rotations []framework.AuditEvent
	for _, e := range events {
		if e.User.Username == c.CABPK && e.Resource() == "kubeadmconfigs" && e.IsWrite() {
			rotations = append(rotations, e)
		}
	}
	if len(rotations) < 3 {
		t.Fatalf("the audit log shows %d CABPK writes of kubeadmconfigs, want at least 3", len(rotations))
	}
	for _, e := range rotations {
		if e.Code() >= 300 {
			t.Errorf("CABPK's write was not admitted: %s", e)
		}
	}
	if open := framework.FailedOpen(events, c.WebhookName()); len(open) > 0 {
		t.Errorf("%d requests were admitted without the policy's answer (policy server up): first %s", len(open), open[0])
	}
	c.CheckNoWarningsTo(t, c.CABPKLog)
	c.CheckControllersAdmitted(t, since)
	c.CheckControllersJudged(t, true)
}

// The edit: the sysctl file's content, and max-pods.
const (
	editedContent = "vm.max_map_count = 524288\n"
	editedMaxPods = "64"
)

func (c *testCluster) personEdits(t *testing.T) {
	before := c.Get(t, framework.KubeadmConfigGVK, "pool-1-a")
	// The person changes the sysctl in the file and applies it.
	original := framework.ReadFile(t, c.Artifacts.Path("pool-1-a.yaml"))
	edited := strings.Replace(string(original), "262144", "524288", 1)
	editedFile := "pool-1-a.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(editedFile), []byte(edited), 0o644))
	defer func() { framework.Must(t, os.WriteFile(c.Artifacts.Path(editedFile), original, 0o644)) }()

	// kubectl replace sends the whole object back, with its resourceVersion.
	replaced := before.DeepCopy()
	files, _, _ := unstructured.NestedSlice(replaced.Object, "spec", "files")
	files[0].(map[string]any)["content"] = editedContent
	framework.Must(t, unstructured.SetNestedSlice(replaced.Object, files, "spec", "files"))
	replaceFile := "pool-1-a-replace.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(replaceFile), framework.ToYAML(t, []*unstructured.Unstructured{replaced}), 0o644))
	patch := fmt.Sprintf(`{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"max-pods","value":%q}]}}}}`, editedMaxPods)

	remediation := `set spec.template.spec.bootstrap.configRef.name of MachinePool fleet/pool-1 to "pool-1-`
	cases := []struct {
		name string
		args []string
		path string
	}{
		{"kubectl apply", []string{"apply", "-f", editedFile}, "spec.files[0].content: Forbidden: changed"},
		{"kubectl apply --server-side", []string{"apply", "--server-side", "--force-conflicts", "-f", editedFile}, "spec.files[0].content: Forbidden: changed"},
		{"kubectl patch", []string{"patch", "kubeadmconfig", "pool-1-a", "-n", framework.Namespace, "--type", "merge", "-p", patch},
			"spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed"},
		{"kubectl replace", []string{"replace", "-f", replaceFile}, "spec.files[0].content: Forbidden: changed"},
	}
	for _, tc := range cases {
		for _, dryRun := range []bool{true, false} {
			args := tc.args
			name := tc.name
			if dryRun {
				args = append(slices.Clone(args), "--dry-run=server")
				name += " --dry-run=server"
			}
			r := c.Person.Run(t, args...)
			if r.Err == nil {
				t.Errorf("%s was admitted; stdout: %s", name, r.Stdout)
				continue
			}
			for _, want := range []string{
				fmt.Sprintf("admission webhook %q denied the request", c.WebhookName()),
				tc.path,
				"The config is in use by MachinePool fleet/pool-1",
				remediation,
			} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("%s: kubectl's stderr lacks %q:\n%s", name, want, r.Stderr)
				}
			}
			if tc.name == "kubectl apply" && !dryRun {
				framework.Must(t, os.WriteFile(c.Artifacts.Path("real-rejection.txt"), []byte(r.Stderr), 0o644))
				// The README shows what kubectl printed here, to the byte: the suggested
				// name is a hash of the spec, so the text is the same on every run.
				if readme := framework.ReadFile(t, filepath.Join("..", "README.md")); !strings.Contains(string(readme), "\n"+r.Stderr) {
					t.Errorf("README.md's \"A real rejection\" is not what kubectl printed:\n%s", r.Stderr)
				}
			}
		}
	}
	after := c.Get(t, framework.KubeadmConfigGVK, "pool-1-a")
	for _, path := range [][]string{{"spec", "files"}, {"spec", "joinConfiguration", "nodeRegistration"}} {
		b, _, _ := unstructured.NestedFieldNoCopy(before.Object, path...)
		a, _, _ := unstructured.NestedFieldNoCopy(after.Object, path...)
		if !framework.JSONEqual(b, a) {
			t.Errorf("%s changed although every edit was refused: %v -> %v", strings.Join(path, "."), b, a)
		}
	}
}

func (c *testCluster) rotation(t *testing.T) {
	since := time.Now()
	// The rotation as the README tells it: a new config with the desired spec, then the ref.
	newConfig := strings.NewReplacer("name: pool-1-a", "name: pool-1-b", "262144", "524288").Replace(string(framework.ReadFile(t, c.Artifacts.Path("pool-1-a.yaml"))))
	newFile := "pool-1-b.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(newFile), []byte(newConfig), 0o644))
	for _, args := range [][]string{
		{"apply", "-f", newFile},
		{"patch", "machinepool", framework.PoolName, "-n", framework.Namespace, "--type", "merge", "-p", `{"spec":{"template":{"spec":{"bootstrap":{"configRef":{"name":"pool-1-b"}}}}}}`},
	} {
		r := c.Person.Run(t, args...)
		if r.Err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), r.Err, r.Stderr)
		}
	}
	c.WaitFor(t, framework.MachinePoolGVK, framework.PoolName, 3*time.Minute, "moved to pool-1-b's data secret", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return name == "pool-1-b"
	})
	c.WaitFor(t, framework.KubeadmConfigGVK, "pool-1-b", time.Minute, "adopted by the pool", func(u *unstructured.Unstructured) bool {
		return framework.ControlledByPool(u, framework.PoolName)
	})
	if old := c.Get(t, framework.KubeadmConfigGVK, "pool-1-a"); !framework.ControlledByPool(old, framework.PoolName) {
		t.Errorf("the rotated-out config lost its ownerReference: %v", old.GetOwnerReferences())
	}
	c.CheckPersonAdmitted(t, since)
	c.CheckControllersAdmitted(t, since)
}

func (c *testCluster) contextAware(t *testing.T) {
	c.useContextAware(t, true)
	defer c.useContextAware(t, false)
	since := time.Now()
	patch := fmt.Sprintf(`{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"max-pods","value":%q}]}}}}`, editedMaxPods)

	// What the README's RBAC grants the policy-server, as the API server answers it.
	for _, resource := range []string{"machinepools.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io"} {
		r := c.Person.Run(t, "auth", "can-i", "list", resource, "-n", framework.Namespace, "--as", "system:serviceaccount:"+c.PolicyServerSA.Namespace+":"+c.PolicyServerSA.Name)
		if strings.TrimSpace(r.Stdout) != "yes" {
			t.Errorf("the policy-server's ServiceAccount may not list %s: %s %s", resource, r.Stdout, r.Stderr)
		}
	}
	checkLookupVerdicts(t, c.ManagementCluster, patch)
	c.CheckControllersAdmitted(t, since)
}

// checkLookupVerdicts: with contextAware: true, after the rotation step, the person's `patch` of
// rotated-out pool-1-a is admitted with the rotated-out warning, while the same patch of pool-1-b,
// which pool-1 references, is refused with its path, and deleting pool-1-b is refused.
func checkLookupVerdicts(t *testing.T, m *framework.ManagementCluster, patch string) {
	t.Helper()
	r := m.Person.Run(t, "patch", "kubeadmconfig", "pool-1-a", "-n", framework.Namespace, "--type", "merge", "-p", patch)
	if r.Err != nil {
		t.Errorf("the edit of rotated-out pool-1-a was refused: %v\n%s", r.Err, r.Stderr)
	}
	if want := "Warning: KubeadmConfig pool-1-a is rotated out (no MachinePool references it): this edit reaches no node"; !strings.Contains(r.Stderr, want) {
		t.Errorf("kubectl's stderr lacks %q:\n%s", want, r.Stderr)
	}
	// The config the pool references now is protected, found by the lookup.
	r = m.Person.Run(t, "patch", "kubeadmconfig", "pool-1-b", "-n", framework.Namespace, "--type", "merge", "-p", patch)
	if r.Err == nil || !strings.Contains(r.Stderr, "spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed") {
		t.Errorf("the edit of in-use pool-1-b was not refused with its path: %v\n%s", r.Err, r.Stderr)
	}
	r = m.Person.Run(t, "delete", "kubeadmconfig", "pool-1-b", "-n", framework.Namespace, "--dry-run=server")
	if r.Err == nil || !strings.Contains(r.Stderr, "referenced by the configRef of MachinePool") {
		t.Errorf("deleting the referenced pool-1-b was not refused: %v\n%s", r.Err, r.Stderr)
	}
}

// replaceForce: `kubectl replace --force` of the config pool-1 uses, a DELETE then a
// CREATE under the same name with another spec. With contextAware: true the DELETE is refused
// and nothing changes. By default both are admitted, the DELETE with the policy's warning: CAPI
// adopts the new object and CABPK writes the data Secret of the same name from its spec, so the
// pool's dataSecretName stays and nothing rolls out, which is what the warning says.
func (c *testCluster) replaceForce(t *testing.T) {
	pool := c.Get(t, framework.MachinePoolGVK, framework.PoolName)
	configName, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	before := c.Get(t, framework.KubeadmConfigGVK, configName)
	dataSecret, _, _ := unstructured.NestedString(before.Object, "status", "dataSecretName")
	secretBefore := c.Secret(t, dataSecret)
	// The person's manifest of the config, with another sysctl.
	const replacedContent = "vm.max_map_count = 1048576"
	manifest := strings.Replace(string(framework.ReadFile(t, c.Artifacts.Path(configName+".yaml"))), "vm.max_map_count = 524288", replacedContent, 1)
	if !strings.Contains(manifest, replacedContent) {
		t.Fatalf("%s.yaml has no sysctl to change:\n%s", configName, manifest)
	}
	file := configName + "-replace-force.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(file), []byte(manifest), 0o644))
	content := func(u *unstructured.Unstructured) string {
		files, _, _ := unstructured.NestedSlice(u.Object, "spec", "files")
		if len(files) == 0 {
			return ""
		}
		text, _ := files[0].(map[string]any)["content"].(string)
		return text
	}

	// contextAware: the DELETE is refused, kubectl creates nothing.
	c.useContextAware(t, true)
	r := c.Person.Run(t, "replace", "--force", "-f", file)
	c.useContextAware(t, false)
	if r.Err == nil {
		t.Errorf("kubectl replace --force of the in-use %s was admitted with contextAware: true", configName)
	}
	for _, want := range []string{
		fmt.Sprintf("admission webhook %q denied the request", c.WebhookName()),
		fmt.Sprintf("[metadata.name: Forbidden: referenced by the configRef of MachinePool %s/%s]", framework.Namespace, framework.PoolName),
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("contextAware: kubectl's stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
	kept := c.Get(t, framework.KubeadmConfigGVK, configName)
	if kept.GetUID() != before.GetUID() || content(kept) != content(before) {
		t.Errorf("contextAware: %s was replaced although its DELETE was refused: uid %s -> %s, content %q -> %q",
			configName, before.GetUID(), kept.GetUID(), content(before), content(kept))
	}
	if s := c.Secret(t, dataSecret); s.UID != secretBefore.UID || strings.Contains(string(s.Data["value"]), replacedContent) {
		t.Errorf("contextAware: the data Secret %s changed: uid %s -> %s", dataSecret, secretBefore.UID, s.UID)
	}

	// The default mode: admitted, the DELETE warned.
	since := time.Now()
	r = c.Person.Run(t, "replace", "--force", "-f", file)
	if r.Err != nil {
		t.Fatalf("kubectl replace --force in the default mode: %v\n%s", r.Err, r.Stderr)
	}
	if want := fmt.Sprintf("Warning: MachinePool %s owns it: a same-name re-create rolls out nothing; rotate configRef (contextAware: true refuses)", framework.PoolName); !strings.Contains(r.Stderr, want) {
		t.Errorf("kubectl's stderr lacks %q:\n%s", want, r.Stderr)
	}
	replaced := c.WaitFor(t, framework.KubeadmConfigGVK, configName, 3*time.Minute, "replaced, adopted by the pool again and its data secret written", func(u *unstructured.Unstructured) bool {
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return u.GetUID() != before.GetUID() && framework.ControlledByPool(u, framework.PoolName) && secret == dataSecret
	})
	if got := content(replaced); !strings.Contains(got, replacedContent) {
		t.Errorf("the replaced %s holds %q, want the manifest's %q", configName, got, replacedContent)
	}
	// The same-named data Secret carries the new spec, and the pool still names it: nothing
	// tells the infrastructure provider to replace an instance.
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.CP.Client.Get(ctx, client.ObjectKey{Namespace: framework.Namespace, Name: dataSecret}, s); err != nil {
			return false, nil
		}
		return strings.Contains(string(s.Data["value"]), replacedContent), nil
	})
	if err != nil {
		t.Errorf("the data Secret %s never carried the replaced spec (CABPK log: %s)", dataSecret, c.CABPKLog)
	}
	pool = c.Get(t, framework.MachinePoolGVK, framework.PoolName)
	if name, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "dataSecretName"); name != dataSecret {
		t.Errorf("the pool's dataSecretName moved to %q: a roll-out the replace should not have caused", name)
	}
	c.CheckPersonAdmitted(t, since)
	c.CheckControllersAdmitted(t, since)
}

// v1beta1Clients: a GitOps repository still written in v1beta1, on CAPI v1.12 or v1.14, which
// store v1beta2. Every request of theirs reaches the policy in v1beta1, its oldObject converted from
// storage by CAPI's conversion webhook, and CAPI's own writes stay v1beta2.
func (c *testCluster) v1beta1Clients(t *testing.T) {
	since := time.Now()
	files := []string{"-f", "pool-2-a.v1beta1.yaml", "-f", "pool-2.v1beta1.yaml"}
	if r := c.Person.Run(t, append([]string{"apply"}, files...)...); r.Err != nil {
		t.Fatalf("kubectl apply of the v1beta1 manifests: %v\n%s", r.Err, r.Stderr)
	}
	c.ProvisionInfrastructure(t, "pool-2")
	c.WaitFor(t, framework.KubeadmConfigGVK, "pool-2-a", 3*time.Minute, "adopted by pool-2, its join data filled", func(u *unstructured.Unstructured) bool {
		token, _, _ := unstructured.NestedString(u.Object, framework.TokenPath...)
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, "pool-2") && token != "" && secret == "pool-2-a"
	})
	c.WaitFor(t, framework.MachinePoolGVK, "pool-2", 2*time.Minute, "dataSecretName copied from the config", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return name == "pool-2-a"
	})

	// The same manifests again, after CAPI filled the config and the pool.
	for _, args := range [][]string{
		append([]string{"apply"}, files...),
		// --force-conflicts, as GitOps tools apply: the v1beta1 refs convert to v1beta2 ones
		// (apiVersion -> apiGroup), which server-side apply counts as conflicting with the
		// client-side apply that created them (409, before any webhook is called).
		append([]string{"apply", "--server-side", "--force-conflicts"}, files...),
	} {
		c.AdmittedWithoutWarning(t, args...)
	}

	// Read back through v1beta1, the fields storage drops are gone: the re-applies above sent
	// them again, and nothing was refused or warned.
	// CAPI's conversion marks what it converted down from storage: the policy's signal.
	r := c.Person.Run(t, "get", "kubeadmconfigs.v1beta1.bootstrap.cluster.x-k8s.io", "pool-2-a", "-n", framework.Namespace, "-o", "json")
	var asV1beta1 unstructured.Unstructured
	if r.Err != nil || asV1beta1.UnmarshalJSON([]byte(r.Stdout)) != nil {
		t.Fatalf("kubectl get of pool-2-a through v1beta1: %v\n%s", r.Err, r.Stderr)
	}
	for _, dropped := range [][]string{
		{"useExperimentalRetryJoin"}, {"clusterConfiguration", "networking"}, {"clusterConfiguration", "kubernetesVersion"},
		{"clusterConfiguration", "clusterName"}, {"clusterConfiguration", "kind"}, {"joinConfiguration", "apiVersion"},
		{"initConfiguration", "kind"}, {"files"}, // files[0] without append
	} {
		value, found, _ := unstructured.NestedFieldNoCopy(asV1beta1.Object, append([]string{"spec"}, dropped...)...)
		if files, ok := value.([]any); ok && len(files) == 1 {
			_, found = files[0].(map[string]any)["append"]
		}
		if found {
			t.Errorf("read through v1beta1, pool-2-a still has spec.%s (%v): storage kept it, the re-applies above proved nothing", strings.Join(dropped, "."), value)
		}
	}
	if _, ok := asV1beta1.GetAnnotations()["cluster.x-k8s.io/conversion-data"]; !ok {
		t.Errorf("read through v1beta1, pool-2-a has no cluster.x-k8s.io/conversion-data annotation: the policy cannot tell it was converted from v1beta2")
	}

	// useExperimentalRetryJoin changed through v1beta1: nothing is stored, so the apply is
	// admitted with the warning that it has no effect; server-side apply keeps no value of the
	// dropped field to compare, and is admitted without one.
	original := framework.ReadFile(t, c.Artifacts.Path("pool-2-a.v1beta1.yaml"))
	defer func() { framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-a.v1beta1.yaml"), original, 0o644)) }()
	retryJoinOff := strings.Replace(string(original), "useExperimentalRetryJoin: true", "useExperimentalRetryJoin: false", 1)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-a.v1beta1.yaml"), []byte(retryJoinOff), 0o644))
	r = c.Person.Run(t, "apply", "-f", "pool-2-a.v1beta1.yaml")
	noEffect := "spec.useExperimentalRetryJoin changed, no effect: the stored KubeadmConfig version has no such field"
	if w := framework.PolicyWarnings(r.Stderr); r.Err != nil || len(w) != 1 || !strings.Contains(w[0], noEffect) {
		t.Errorf("useExperimentalRetryJoin changed through v1beta1: want admitted with the warning %q: %v\n%s", noEffect, r.Err, r.Stderr)
	}
	c.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", "pool-2-a.v1beta1.yaml")

	// A real edit through v1beta1 beside it is refused, named as the v1beta1 client wrote it,
	// and only the real path is named.
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-a.v1beta1.yaml"), []byte(strings.NewReplacer(`max-pods: "110"`, `max-pods: "64"`, "useExperimentalRetryJoin: true", "useExperimentalRetryJoin: false").Replace(string(original))), 0o644))
	for _, args := range [][]string{
		{"apply", "-f", "pool-2-a.v1beta1.yaml"},
		{"apply", "--server-side", "--force-conflicts", "-f", "pool-2-a.v1beta1.yaml"},
	} {
		r := c.Person.Run(t, args...)
		want := "[spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed]"
		if r.Err == nil || !strings.Contains(r.Stderr, want) {
			t.Errorf("kubectl %s: want a refusal naming only %q: %v\n%s", strings.Join(args, " "), want, r.Err, r.Stderr)
		}
	}

	// The same for a KubeadmConfigTemplate: created, re-applied, edited through v1beta1.
	template := []string{"-f", "workers-md-0.v1beta1.yaml"}
	for _, args := range [][]string{
		append([]string{"apply"}, template...),
		append([]string{"apply"}, template...),
		append([]string{"apply", "--server-side", "--force-conflicts"}, template...),
	} {
		c.AdmittedWithoutWarning(t, args...)
	}
	templateFile := framework.ReadFile(t, c.Artifacts.Path("workers-md-0.v1beta1.yaml"))
	framework.Must(t, os.WriteFile(c.Artifacts.Path("workers-md-0.v1beta1.yaml"), []byte(strings.Replace(string(templateFile), `max-pods: "110"`, `max-pods: "64"`, 1)), 0o644))
	r = c.Person.Run(t, append([]string{"apply"}, template...)...)
	if want := "spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed"; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("the template edit through v1beta1: want a refusal naming %q: %v\n%s", want, r.Err, r.Stderr)
	}
	framework.Must(t, os.WriteFile(c.Artifacts.Path("workers-md-0.v1beta1.yaml"), templateFile, 0o644))

	// A v1beta1 rotation is a rotation.
	rotated := strings.NewReplacer("name: pool-2-a", "name: pool-2-b", `max-pods: "110"`, `max-pods: "64"`).Replace(string(original))
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-b.v1beta1.yaml"), []byte(rotated), 0o644))
	pool := strings.Replace(string(framework.ReadFile(t, c.Artifacts.Path("pool-2.v1beta1.yaml"))), "name: pool-2-a", "name: pool-2-b", 1)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2.v1beta1.yaml"), []byte(pool), 0o644))
	r = c.Person.Run(t, "apply", "-f", "pool-2-b.v1beta1.yaml", "-f", "pool-2.v1beta1.yaml")
	if r.Err != nil {
		t.Fatalf("the v1beta1 rotation was refused: %v\n%s", r.Err, r.Stderr)
	}
	if w := framework.PolicyWarnings(r.Stderr); len(w) > 0 {
		t.Errorf("the v1beta1 rotation printed a warning of the policy: %q", w)
	}
	c.WaitFor(t, framework.MachinePoolGVK, "pool-2", 3*time.Minute, "moved to pool-2-b's data secret", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return name == "pool-2-b"
	})
	c.CheckPersonAdmittedExceptEdits(t, since)
	c.CheckControllersAdmitted(t, since)
}

func (c *testCluster) outage(t *testing.T) {
	c.Server.Stop()
	down := time.Now()
	tokens := c.WaitForTokens(t, 3, 3*time.Minute)
	t.Logf("tokens CABPK wrote with the policy server down: %v", tokens)
	events := c.EventsSince(t, down)
	open := framework.FailedOpen(events, c.WebhookName())
	if len(open) < 2 {
		t.Fatalf("%d requests failed open while the policy server was down, want the rotations' (at least 2)", len(open))
	}
	for _, e := range open {
		if e.Code() >= 300 {
			t.Errorf("failed open but not admitted: %s", e)
		}
	}
	// None is lost: the token in the config is a live bootstrap token.
	config := c.Get(t, framework.KubeadmConfigGVK, "pool-1-b")
	token, _, _ := unstructured.NestedString(config.Object, framework.TokenPath...)
	id, _, _ := strings.Cut(token, ".")
	secret := &corev1.Secret{}
	if err := c.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + id}, secret); err != nil {
		t.Errorf("the config's token %s has no bootstrap token Secret: %v", id, err)
	}

	// Slow: something accepts the webhook's connections and never answers. The API server
	// waits timeoutSeconds, then fails open; CAPI's writes are late, not lost.
	timeout := time.Duration(*c.Policy.Spec.TimeoutSeconds) * time.Second
	slow := time.Now()
	stopHanging := framework.Hang(t, c.Server.Port)
	tokens = c.WaitForTokens(t, 2, 3*time.Minute)
	stopped := time.Now()
	stopHanging()
	t.Logf("tokens CABPK wrote with the policy server hanging: %v", tokens)
	// Requests still waiting when the listener closes fail open at once (connection reset):
	// only those answered while it hung show the timeout.
	open = nil
	for _, e := range framework.FailedOpen(c.EventsSince(t, slow), c.WebhookName()) {
		if e.StageTimestamp.Before(stopped) {
			open = append(open, e)
		}
	}
	if len(open) == 0 {
		t.Fatal("no request failed open while the policy server hung")
	}
	for _, e := range open {
		if e.Code() >= 300 {
			t.Errorf("failed open but not admitted: %s", e)
		}
		if e.Took() < timeout-500*time.Millisecond {
			t.Errorf("failed open after %s, before policy.yaml's timeoutSeconds (%s): %s", e.Took(), timeout, e)
		}
	}
	t.Logf("%d requests failed open after the webhook's timeout; the first took %s", len(open), open[0].Took())

	c.Server.Start(c.Artifacts, nil)
	up := time.Now()
	r := c.Person.Run(t, "patch", "kubeadmconfig", "pool-1-b", "-n", framework.Namespace, "--type", "merge", "-p",
		fmt.Sprintf(`{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"max-pods","value":%q}]}}}}`, editedMaxPods))
	if r.Err == nil || !strings.Contains(r.Stderr, "denied the request") {
		t.Errorf("with the policy server back the in-place edit was not refused: %v\n%s", r.Err, r.Stderr)
	}
	c.WaitForTokens(t, 2, 2*time.Minute)
	if open := framework.FailedOpen(c.EventsSince(t, up), c.WebhookName()); len(open) > 0 {
		t.Errorf("requests failed open with the policy server back: %s", open[0])
	}
	c.CheckControllersAdmitted(t, up)
}

func (c *testCluster) noControllerRefused(t *testing.T) {
	c.CheckControllersAdmitted(t, time.Time{})
	c.CheckControllersJudged(t, true)
}

// --- checks ---
