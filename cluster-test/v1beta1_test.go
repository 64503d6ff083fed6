package clustertest

import (
	"fmt"
	"os"
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

// TestV1beta1Era: the configs and a KubeadmConfigTemplate of the same spec, stored before CAPI
// v1.10's defaulters ran. Two of its checks are regressions of misreadings: the template's
// defaulter fills format and imagePullPolicy, and the defaulters re-marshal durations
// (`timeout: 5m` comes back `5m0s`).
func TestV1beta1Era(t *testing.T) { v1beta1Era(t, "kubeadmconfig.yaml", true) }

// v1beta1Era runs the steps with testdata/v1beta1/<manifest> as both configs; withTemplate: a
// KubeadmConfigTemplate of the same spec, stored with them, and the template's steps first.
func v1beta1Era(t *testing.T, manifest string, withTemplate bool) {
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.ArtifactsForTest(t)
	m := framework.StartV1beta1Cluster(t, a, bin, framework.CreateTestControlPlane(t))

	// Two configs with the zero values CAPI v1.10's defaulter prunes, stored before it
	// could: era-person gets a person's write first, era-cabpk CABPK's.
	configs := []string{"era-person", "era-cabpk"}
	template := eraStoreBeforeDefaulter(t, m, manifest, configs, withTemplate)

	step(t, "a person's metadata-only change is admitted, the defaulter pruning the zero values", func(t *testing.T) {
		eraMetadataOnlyChange(t, m)
	})
	if withTemplate {
		templateSteps(t, m, template, "CAPI v1.10.10", [2]string{`max-pods: "110"`, `max-pods: "64"`},
			"joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed")
	}
	step(t, "CABPK's first write and token rotations are admitted, none judged an edit", func(t *testing.T) {
		eraCABPKWrites(t, m, configs)
	})
	step(t, "re-applying the manifests with their zero values is admitted without a warning", func(t *testing.T) {
		since := time.Now()
		m.AdmittedWithoutWarning(t, "apply", "-f", "era.yaml")
		m.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", "era.yaml")
		m.CheckPersonAdmitted(t, since)
	})
	step(t, "a person's real edit is refused, naming the field", func(t *testing.T) {
		eraRealEdit(t, m, a)
	})
	step(t, "useExperimentalRetryJoin, stored in v1beta1, changed is refused as an edit", func(t *testing.T) {
		eraRetryJoinChanged(t, m, a)
	})
	step(t, "no controller write was refused by the policy in the whole run", func(t *testing.T) {
		m.CheckControllersAdmitted(t, time.Time{})
		m.CheckControllersJudged(t, true)
	})
}

// eraStoreBeforeDefaulter writes the configs (and, withTemplate, the template) from
// testdata/v1beta1/<manifest>, applies them and their pools with the defaulter out of the way,
// waits for each pool to adopt its config, checks era-person was stored with every zero value,
// and puts the defaulter back. It returns the template (zero without withTemplate).
func eraStoreBeforeDefaulter(t *testing.T, m *framework.ManagementCluster, manifest string, configs []string, withTemplate bool) framework.BootstrapTemplate {
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
	return template
}

// eraMetadataOnlyChange: a person's label and annotation of era-person are admitted without a
// warning, the defaulter prunes its zero values and fills spec.format, and none is an edit.
func eraMetadataOnlyChange(t *testing.T, m *framework.ManagementCluster) {
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
}

// eraCABPKWrites marks the control plane ready, waits for CABPK to write 3 tokens into each
// config, and checks its writes were admitted without a warning and judged no edit.
func eraCABPKWrites(t *testing.T, m *framework.ManagementCluster, configs []string) {
	controlPlane := schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"}
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
}

// eraRealEdit: a person's apply of era.yaml with max-pods changed is refused, naming the field
// and the pool that uses the config.
func eraRealEdit(t *testing.T, m *framework.ManagementCluster, a *framework.Artifacts) {
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
}

// eraRetryJoinChanged: a person's apply of era.yaml with useExperimentalRetryJoin turned on is
// refused, naming that field alone.
func eraRetryJoinChanged(t *testing.T, m *framework.ManagementCluster, a *framework.Artifacts) {
	// CAPI v1.10 stores v1beta1: nothing is converted, the field is stored and rendered
	// into the join of new nodes only. (On v1beta2 storage the same apply is admitted with a
	// no-effect warning: TestCluster's v1beta1 step.)
	edited := strings.Replace(string(framework.ReadFile(t, a.Path("era.yaml"))), "useExperimentalRetryJoin: false", "useExperimentalRetryJoin: true", 1)
	framework.Must(t, os.WriteFile(a.Path("era-retry-join.yaml"), []byte(edited), 0o644))
	r := m.Person.Run(t, "apply", "-f", "era-retry-join.yaml")
	if want := "[spec.useExperimentalRetryJoin: Forbidden: added]"; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("want a refusal naming only %q: %v\n%s", want, r.Err, r.Stderr)
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
