package clustertest

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// managementCluster is one CAPI management cluster as the test builds it: etcd and
// kube-apiserver, CAPI's core manager and CABPK installed as `clusterctl init` installs them
// (clusterctl's provider inventory included, so that `clusterctl move` works between two of
// them), and the policy in front, as Kubewarden puts it there.
type managementCluster struct {
	a          *artifacts
	ca         *certificates // signs the webhook servers' certificates
	cp         *controlPlane
	policy     *clusterAdmissionPolicy
	server     *policyServer
	person     kubectl
	personName string
	// The controller identities CAPI's managers really run as.
	capiManager, cabpk string
	capiLog, cabpkLog  string
	// The policy-server's ServiceAccount, as the README's RBAC binds it.
	policyServerSA rbacv1.Subject
}

// startManagementCluster starts one, its logs in a; the policy server runs with policy.yaml's
// settings changed by settings.
func startManagementCluster(t *testing.T, a *artifacts, bin string, ca *certificates, settings map[string]any) *managementCluster {
	t.Helper()
	m := startCAPI(t, a, bin, ca)
	m.startPolicy(t, bin, settings)
	return m
}

// startCAPI starts the control plane and installs CAPI as clusterctl installs it, with nothing
// in front yet.
func startCAPI(t *testing.T, a *artifacts, bin string, ca *certificates) *managementCluster {
	t.Helper()
	m := &managementCluster{a: a, ca: ca, personName: "jane@example.com"}
	m.cp = startControlPlane(t, a, bin)
	{ // CAPI as clusterctl installs it.
		capiDir, _ := capiRelease(t)
		m.cp.createAll(t, readObjects(t, readFile(t, filepath.Join(capiDir, "cmd/clusterctl/config/manifest/clusterctl-api.yaml"))))
		m.cp.createAll(t, readObjects(t, readFile(t, "testdata/infrastructure.yaml")))
		waitEstablished(t, m.cp, []string{
			"providers.clusterctl.cluster.x-k8s.io",
			"testmachinepools.infrastructure.cluster-test.rollout-policy.dev",
			"testmachinetemplates.infrastructure.cluster-test.rollout-policy.dev",
			"testmachines.infrastructure.cluster-test.rollout-policy.dev",
			"testcontrolplanes.controlplane.cluster-test.rollout-policy.dev",
		})
		core := installProvider(t, a, m.cp, ca, bin, provider{
			name: "capi-manager", kustomization: coreKustomization(t),
			inventory: inventory{name: "cluster-api", kind: "CoreProvider"},
		})
		kubeadm := installProvider(t, a, m.cp, ca, bin, provider{
			name:          "capi-kubeadm-bootstrap-manager",
			kustomization: "bootstrap/kubeadm/config/default",
			extraArgs:     []string{"--bootstrap-token-ttl=" + tokenTTL.String()},
			inventory:     inventory{name: "kubeadm", kind: "BootstrapProvider"},
		})
		m.capiManager = "system:serviceaccount:" + strings.ReplaceAll(core.serviceAccount, "/", ":")
		m.cabpk = "system:serviceaccount:" + strings.ReplaceAll(kubeadm.serviceAccount, "/", ":")
		m.capiLog, m.cabpkLog = core.process.log, kubeadm.process.log
	}
	return m
}

// startPolicy puts the policy in front, as Kubewarden puts it there, once CAPI's managers
// run; and makes the person.
func (m *managementCluster) startPolicy(t *testing.T, bin string, settings map[string]any) {
	t.Helper()
	a, ca := m.a, m.ca
	{
		m.policy = readPolicy(t)
		controllerUsers := stringList(m.policy.Spec.Settings["controllerUsers"])
		for _, identity := range []string{m.capiManager, m.cabpk} {
			if !slices.Contains(controllerUsers, identity) {
				t.Fatalf("CAPI's manager runs as %s, which policy.yaml's controllerUsers %v does not list", identity, controllerUsers)
			}
		}
		// The policy-server's ServiceAccount with the RBAC the README documents.
		rbac := readObjects(t, lookupsRBAC(t))
		m.policyServerSA = serviceAccountOf(t, rbac)
		m.cp.createNamespace(t, m.policyServerSA.Namespace)
		must(t, m.cp.client.Create(context.Background(), &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: m.policyServerSA.Name, Namespace: m.policyServerSA.Namespace},
		}))
		m.cp.createAll(t, rbac)
		kubeconfig := m.cp.serviceAccountKubeconfig(t, a, m.policyServerSA.Namespace, m.policyServerSA.Name)
		m.server = newPolicyServer(t, a, ca, m.policy, kubeconfig)
		m.server.start(a, settings)
		registerWebhook(t, m.cp, m.policy, m.server, ca.caPEM)
	}
	m.addPerson(t, bin)
}

// addPerson makes the person, not a controller: a platform engineer with cluster-admin.
func (m *managementCluster) addPerson(t *testing.T, bin string) {
	t.Helper()
	a := m.a
	m.person = kubectl{bin: filepath.Join(bin, "kubectl"), kubeconfig: m.cp.user(t, a, m.personName, "platform-team"), dir: a.dir}
	m.cp.bindClusterRole(t, "cluster-admin", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: m.personName})
}
