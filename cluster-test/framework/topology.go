package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Cluster made from a ClusterClass (clusterclass_test.go), in a namespace of its own so that
// the fleet's steps (clusterctl move of the fleet's namespace among them) never see it.
const (
	TopologyNamespace = "fleet-cc"
	TopologyCluster   = "c2"
	// TopologyFieldManager is the field manager of the topology controller's server-side
	// applies (CAPI's structuredmerge.TopologyManagerName); it runs as CAPI's core manager.
	TopologyFieldManager = "capi-topology"
	// TopologyOwnedLabel marks what the topology controller made for a Cluster.
	TopologyOwnedLabel = "topology.cluster.x-k8s.io/owned"
	// TopologyPoolLabel names the MachinePool topology an object was made for.
	TopologyPoolLabel = "topology.cluster.x-k8s.io/pool-name"
	// TopologyDeploymentLabel names the MachineDeployment topology an object was made for.
	TopologyDeploymentLabel = "topology.cluster.x-k8s.io/deployment-name"
)

var (
	ClusterGVK               = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	ClusterClassGVK          = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}
	MachineDeploymentGVK     = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	MachineSetGVK            = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"}
	KubeadmConfigTemplateGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"}
	TestClusterGVK           = schema.GroupVersionKind{Group: "infrastructure.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestCluster"}
	TestControlPlaneGVK      = schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"}
	TestMachinePoolGVK       = schema.GroupVersionKind{Group: "infrastructure.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestMachinePool"}
)

// TopologyClusterManifest is Cluster `name` of ClusterClass `class` at the Kubernetes version,
// with a MachineDeployment and a MachinePool topology of each class named (replicas 0: no
// Machine waits for a node, and CABPK rotates the pool's token), as a person writes it. Its
// endpoint is this API server (the workload cluster is the management cluster).
func (m *ManagementCluster) TopologyClusterManifest(namespace, name, class, version string, deployments, pools map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: %s
  namespace: %s
spec:
  controlPlaneEndpoint: {host: %q, port: %d}
  topology:
    classRef: {name: %s}
    version: %s
    workers:
`, name, namespace, m.CP.Host, m.CP.Port, class, version)
	for _, list := range []struct {
		field   string
		classes map[string]string
	}{{"machineDeployments", deployments}, {"machinePools", pools}} {
		if len(list.classes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "      %s:\n", list.field)
		for _, topology := range Sorted(keys(list.classes)) {
			fmt.Fprintf(&b, "        - {name: %s, class: %s, replicas: 0}\n", topology, list.classes[topology])
		}
	}
	return b.String()
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ProvideTopology does for a Cluster made from a ClusterClass what its infrastructure and
// control plane providers would, as CreateCluster and ProvisionInfrastructure do for c1: the
// infrastructure cluster and the control plane the topology controller made are marked
// provisioned and initialized, the control plane at the Cluster's version (the topology
// controller creates no worker while the control plane has no status.version: it is
// "provisioning", CAPI's contract.ControlPlane().IsProvisioning); then each MachinePool of the
// pool topologies named, once the topology controller made it, gets its TestMachinePool
// provisioned with no replicas. It returns the pools by topology name.
func (m *ManagementCluster) ProvideTopology(t *testing.T, namespace, cluster string, pools []string, timeout time.Duration) map[string]*unstructured.Unstructured {
	t.Helper()
	c := m.WaitForIn(t, ClusterGVK, namespace, cluster, timeout, "given its infrastructure cluster and control plane by the topology controller", func(u *unstructured.Unstructured) bool {
		infra, _, _ := unstructured.NestedString(u.Object, "spec", "infrastructureRef", "name")
		cp, _, _ := unstructured.NestedString(u.Object, "spec", "controlPlaneRef", "name")
		return infra != "" && cp != ""
	})
	version, _, _ := unstructured.NestedString(c.Object, "spec", "topology", "version")
	infraName, _, _ := unstructured.NestedString(c.Object, "spec", "infrastructureRef", "name")
	cpName, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneRef", "name")
	infra := m.GetIn(t, TestClusterGVK, namespace, infraName)
	m.MarkStatus(t, infra, map[string]any{"initialization": map[string]any{"provisioned": true}})
	controlPlane := m.WaitForIn(t, TestControlPlaneGVK, namespace, cpName, timeout, "at the Cluster's version", func(u *unstructured.Unstructured) bool {
		v, _, _ := unstructured.NestedString(u.Object, "spec", "version")
		return v == version
	})
	m.MarkStatus(t, controlPlane, map[string]any{"version": version, "initialization": map[string]any{"controlPlaneInitialized": true}})

	made := map[string]*unstructured.Unstructured{}
	for _, topology := range pools {
		var pool *unstructured.Unstructured
		err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			list := m.ListIn(t, MachinePoolGVK, namespace, client.MatchingLabels{"cluster.x-k8s.io/cluster-name": cluster, TopologyPoolLabel: topology})
			if len(list) == 1 {
				pool = &list[0]
			}
			return pool != nil, nil
		})
		if err != nil {
			t.Fatalf("the topology controller made no MachinePool of topology %s of Cluster %s/%s in %s (log: %s)", topology, namespace, cluster, timeout, m.CAPILog)
		}
		name, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "infrastructureRef", "name")
		infra := m.WaitForIn(t, TestMachinePoolGVK, namespace, name, timeout, "made by the topology controller", func(*unstructured.Unstructured) bool { return true })
		m.MarkStatus(t, infra, map[string]any{"initialization": map[string]any{"provisioned": true}, "replicas": int64(0)})
		made[topology] = pool
	}
	return made
}

// ListIn: the objects of a kind in a namespace that the options select, but for those being
// deleted.
func (m *ManagementCluster) ListIn(t *testing.T, gvk schema.GroupVersionKind, namespace string, opts ...client.ListOption) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	Must(t, m.CP.Client.List(context.Background(), list, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...))
	var out []unstructured.Unstructured
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() == nil {
			out = append(out, item)
		}
	}
	return out
}

// TopologyWrites: the writes since the time by the topology controller (CAPI's core manager
// with the field manager capi-topology), oldest first; its dry runs among them (before each
// server-side apply of an object that exists, it sends the apply as a dry run to see what
// would change: the policy is asked about both).
func (m *ManagementCluster) TopologyWrites(t *testing.T, since time.Time) []AuditEvent {
	t.Helper()
	var out []AuditEvent
	for _, e := range m.EventsSince(t, since) {
		if e.User.Username == m.CAPIManager && e.IsWrite() && e.FieldManager() == TopologyFieldManager {
			out = append(out, e)
		}
	}
	return out
}

// LogLines: the lines of a process's log that hold every one of the strings.
func LogLines(t *testing.T, log string, all ...string) []string {
	t.Helper()
	var out []string
lines:
	for _, line := range strings.Split(string(ReadFile(t, log)), "\n") {
		for _, s := range all {
			if !strings.Contains(line, s) {
				continue lines
			}
		}
		out = append(out, line)
	}
	return out
}
