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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

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

	// kubectl replace sends the whole object back, with its resourceVersion: the object as read
	// just before (CABPK rotates the token about every 10 s, and a stale resourceVersion is a
	// conflict, answered before any webhook is called: the person reads it again and retries).
	replaceFile := "pool-1-a-replace.yaml"
	writeReplace := func() {
		replaced := c.Get(t, framework.KubeadmConfigGVK, "pool-1-a")
		files, _, _ := unstructured.NestedSlice(replaced.Object, "spec", "files")
		files[0].(map[string]any)["content"] = editedContent
		framework.Must(t, unstructured.SetNestedSlice(replaced.Object, files, "spec", "files"))
		framework.Must(t, os.WriteFile(c.Artifacts.Path(replaceFile), framework.ToYAML(t, []*unstructured.Unstructured{replaced}), 0o644))
	}
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
			if tc.name == "kubectl replace" {
				writeReplace()
			}
			r := c.Person.Run(t, args...)
			for retry := 0; tc.name == "kubectl replace" && retry < 3 && strings.Contains(r.Stderr, "the object has been modified"); retry++ {
				writeReplace()
				r = c.Person.Run(t, args...)
			}
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
	t.Run("contentFormat: a file's contentFormat is an edit like any, through v1beta2 and v1beta1", c.contentFormat)
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
	if want := fmt.Sprintf("Warning: MachinePool %s owns it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)", framework.PoolName); !strings.Contains(r.Stderr, want) {
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

// The pool of the contentFormat step (CAPI v1.14): its config's second file rendered as a Go
// template by CABPK, the first one verbatim with no contentFormat written.
const (
	contentFormatPool   = "pool-3"
	contentFormatConfig = `apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {name: pool-3-a, namespace: fleet}
spec:
  files:
    - path: /etc/sysctl.d/90-fleet.conf
      content: |
        vm.max_map_count = 262144
    - path: /etc/fleet/control-plane-version
      contentFormat: Template
      content: |
        control plane {{ .controlPlane.version }}
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs:
        - name: max-pods
          value: "110"
`
	// The same config as a repository still in v1beta1 writes it (kubeletExtraArgs a map).
	contentFormatConfigV1beta1 = `apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfig
metadata: {name: pool-3-a, namespace: fleet}
spec:
  files:
    - path: /etc/sysctl.d/90-fleet.conf
      content: |
        vm.max_map_count = 262144
    - path: /etc/fleet/control-plane-version
      contentFormat: Template
      content: |
        control plane {{ .controlPlane.version }}
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs:
        max-pods: "110"
`
	contentFormatMachinePool = `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {name: pool-3, namespace: fleet}
spec:
  clusterName: c1
  replicas: 0
  template:
    spec:
      clusterName: c1
      version: v1.34.3
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: pool-3-a}
      infrastructureRef: {apiGroup: infrastructure.cluster-test.rollout-policy.dev, kind: TestMachinePool, name: pool-3}
---
apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1
kind: TestMachinePool
metadata: {name: pool-3, namespace: fleet}
spec: {providerIDList: []}
`
)

// contentFormat: CAPI v1.14's spec.files[].contentFormat, in both API versions (a release whose
// CRD has no such field skips it). A pool's config with a file rendered as a template: what
// the release stores for a file that names no contentFormat (logged: a default would be there),
// CABPK's rendering, an unchanged re-apply admitted; the person's change of contentFormat
// refused naming spec.files[1].contentFormat; through v1beta1, the field read back, a re-apply of
// the v1beta1 manifest (its first file without contentFormat, whatever storage holds for it)
// admitted without a warning, and the same change refused by its v1beta1 path. The pool is
// deleted after, the later steps' fleet as it was.
func (c *testCluster) contentFormat(t *testing.T) {
	if !crdHasField(t, c.ManagementCluster, "kubeadmconfigs.bootstrap.cluster.x-k8s.io", "v1beta2", "spec", "files", "[]", "contentFormat") {
		t.Skip("this CAPI release's KubeadmConfig has no spec.files[].contentFormat (CAPI v1.14 added it)")
	}
	v1beta1Field := crdHasField(t, c.ManagementCluster, "kubeadmconfigs.bootstrap.cluster.x-k8s.io", "v1beta1", "spec", "files", "[]", "contentFormat")
	t.Logf("KubeadmConfig v1beta1 has spec.files[].contentFormat in this release's CRD: %t", v1beta1Field)
	since := time.Now()
	write := func(name, text string) string {
		framework.Must(t, os.WriteFile(c.Artifacts.Path(name), []byte(text), 0o644))
		return name
	}
	config := write("pool-3-a.yaml", contentFormatConfig)
	pool := write("pool-3.yaml", contentFormatMachinePool)
	if r := c.Person.Run(t, "apply", "-f", config, "-f", pool); r.Err != nil {
		t.Fatalf("kubectl apply of pool-3 and its config: %v\n%s", r.Err, r.Stderr)
	}
	defer func() {
		// The pool goes; CAPI deletes the config it names.
		if r := c.Person.Run(t, "delete", "-f", pool, "--wait", "--timeout=2m"); r.Err != nil {
			t.Errorf("kubectl delete -f %s: %v\n%s", pool, r.Err, r.Stderr)
		}
		c.CheckPersonAdmittedExceptEdits(t, since)
		c.CheckControllersAdmitted(t, since)
	}()
	c.ProvisionInfrastructure(t, contentFormatPool)
	stored := c.WaitFor(t, framework.KubeadmConfigGVK, "pool-3-a", 3*time.Minute, "adopted by pool-3, its data secret written", func(u *unstructured.Unstructured) bool {
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, contentFormatPool) && secret != ""
	})
	files, _, _ := unstructured.NestedSlice(stored.Object, "spec", "files")
	if len(files) != 2 {
		t.Fatalf("pool-3-a stores %d files, want the manifest's 2: %v", len(files), files)
	}
	if got := files[1].(map[string]any)["contentFormat"]; got != "Template" {
		t.Errorf("pool-3-a stores spec.files[1].contentFormat %v, want the manifest's Template", got)
	}
	if v, ok := files[0].(map[string]any)["contentFormat"]; ok {
		t.Logf("this release defaults spec.files[].contentFormat: the file written without it is stored with %q", v)
	} else {
		t.Log("this release stores no spec.files[].contentFormat for a file written without it: no default")
	}
	secretName, _, _ := unstructured.NestedString(stored.Object, "status", "dataSecretName")
	if data := string(c.Secret(t, secretName).Data["value"]); strings.Contains(data, "{{ .controlPlane.version }}") {
		t.Errorf("CABPK wrote the Template file unrendered into %s", secretName)
	} else {
		t.Logf("CABPK rendered the Template file: %q", firstLineWith(data, "control plane "))
	}

	c.AdmittedWithoutWarning(t, "apply", "-f", config)
	c.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", config)

	refused := func(what string, r framework.KubectlResult, path string) {
		t.Helper()
		if r.Err == nil {
			t.Errorf("%s was admitted", what)
			return
		}
		for _, want := range []string{
			fmt.Sprintf("admission webhook %q denied the request", c.WebhookName()),
			path + ": Forbidden: changed",
			"The config is in use by MachinePool fleet/" + contentFormatPool,
		} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("%s: kubectl's stderr lacks %q:\n%s", what, want, r.Stderr)
			}
		}
	}
	raw := write("pool-3-a-raw.yaml", strings.Replace(contentFormatConfig, "contentFormat: Template", "contentFormat: Raw", 1))
	refused("kubectl apply of contentFormat: Raw", c.Person.Run(t, "apply", "-f", raw), "spec.files[1].contentFormat")
	refused("kubectl patch of contentFormat", c.Person.Run(t, "patch", "kubeadmconfig", "pool-3-a", "-n", framework.Namespace, "--type", "json",
		"-p", `[{"op":"replace","path":"/spec/files/1/contentFormat","value":"Raw"}]`), "spec.files[1].contentFormat")

	// A client of v1beta1.
	r := c.Person.Run(t, "get", "kubeadmconfigs.v1beta1.bootstrap.cluster.x-k8s.io", "pool-3-a", "-n", framework.Namespace, "-o", "json")
	var asV1beta1 unstructured.Unstructured
	if r.Err != nil || asV1beta1.UnmarshalJSON([]byte(r.Stdout)) != nil {
		t.Fatalf("kubectl get of pool-3-a through v1beta1: %v\n%s", r.Err, r.Stderr)
	}
	v1beta1Files, _, _ := unstructured.NestedSlice(asV1beta1.Object, "spec", "files")
	if len(v1beta1Files) != 2 || v1beta1Files[1].(map[string]any)["contentFormat"] != "Template" {
		t.Errorf("read through v1beta1, pool-3-a's files are %v: contentFormat: Template is not carried", v1beta1Files)
	}
	v1beta1 := write("pool-3-a.v1beta1.yaml", contentFormatConfigV1beta1)
	c.AdmittedWithoutWarning(t, "apply", "-f", v1beta1)
	c.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", v1beta1)
	rawV1beta1 := write("pool-3-a-raw.v1beta1.yaml", strings.Replace(contentFormatConfigV1beta1, "contentFormat: Template", "contentFormat: Raw", 1))
	refused("kubectl apply of contentFormat: Raw through v1beta1", c.Person.Run(t, "apply", "-f", rawV1beta1), "spec.files[1].contentFormat")

	after := c.Get(t, framework.KubeadmConfigGVK, "pool-3-a")
	a, _, _ := unstructured.NestedFieldNoCopy(after.Object, "spec", "files")
	if !framework.JSONEqual(a, stored.Object["spec"].(map[string]any)["files"]) {
		t.Errorf("spec.files changed although every edit was refused: %v -> %v", files, a)
	}
}

// crdHasField: the CRD's schema of the version has the field (path below the root, "[]" for a
// list's items).
func crdHasField(t *testing.T, m *framework.ManagementCluster, crdName, version string, path ...string) bool {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	framework.Must(t, m.CP.Client.Get(context.Background(), client.ObjectKey{Name: crdName}, crd))
	for _, v := range crd.Spec.Versions {
		if v.Name != version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		schema := v.Schema.OpenAPIV3Schema
		for _, p := range path {
			if p == "[]" {
				if schema.Items == nil || schema.Items.Schema == nil {
					return false
				}
				schema = schema.Items.Schema
				continue
			}
			next, ok := schema.Properties[p]
			if !ok {
				return false
			}
			schema = &next
		}
		return true
	}
	return false
}

func firstLineWith(text, part string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, part) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
