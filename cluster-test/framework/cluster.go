package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
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
	Namespace   = "fleet"
	ClusterName = "c1"
	PoolName    = "pool-1"
)

// tokenTTL is CABPK's --bootstrap-token-ttl in the clusters the tests start: CABPK rotates a
// MachinePool's token when less than half of the TTL is left, checking every TTL/3, so about
// every 10 s. The steps that wait for rotations, and the outage, wait on it.
var tokenTTL = 15 * time.Second

// SoakTokenTTL is the soaks' --bootstrap-token-ttl: every pool's token rotated about every 20 s,
// the load docs/performance.md's soak figures were measured under.
const SoakTokenTTL = 30 * time.Second

// UseTokenTTL sets CABPK's --bootstrap-token-ttl for the clusters t starts, and restores it
// after t.
func UseTokenTTL(t *testing.T, ttl time.Duration) {
	before := tokenTTL
	tokenTTL = ttl
	t.Cleanup(func() { tokenTTL = before })
}

var (
	KubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	MachinePoolGVK   = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"}
	TokenPath        = []string{"spec", "joinConfiguration", "discovery", "bootstrapToken", "token"}
)

// CreateCluster creates Cluster c1 in the fleet's namespace: its CA and kubeconfig Secrets
// (the workload cluster is this API server), and its control plane, marked initialized.
func (m *ManagementCluster) CreateCluster(t *testing.T) {
	t.Helper()
	m.CreateClusterIn(t, Namespace, ClusterName)
}

// CreateClusterSecrets creates the fleet's namespace and Cluster c1's CA and kubeconfig
// Secrets (the workload cluster is this API server).
func (m *ManagementCluster) CreateClusterSecrets(t *testing.T) {
	t.Helper()
	m.CreateClusterSecretsIn(t, Namespace, ClusterName)
}

// CreateClusterSecretsIn creates the namespace and the CA and kubeconfig Secrets of the Cluster
// named (the workload cluster is this API server).
func (m *ManagementCluster) CreateClusterSecretsIn(t *testing.T, namespace, cluster string) {
	t.Helper()
	ctx := context.Background()
	m.CP.createNamespace(t, namespace)
	caCert, caKey := m.clusterCA(t)
	secrets := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Name: cluster + "-ca", Namespace: namespace, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cluster}},
			Type:       "cluster.x-k8s.io/secret",
			Data:       map[string][]byte{"tls.crt": caCert, "tls.key": caKey},
		},
		{
			// The workload cluster is this API server.
			ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig", Namespace: namespace, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cluster}},
			Type:       "cluster.x-k8s.io/secret",
			Data:       map[string][]byte{"value": m.CP.adminKubeconfig(t)},
		},
	}
	for _, s := range secrets {
		Must(t, m.CP.Client.Create(ctx, s))
	}
}

// Secret: a Secret of the fleet's namespace.
func (m *ManagementCluster) Secret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	Must(t, m.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, s))
	return s
}

// WaitForTokens polls the in-use config until it has carried n distinct tokens (the first
// is the one it has now).
func (m *ManagementCluster) WaitForTokens(t *testing.T, n int, timeout time.Duration) []string {
	t.Helper()
	pool := m.Get(t, MachinePoolGVK, PoolName)
	configName, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	var tokens []string
	deadline := time.Now().Add(timeout)
	for len(tokens) < n {
		if time.Now().After(deadline) {
			t.Fatalf("KubeadmConfig %s carried %d tokens in %s (%v), want %d (CABPK log: %s)", configName, len(tokens), timeout, tokens, n, m.CABPKLog)
		}
		config := m.Get(t, KubeadmConfigGVK, configName)
		token, _, _ := unstructured.NestedString(config.Object, TokenPath...)
		if token != "" && !slices.Contains(tokens, token) {
			tokens = append(tokens, token)
		}
		time.Sleep(time.Second)
	}
	return tokens
}

// Get: an object of the fleet's namespace.
func (m *ManagementCluster) Get(t *testing.T, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	return m.GetIn(t, gvk, Namespace, name)
}

func (m *ManagementCluster) GetIn(t *testing.T, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	Must(t, m.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u))
	return u
}

// WaitFor: an object of the fleet's namespace, once done says so.
func (m *ManagementCluster) WaitFor(t *testing.T, gvk schema.GroupVersionKind, name string, timeout time.Duration, what string, done func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return m.WaitForIn(t, gvk, Namespace, name, timeout, what, done)
}

func (m *ManagementCluster) WaitForIn(t *testing.T, gvk schema.GroupVersionKind, namespace, name string, timeout time.Duration, what string, done func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := m.CP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return false, nil
		}
		return done(u), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s not %s after %s; last seen:\n%s\n(logs: %s, %s)", gvk.Kind, namespace, name, what, timeout,
			ToYAML(t, []*unstructured.Unstructured{u}), m.CAPILog, m.CABPKLog)
	}
	return u
}

// ProvisionInfrastructure marks the pool's TestMachinePool provisioned with no replicas, as
// an infrastructure provider would.
func (m *ManagementCluster) ProvisionInfrastructure(t *testing.T, name string) {
	t.Helper()
	infra := &unstructured.Unstructured{}
	infra.SetAPIVersion("infrastructure.cluster-test.rollout-policy.dev/v1alpha1")
	infra.SetKind("TestMachinePool")
	Must(t, m.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, infra))
	m.MarkStatus(t, infra, map[string]any{"initialization": map[string]any{"provisioned": true}, "replicas": int64(0)})
}

// MarkStatus does what an infrastructure or control plane provider would: sets its status.
func (m *ManagementCluster) MarkStatus(t *testing.T, u *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": status})
	Must(t, err)
	Must(t, m.CP.Client.Status().Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", patch)))
}

// clusterCA: the Cluster's CA Secret (CABPK hashes it into the join configuration).
func (m *ManagementCluster) clusterCA(t *testing.T) (cert, key []byte) {
	t.Helper()
	ca := NewCA(t)
	return ca.CAPEM, ca.keyPEM(t)
}

// ServiceAccountOf: the ServiceAccount the README's ClusterRoleBinding grants the lookups to,
// the policy-server's, which it lists first (the audit scanner's follows).
func ServiceAccountOf(t *testing.T, objects []*unstructured.Unstructured) rbacv1.Subject {
	t.Helper()
	return ServiceAccountsOf(t, objects)[0]
}

// ServiceAccountsOf: every ServiceAccount the README's ClusterRoleBinding binds, in its order.
func ServiceAccountsOf(t *testing.T, objects []*unstructured.Unstructured) []rbacv1.Subject {
	t.Helper()
	var subjects []rbacv1.Subject
	for _, obj := range objects {
		if obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		binding := &rbacv1.ClusterRoleBinding{}
		Must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, binding))
		for _, subject := range binding.Subjects {
			if subject.Kind == rbacv1.ServiceAccountKind {
				subjects = append(subjects, subject)
			}
		}
	}
	if len(subjects) == 0 {
		t.Fatal("the README's lookup RBAC binds no ServiceAccount")
	}
	return subjects
}

// PolicyWarnings: the warnings kubectl printed, but for the API server's own deprecation
// warnings of v1beta1 ("... is deprecated; use ...").
func PolicyWarnings(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "Warning: ") && !strings.Contains(line, " is deprecated; use ") {
			out = append(out, line)
		}
	}
	return out
}

func ControlledByPool(u *unstructured.Unstructured, pool string) bool {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "MachinePool" && ref.Name == pool && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

func Object(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	Must(t, yaml.Unmarshal([]byte(text), &obj))
	return &unstructured.Unstructured{Object: obj}
}

func ReadFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	Must(t, err)
	return data
}

func StringList(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, item := range list {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// JSONEqual tells whether a and b are the same JSON: equal once each is marshalled and read
// back (the test's one comparison of objects and fields, whatever Go types hold them).
func JSONEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	var xa, ya any
	_ = json.Unmarshal(x, &xa)
	_ = json.Unmarshal(y, &ya)
	return reflect.DeepEqual(xa, ya)
}

// Names of the objects of a kind in the fleet's namespace, sorted.
func (m *ManagementCluster) Names(t *testing.T, gvk schema.GroupVersionKind) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := m.CP.Client.List(context.Background(), list, client.InNamespace(Namespace)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("list %s: %v", gvk.Kind, err)
	}
	var names []string
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() == nil {
			names = append(names, item.GetName())
		}
	}
	return Sorted(names)
}

func Sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
