package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagementCluster is one CAPI management cluster as the test builds it: etcd and
// kube-apiserver, CAPI's core manager and CABPK installed as `clusterctl init` installs them
// (clusterctl's provider inventory included, so that `clusterctl move` works between two of
// them), and the policy in front, as Kubewarden puts it there.
type ManagementCluster struct {
	Artifacts  *Artifacts
	CA         *Certificates // signs the webhook servers' certificates
	CP         *ControlPlane
	Policy     *ClusterAdmissionPolicy
	Server     *PolicyServer
	Person     Kubectl
	PersonName string
	// The controller identities CAPI's managers really run as.
	CAPIManager, CABPK string
	CAPILog, CABPKLog  string
	// The policy-server's ServiceAccount, as the README's RBAC binds it.
	PolicyServerSA rbacv1.Subject
}

// StartManagementCluster starts one, its logs in a; the policy server runs with policy.yaml's
// settings changed by settings.
func StartManagementCluster(t *testing.T, a *Artifacts, bin string, ca *Certificates, settings map[string]any) *ManagementCluster {
	t.Helper()
	m := StartCAPI(t, a, bin, ca)
	m.StartPolicy(t, bin, settings)
	return m
}

// StartCAPI starts the control plane and installs CAPI as clusterctl installs it, with nothing
// in front yet.
func StartCAPI(t *testing.T, a *Artifacts, bin string, ca *Certificates) *ManagementCluster {
	t.Helper()
	m := &ManagementCluster{Artifacts: a, CA: ca, PersonName: "jane@example.com"}
	m.CP = StartControlPlane(t, a, bin)
	{ // CAPI as clusterctl installs it.
		capiDir, _ := capiRelease(t)
		m.CP.CreateAll(t, ReadObjects(t, ReadFile(t, filepath.Join(capiDir, "cmd/clusterctl/config/manifest/clusterctl-api.yaml"))))
		infrastructure := ReadObjects(t, ReadFile(t, "testdata/infrastructure.yaml"))
		m.CP.CreateAll(t, infrastructure)
		crds := []string{"providers.clusterctl.cluster.x-k8s.io"}
		for _, obj := range infrastructure {
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj.GetName())
			}
		}
		WaitEstablished(t, m.CP, crds)
		core := InstallProvider(t, a, m.CP, ca, bin, Provider{
			Name: "capi-manager", Kustomization: coreKustomization(t),
			Inventory: Inventory{Name: "cluster-api", Kind: "CoreProvider"},
			// As CAPI's quick start installs it (`CLUSTER_TOPOLOGY=true clusterctl init`): the
			// ClusterClass and topology controllers and webhooks run (clusterclass_test.go).
			Variables: map[string]string{"CLUSTER_TOPOLOGY": "true"},
		})
		kubeadm := InstallProvider(t, a, m.CP, ca, bin, Provider{
			Name:          "capi-kubeadm-bootstrap-manager",
			Kustomization: "bootstrap/kubeadm/config/default",
			ExtraArgs:     []string{"--bootstrap-token-ttl=" + tokenTTL.String()},
			Inventory:     Inventory{Name: "kubeadm", Kind: "BootstrapProvider"},
		})
		m.CAPIManager = "system:serviceaccount:" + strings.ReplaceAll(core.ServiceAccount, "/", ":")
		m.CABPK = "system:serviceaccount:" + strings.ReplaceAll(kubeadm.ServiceAccount, "/", ":")
		m.CAPILog, m.CABPKLog = core.Process.Log, kubeadm.Process.Log
	}
	return m
}

// StartPolicy puts the policy in front, as Kubewarden puts it there, once CAPI's managers
// run; and makes the person.
func (m *ManagementCluster) StartPolicy(t *testing.T, bin string, settings map[string]any) {
	t.Helper()
	a, ca := m.Artifacts, m.CA
	{
		m.Policy = ReadPolicy(t)
		controllerUsers := StringList(m.Policy.Spec.Settings["controllerUsers"])
		for _, identity := range []string{m.CAPIManager, m.CABPK} {
			if !slices.Contains(controllerUsers, identity) {
				t.Fatalf("CAPI's manager runs as %s, which policy.yaml's controllerUsers %v does not list", identity, controllerUsers)
			}
		}
		// The policy-server's ServiceAccount with the RBAC the README documents.
		rbac := ReadObjects(t, LookupsRBAC(t))
		m.PolicyServerSA = ServiceAccountOf(t, rbac)
		m.CP.createNamespace(t, m.PolicyServerSA.Namespace)
		Must(t, m.CP.Client.Create(context.Background(), &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: m.PolicyServerSA.Name, Namespace: m.PolicyServerSA.Namespace},
		}))
		m.CP.CreateAll(t, rbac)
		kubeconfig := m.CP.serviceAccountKubeconfig(t, a, m.PolicyServerSA.Namespace, m.PolicyServerSA.Name)
		m.Server = NewPolicyServer(t, a, ca, m.Policy, kubeconfig)
		m.Server.Start(a, settings)
		RegisterWebhook(t, m.CP, m.Policy, m.Server, ca.CAPEM)
	}
	m.AddPerson(t, bin)
}

// AddPerson makes the person, not a controller: a platform engineer with cluster-admin.
func (m *ManagementCluster) AddPerson(t *testing.T, bin string) {
	t.Helper()
	a := m.Artifacts
	m.Person = Kubectl{Bin: filepath.Join(bin, "kubectl"), Kubeconfig: m.CP.User(t, a, m.PersonName, "platform-team"), Dir: a.Dir}
	m.CP.bindClusterRole(t, "cluster-admin", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: m.PersonName})
}

// StartV1beta1Cluster is a management cluster of CAPI v1.10.10 as clusterctl installs it (core
// manager and CABPK from capi/v1.10, the test's infrastructure and control plane CRDs with
// the v1beta1 contract's label), the policy in front; Cluster c1 on the control plane that
// controlPlane creates (not yet initialized) and names in its controlPlaneRef. bin is
// build.sh's folder (etcd, kube-apiserver, kubectl).
func StartV1beta1Cluster(t *testing.T, a *Artifacts, bin string, controlPlane func(m *ManagementCluster) (ref string)) *ManagementCluster {
	t.Helper()
	ca := NewCA(t)
	m := &ManagementCluster{Artifacts: a, CA: ca, PersonName: "jane@example.com"}
	m.CP = StartControlPlane(t, a, bin)
	capiDir, capiVersion := PinnedModule(t, filepath.Join("capi", "v1.10"), "sigs.k8s.io/cluster-api")
	managers := CAPIBinaries(t, "v1.10")
	m.CP.CreateAll(t, ReadObjects(t, ReadFile(t, filepath.Join(capiDir, "cmd/clusterctl/config/manifest/clusterctl-api.yaml"))))
	infrastructure := ReadObjects(t, ReadFile(t, "testdata/infrastructure.yaml"))
	var crds []string
	for _, obj := range infrastructure {
		if obj.GetKind() == "CustomResourceDefinition" {
			// CAPI v1.10 looks a provider's version up by the v1beta1 contract's label.
			labels := obj.GetLabels()
			labels["cluster.x-k8s.io/v1beta1"] = "v1alpha1"
			obj.SetLabels(labels)
			crds = append(crds, obj.GetName())
		}
	}
	m.CP.CreateAll(t, infrastructure)
	WaitEstablished(t, m.CP, append(crds, "providers.clusterctl.cluster.x-k8s.io"))
	core := InstallProvider(t, a, m.CP, ca, managers, Provider{
		Name: "capi-manager", Kustomization: "config/default", Module: capiDir, Version: capiVersion,
		Inventory: Inventory{Name: "cluster-api", Kind: "CoreProvider"},
	})
	kubeadm := InstallProvider(t, a, m.CP, ca, managers, Provider{
		Name: "capi-kubeadm-bootstrap-manager", Kustomization: "bootstrap/kubeadm/config/default", Module: capiDir, Version: capiVersion,
		ExtraArgs: []string{"--bootstrap-token-ttl=" + tokenTTL.String()},
		Inventory: Inventory{Name: "kubeadm", Kind: "BootstrapProvider"},
	})
	m.CAPIManager = "system:serviceaccount:" + strings.ReplaceAll(core.ServiceAccount, "/", ":")
	m.CABPK = "system:serviceaccount:" + strings.ReplaceAll(kubeadm.ServiceAccount, "/", ":")
	m.CAPILog, m.CABPKLog = core.Process.Log, kubeadm.Process.Log
	m.StartPolicy(t, bin, nil)

	m.CreateClusterSecrets(t)
	controlPlaneRef := controlPlane(m)
	m.CP.CreateAll(t, []*unstructured.Unstructured{Object(t, fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: %s, namespace: %s}
spec:
  controlPlaneEndpoint: {host: %q, port: %d}
  controlPlaneRef: %s`, ClusterName, Namespace, m.CP.Host, m.CP.Port, controlPlaneRef))})
	return m
}

// CreateTestControlPlane creates the test's own control plane for Cluster c1.
func CreateTestControlPlane(t *testing.T) func(m *ManagementCluster) string {
	return func(m *ManagementCluster) string {
		m.CP.CreateAll(t, []*unstructured.Unstructured{Object(t, fmt.Sprintf(`
apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1
kind: TestControlPlane
metadata: {name: %s, namespace: %s}
spec: {version: v1.34.3}`, ClusterName, Namespace))})
		return fmt.Sprintf("{apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1, kind: TestControlPlane, name: %s}", ClusterName)
	}
}

// PersonClient is a controller-runtime client with the person's kubeconfig, for what the person
// does through the API rather than kubectl. Its own rate limit is lifted: the client's
// throttling is not what any case measures.
func (m *ManagementCluster) PersonClient(t *testing.T) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", m.Person.Kubeconfig)
	Must(t, err)
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.New(cfg, client.Options{})
	Must(t, err)
	return c
}
