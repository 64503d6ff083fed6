package clustertest

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// v1beta1Clients: a GitOps repository still written in v1beta1, on CAPI v1.12 or v1.14, which
// store v1beta2. Every request of theirs reaches the policy in v1beta1, its oldObject converted from
// storage by CAPI's conversion webhook, and CAPI's own writes stay v1beta2.
func (c *testCluster) v1beta1Clients(t *testing.T) {
	since := time.Now()
	files := []string{"-f", "pool-2-a.v1beta1.yaml", "-f", "pool-2.v1beta1.yaml"}
	c.v1beta1PoolReapplied(t, files)
	c.v1beta1ReadBack(t)

	original := framework.ReadFile(t, c.Artifacts.Path("pool-2-a.v1beta1.yaml"))
	defer func() { framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-a.v1beta1.yaml"), original, 0o644)) }()
	c.v1beta1ConfigEdits(t, original)
	c.v1beta1Template(t)
	c.v1beta1Rotation(t, original)
	c.CheckPersonAdmittedExceptEdits(t, since)
	c.CheckControllersAdmitted(t, since)
}

// v1beta1PoolReapplied: pool-2 and its config applied in v1beta1 (files, kubectl's -f
// arguments), CAPI adopts the config and fills its join data, then the same manifests applied
// again, client- and server-side, are admitted without a warning.
func (c *testCluster) v1beta1PoolReapplied(t *testing.T, files []string) {
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
}

// v1beta1ReadBack: read back through v1beta1, the fields storage drops are gone: the
// re-applies of v1beta1PoolReapplied sent them again, and nothing was refused or warned.
// CAPI's conversion marks what it converted down from storage: the policy's signal.
func (c *testCluster) v1beta1ReadBack(t *testing.T) {
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
}

// v1beta1ConfigEdits writes pool-2-a.v1beta1.yaml from original with a change of a field
// storage drops, then with a real edit beside it, and applies each; the caller puts original
// back.
func (c *testCluster) v1beta1ConfigEdits(t *testing.T, original []byte) {
	// useExperimentalRetryJoin changed through v1beta1: nothing is stored, so the apply is
	// admitted with the warning that it has no effect; server-side apply keeps no value of the
	// dropped field to compare, and is admitted without one.
	retryJoinOff := strings.Replace(string(original), "useExperimentalRetryJoin: true", "useExperimentalRetryJoin: false", 1)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-a.v1beta1.yaml"), []byte(retryJoinOff), 0o644))
	r := c.Person.Run(t, "apply", "-f", "pool-2-a.v1beta1.yaml")
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
}

// v1beta1Template: the same for a KubeadmConfigTemplate: created, re-applied, edited through
// v1beta1 (the edit refused, the file put back).
func (c *testCluster) v1beta1Template(t *testing.T) {
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
	r := c.Person.Run(t, append([]string{"apply"}, template...)...)
	if want := "spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed"; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("the template edit through v1beta1: want a refusal naming %q: %v\n%s", want, r.Err, r.Stderr)
	}
	framework.Must(t, os.WriteFile(c.Artifacts.Path("workers-md-0.v1beta1.yaml"), templateFile, 0o644))
}

// v1beta1Rotation: a v1beta1 rotation (pool-2-b, from original, max-pods changed) is a
// rotation: admitted without a warning, and CAPI moves pool-2 to its data secret.
func (c *testCluster) v1beta1Rotation(t *testing.T, original []byte) {
	rotated := strings.NewReplacer("name: pool-2-a", "name: pool-2-b", `max-pods: "110"`, `max-pods: "64"`).Replace(string(original))
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2-b.v1beta1.yaml"), []byte(rotated), 0o644))
	pool := strings.Replace(string(framework.ReadFile(t, c.Artifacts.Path("pool-2.v1beta1.yaml"))), "name: pool-2-a", "name: pool-2-b", 1)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("pool-2.v1beta1.yaml"), []byte(pool), 0o644))
	r := c.Person.Run(t, "apply", "-f", "pool-2-b.v1beta1.yaml", "-f", "pool-2.v1beta1.yaml")
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
}
