package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	namespace   = "fleet"
	clusterName = "c1"
	poolName    = "pool-1"
	// CABPK's --bootstrap-token-ttl here: it rotates a MachinePool's token when less than
	// half of the TTL is left, checking every TTL/3, so about every 20 s.
	tokenTTL = 30 * time.Second
)

var (
	kubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	machinePoolGVK   = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"}
	tokenPath        = []string{"spec", "joinConfiguration", "discovery", "bootstrapToken", "token"}
)

// createCluster creates Cluster c1 in the fleet's namespace: its CA and kubeconfig Secrets
// (the workload cluster is this API server), and its control plane, marked initialized.
func (m *managementCluster) createCluster(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	m.createClusterSecrets(t)
	controlPlane := object(t, fmt.Sprintf(`
apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1
kind: TestControlPlane
metadata: {name: %s, namespace: %s}
spec: {version: v1.34.3}`, clusterName, namespace))
	must(t, m.cp.client.Create(ctx, controlPlane))
	m.markStatus(t, controlPlane, map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}})
	m.cp.createAll(t, []*unstructured.Unstructured{object(t, fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: %s, namespace: %s}
spec:
  controlPlaneEndpoint: {host: %q, port: %d}
  controlPlaneRef: {apiGroup: controlplane.cluster-test.rollout-policy.dev, kind: TestControlPlane, name: %s}`,
		clusterName, namespace, m.cp.host, m.cp.port, clusterName))})

}

// createClusterSecrets creates the fleet's namespace and Cluster c1's CA and kubeconfig
// Secrets (the workload cluster is this API server).
func (m *managementCluster) createClusterSecrets(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	m.cp.createNamespace(t, namespace)
	caCert, caKey := m.clusterCA(t)
	secrets := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Name: clusterName + "-ca", Namespace: namespace, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": clusterName}},
			Type:       "cluster.x-k8s.io/secret",
			Data:       map[string][]byte{"tls.crt": caCert, "tls.key": caKey},
		},
		{
			// The workload cluster is this API server.
			ObjectMeta: metav1.ObjectMeta{Name: clusterName + "-kubeconfig", Namespace: namespace, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": clusterName}},
			Type:       "cluster.x-k8s.io/secret",
			Data:       map[string][]byte{"value": m.cp.adminKubeconfig(t)},
		},
	}
	for _, s := range secrets {
		must(t, m.cp.client.Create(ctx, s))
	}
}

// secret: a Secret of the fleet's namespace.
func (m *managementCluster) secret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	must(t, m.cp.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s))
	return s
}

// waitForTokens polls the in-use config until it has carried n distinct tokens (the first
// is the one it has now).
func (m *managementCluster) waitForTokens(t *testing.T, n int, timeout time.Duration) []string {
	t.Helper()
	pool := m.get(t, machinePoolGVK, poolName)
	configName, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	var tokens []string
	deadline := time.Now().Add(timeout)
	for len(tokens) < n {
		if time.Now().After(deadline) {
			t.Fatalf("KubeadmConfig %s carried %d tokens in %s (%v), want %d (CABPK log: %s)", configName, len(tokens), timeout, tokens, n, m.cabpkLog)
		}
		config := m.get(t, kubeadmConfigGVK, configName)
		token, _, _ := unstructured.NestedString(config.Object, tokenPath...)
		if token != "" && !slices.Contains(tokens, token) {
			tokens = append(tokens, token)
		}
		time.Sleep(time.Second)
	}
	return tokens
}

func (m *managementCluster) get(t *testing.T, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	must(t, m.cp.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u))
	return u
}

func (m *managementCluster) waitFor(t *testing.T, gvk schema.GroupVersionKind, name string, timeout time.Duration, what string, done func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := m.cp.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return false, nil
		}
		return done(u), nil
	})
	if err != nil {
		t.Fatalf("%s %s not %s after %s; last seen:\n%s\n(logs: %s, %s)", gvk.Kind, name, what, timeout,
			toYAML(t, []*unstructured.Unstructured{u}), m.capiLog, m.cabpkLog)
	}
	return u
}

// provisionInfrastructure marks the pool's TestMachinePool provisioned with no replicas, as
// an infrastructure provider would.
func (m *managementCluster) provisionInfrastructure(t *testing.T, name string) {
	t.Helper()
	infra := &unstructured.Unstructured{}
	infra.SetAPIVersion("infrastructure.cluster-test.rollout-policy.dev/v1alpha1")
	infra.SetKind("TestMachinePool")
	must(t, m.cp.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, infra))
	m.markStatus(t, infra, map[string]any{"initialization": map[string]any{"provisioned": true}, "replicas": int64(0)})
}

// markStatus does what an infrastructure or control plane provider would: sets its status.
func (m *managementCluster) markStatus(t *testing.T, u *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": status})
	must(t, err)
	must(t, m.cp.client.Status().Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", patch)))
}

// clusterCA: the Cluster's CA Secret (CABPK hashes it into the join configuration).
func (m *managementCluster) clusterCA(t *testing.T) (cert, key []byte) {
	t.Helper()
	ca := newCA(t)
	return ca.caPEM, ca.keyPEM(t)
}

// serviceAccountOf: the ServiceAccount the README's ClusterRoleBinding grants the lookups to.
func serviceAccountOf(t *testing.T, objects []*unstructured.Unstructured) rbacv1.Subject {
	t.Helper()
	for _, obj := range objects {
		if obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		binding := &rbacv1.ClusterRoleBinding{}
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, binding))
		for _, subject := range binding.Subjects {
			if subject.Kind == rbacv1.ServiceAccountKind {
				return subject
			}
		}
	}
	t.Fatal("the README's lookup RBAC binds no ServiceAccount")
	return rbacv1.Subject{}
}

// policyWarnings: the warnings kubectl printed, but for the API server's own deprecation
// warnings of v1beta1 ("... is deprecated; use ...").
func policyWarnings(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "Warning: ") && !strings.Contains(line, " is deprecated; use ") {
			out = append(out, line)
		}
	}
	return out
}

func controlledByPool(u *unstructured.Unstructured, pool string) bool {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "MachinePool" && ref.Name == pool && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

func object(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	must(t, yaml.Unmarshal([]byte(text), &obj))
	return &unstructured.Unstructured{Object: obj}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	return data
}

func stringList(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, item := range list {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// names of the objects of a kind in the fleet's namespace, sorted.
func (m *managementCluster) names(t *testing.T, gvk schema.GroupVersionKind) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := m.cp.client.List(context.Background(), list, client.InNamespace(namespace)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("list %s: %v", gvk.Kind, err)
	}
	var names []string
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() == nil {
			names = append(names, item.GetName())
		}
	}
	return sorted(names)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
