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

	corev1 "k8s.io/api/core/v1"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
