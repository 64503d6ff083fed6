package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The v1beta1 era: CAPI v1.10.10 (capi/v1.10), the last release that stores v1beta1 and whose
// KubeadmConfig has a defaulting webhook. It prunes zero values: controller-runtime's
// DefaulterRemoveUnknownOrOmitableFields re-marshals the Go type on every CREATE and UPDATE,
// whoever sends it, so a `false`, `""` or `[]` under an omitempty field disappears, and
// KubeadmConfigSpec.Default fills spec.format and each nodeRegistration.imagePullPolicy.
var (
	kubeadmConfigV1beta1GVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta1", Kind: "KubeadmConfig"}
	machinePoolV1beta1GVK   = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachinePool"}
)

// capiBinaries is capi/build.sh's folder of a module's managers (built now unless done).
func capiBinaries(t *testing.T, folder string) string {
	t.Helper()
	out, err := exec.Command("capi/build.sh", folder).Output()
	if err != nil {
		t.Fatalf("capi/build.sh %s: %v", folder, err)
	}
	return strings.TrimSpace(string(out))
}

// startV1beta1Cluster is a management cluster of CAPI v1.10.10 as clusterctl installs it (core
// manager and CABPK from capi/v1.10, the test's infrastructure and control plane CRDs with
// the v1beta1 contract's label), the policy in front; Cluster c1 on the control plane that
// controlPlane creates (not yet initialized) and names in its controlPlaneRef. bin is
// build.sh's folder (etcd, kube-apiserver, kubectl).
func startV1beta1Cluster(t *testing.T, a *framework.Artifacts, bin string, controlPlane func(m *framework.ManagementCluster) (ref string)) *framework.ManagementCluster {
	t.Helper()
	ca := framework.NewCA(t)
	m := &framework.ManagementCluster{Artifacts: a, CA: ca, PersonName: "jane@example.com"}
	m.CP = framework.StartControlPlane(t, a, bin)
	capiDir, capiVersion := framework.PinnedModule(t, filepath.Join("capi", "v1.10"), "sigs.k8s.io/cluster-api")
	managers := capiBinaries(t, "v1.10")
	m.CP.CreateAll(t, framework.ReadObjects(t, framework.ReadFile(t, filepath.Join(capiDir, "cmd/clusterctl/config/manifest/clusterctl-api.yaml"))))
	infrastructure := framework.ReadObjects(t, framework.ReadFile(t, "testdata/infrastructure.yaml"))
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
	framework.WaitEstablished(t, m.CP, append(crds, "providers.clusterctl.cluster.x-k8s.io"))
	core := framework.InstallProvider(t, a, m.CP, ca, managers, framework.Provider{
		Name: "capi-manager", Kustomization: "config/default", Module: capiDir, Version: capiVersion,
		Inventory: framework.Inventory{Name: "cluster-api", Kind: "CoreProvider"},
	})
	kubeadm := framework.InstallProvider(t, a, m.CP, ca, managers, framework.Provider{
		Name: "capi-kubeadm-bootstrap-manager", Kustomization: "bootstrap/kubeadm/config/default", Module: capiDir, Version: capiVersion,
		ExtraArgs: []string{"--bootstrap-token-ttl=" + framework.TokenTTL.String()},
		Inventory: framework.Inventory{Name: "kubeadm", Kind: "BootstrapProvider"},
	})
	m.CAPIManager = "system:serviceaccount:" + strings.ReplaceAll(core.ServiceAccount, "/", ":")
	m.CABPK = "system:serviceaccount:" + strings.ReplaceAll(kubeadm.ServiceAccount, "/", ":")
	m.CAPILog, m.CABPKLog = core.Process.Log, kubeadm.Process.Log
	m.StartPolicy(t, bin, nil)

	m.CreateClusterSecrets(t)
	controlPlaneRef := controlPlane(m)
	m.CP.CreateAll(t, []*unstructured.Unstructured{framework.Object(t, fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: %s, namespace: %s}
spec:
  controlPlaneEndpoint: {host: %q, port: %d}
  controlPlaneRef: %s`, framework.ClusterName, framework.Namespace, m.CP.Host, m.CP.Port, controlPlaneRef))})
	return m
}

// TestV1beta1Era: the configs and a KubeadmConfigTemplate of the same spec, stored before CAPI
// v1.10's defaulters ran. It found two misreadings, now fixed and kept here as regressions: the
// template's defaulter fills format and imagePullPolicy, and the defaulters re-marshal
// durations (`timeout: 5m` comes back `5m0s`).
func TestV1beta1Era(t *testing.T) { v1beta1Era(t, "kubeadmconfig.yaml", true) }

// v1beta1Era runs the steps with testdata/v1beta1/<manifest> as both configs; withTemplate: a
// KubeadmConfigTemplate of the same spec, stored with them, and the template's steps first.
func v1beta1Era(t *testing.T, manifest string, withTemplate bool) {
	ctrllog.SetLogger(logr.Discard())
	bin := clusterBinaries(t)
	a := testArtifacts(t)
	m := startV1beta1Cluster(t, a, bin, testControlPlane(t))
	controlPlane := schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"}

	// Two configs with the zero values CAPI v1.10's defaulter prunes, stored before it
	// could: era-person gets a person's write first, era-cabpk CABPK's.
	configs := []string{"era-person", "era-cabpk"}
	m.WriteConfigs(t, "era.yaml", filepath.Join("testdata", "v1beta1", manifest), configs)
	pools := m.Pools(t, "bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfig", configs...)
	var template framework.BootstrapTemplate
	if withTemplate {
		template = m.WriteTemplate(t, strings.ReplaceAll(string(framework.ReadFile(t, filepath.Join("testdata", "v1beta1", manifest))), "NAME", "era"), "era")
	}
	restore := m.WithoutDefaulter(t, "kubeadmconfigs", "kubeadmconfigtemplates")
	for _, file := range []string{"era.yaml", pools} {
		if r := m.Person.Run(t, "apply", "-f", file); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	if withTemplate {
		m.ApplyTemplate(t, template)
	}
	for _, name := range configs {
		m.WaitFor(t, kubeadmConfigV1beta1GVK, name, 2*time.Minute, "adopted by its pool", func(u *unstructured.Unstructured) bool {
			return framework.ControlledByPool(u, name)
		})
	}
	stored := m.Get(t, kubeadmConfigV1beta1GVK, "era-person")
	t.Logf("era-person as stored before the defaulter:\n%s", framework.SpecYAML(t, stored))
	for _, path := range zeroValues {
		if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, path...); !found {
			t.Fatalf("the stored config lacks the zero value %s the test wrote", strings.Join(path, "."))
		}
	}
	restore()

	step(t, "a person's metadata-only change is admitted, the defaulter pruning the zero values", func(t *testing.T) {
		since := time.Now()
		m.LabelAsPerson(t, kubeadmConfigV1beta1GVK, "era-person", "era.yaml", "CAPI v1.10.10")
		m.AdmittedWithoutWarning(t, "annotate", "kubeadmconfig", "era-person", "-n", framework.Namespace, "fleet.example.com/owner=platform")
		after := m.Get(t, kubeadmConfigV1beta1GVK, "era-person")
		t.Logf("era-person after the person's label (the defaulter ran):\n%s", framework.SpecYAML(t, after))
		for _, path := range zeroValues {
			if _, found, _ := unstructured.NestedFieldNoCopy(after.Object, path...); found {
				t.Errorf("the defaulter did not prune %s: the test shows nothing", strings.Join(path, "."))
			}
		}
		if format, _, _ := unstructured.NestedString(after.Object, "spec", "format"); format != "cloud-config" {
			t.Errorf("spec.format = %q, want the defaulter's cloud-config", format)
		}
		m.CheckNotAnEdit(t, since, "kubeadmconfigs", "era-person")
	})
	if withTemplate {
		templateSteps(t, m, template, "CAPI v1.10.10", [2]string{`max-pods: "110"`, `max-pods: "64"`},
			"joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed")
	}
	step(t, "CABPK's first write and token rotations are admitted, none judged an edit", func(t *testing.T) {
		since := time.Now()
		m.MarkV1beta1Ready(t, controlPlane, map[string]any{"ready": true, "initialized": true}, configs...)
		tokens := map[string][]string{}
		deadline := time.Now().Add(3 * time.Minute)
		for len(tokens["era-cabpk"]) < 3 || len(tokens["era-person"]) < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("tokens CABPK wrote in 3m: %v, want 3 each (log: %s)", tokens, m.CABPKLog)
			}
			for _, name := range configs {
				token, _, _ := unstructured.NestedString(m.Get(t, kubeadmConfigV1beta1GVK, name).Object, framework.TokenPath...)
				if token != "" && !slices.Contains(tokens[name], token) {
					tokens[name] = append(tokens[name], token)
				}
			}
			time.Sleep(time.Second)
		}
		t.Logf("tokens CABPK wrote: %v", tokens)
		for _, name := range configs {
			var cabpk int
			for _, e := range m.CheckNotAnEdit(t, since, "kubeadmconfigs", name) {
				if e.User.Username == m.CABPK && e.Resource() == "kubeadmconfigs" {
					cabpk++
				}
			}
			if cabpk < 3 {
				t.Errorf("the audit log shows %d CABPK writes of %s, want at least 3", cabpk, name)
			}
		}
		m.CheckNoWarningsTo(t, m.CABPKLog)
		m.CheckControllersAdmitted(t, since)
		m.CheckControllersJudged(t, true)
	})
	step(t, "re-applying the manifests with their zero values is admitted without a warning", func(t *testing.T) {
		since := time.Now()
		m.AdmittedWithoutWarning(t, "apply", "-f", "era.yaml")
		m.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", "era.yaml")
		m.CheckPersonAdmitted(t, since)
	})
	step(t, "a person's real edit is refused, naming the field", func(t *testing.T) {
		edited := strings.Replace(string(framework.ReadFile(t, a.Path("era.yaml"))), `max-pods: "110"`, `max-pods: "64"`, 1)
		framework.Must(t, os.WriteFile(a.Path("era-edited.yaml"), []byte(edited), 0o644))
		r := m.Person.Run(t, "apply", "-f", "era-edited.yaml")
		for _, want := range []string{
			fmt.Sprintf("admission webhook %q denied the request", m.WebhookName()),
			"spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed",
			"The config is in use by MachinePool fleet/era-person",
		} {
			if r.Err == nil || !strings.Contains(r.Stderr, want) {
				t.Errorf("want a refusal with %q: %v\n%s", want, r.Err, r.Stderr)
			}
		}
	})
	step(t, "useExperimentalRetryJoin, stored in v1beta1, changed is refused as an edit", func(t *testing.T) {
		// CAPI v1.10 stores v1beta1: nothing is converted, the field is stored and rendered
		// into the join of new nodes only. (On v1beta2 storage the same apply is admitted with a
		// no-effect warning: TestCluster's v1beta1 step.)
		edited := strings.Replace(string(framework.ReadFile(t, a.Path("era.yaml"))), "useExperimentalRetryJoin: false", "useExperimentalRetryJoin: true", 1)
		framework.Must(t, os.WriteFile(a.Path("era-retry-join.yaml"), []byte(edited), 0o644))
		r := m.Person.Run(t, "apply", "-f", "era-retry-join.yaml")
		if want := "[spec.useExperimentalRetryJoin: Forbidden: added]"; r.Err == nil || !strings.Contains(r.Stderr, want) {
			t.Errorf("want a refusal naming only %q: %v\n%s", want, r.Err, r.Stderr)
		}
	})
	step(t, "no controller write was refused by the policy in the whole run", func(t *testing.T) {
		m.CheckControllersAdmitted(t, time.Time{})
		m.CheckControllersJudged(t, true)
	})
}

// testArtifacts is newArtifacts' folder for this test alone, <artifacts>/<test name>: `make
// cluster-test` runs it after TestCluster, whose logs stay in <artifacts>.
func testArtifacts(t *testing.T) *framework.Artifacts {
	t.Helper()
	base := os.Getenv("CLUSTER_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join("..", "target", "cluster-test")
	}
	t.Setenv("CLUSTER_TEST_ARTIFACTS", filepath.Join(base, t.Name()))
	return framework.NewArtifacts(t)
}

// testControlPlane creates the test's own control plane for Cluster c1.
func testControlPlane(t *testing.T) func(m *framework.ManagementCluster) string {
	return func(m *framework.ManagementCluster) string {
		m.CP.CreateAll(t, []*unstructured.Unstructured{framework.Object(t, fmt.Sprintf(`
apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1
kind: TestControlPlane
metadata: {name: %s, namespace: %s}
spec: {version: v1.34.3}`, framework.ClusterName, framework.Namespace))})
		return fmt.Sprintf("{apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1, kind: TestControlPlane, name: %s}", framework.ClusterName)
	}
}

// zeroValues are the paths of testdata/v1beta1/kubeadmconfig.yaml that CAPI v1.10's defaulter
// prunes: omitempty fields at their zero value.
// (files[0].append too, which a path without list indices cannot name).
var zeroValues = [][]string{
	{"spec", "useExperimentalRetryJoin"},
	{"spec", "preKubeadmCommands"},
	{"spec", "joinConfiguration", "skipPhases"},
	{"spec", "joinConfiguration", "discovery", "bootstrapToken", "unsafeSkipCAVerification"},
	{"spec", "joinConfiguration", "nodeRegistration", "ignorePreflightErrors"},
}
