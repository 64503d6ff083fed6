package clustertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/storagefacts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"
)

// storageFactsFile is what the policy is told about each release's stored versions
// (../docs/stored-versions.md). Each module of cluster-test checks the lines of the releases
// it pins, from their Go types: this one CAPI v1.12.10's, capi/v1.14, capi/v1.10,
// capi/rke2-v0.20 and capi/k3s-v0.4 theirs (run.sh runs all five). UPDATE_STORAGE_FACTS=1
// rewrites them.
const storageFactsFile = "testdata/storage-facts.txt"

// What CAPI v1.12.10's conversion does with the v1beta1 paths (below spec, or a template's
// spec.template.spec) that v1beta2 has no same-shaped place for, instead of dropping them.
// Files of sigs.k8s.io/cluster-api@v1.12.10; ConvertTo (v1beta1 -> v1beta2) is
// api/bootstrap/kubeadm/v1beta1/conversion.go:34 (KubeadmConfig) and :258 (the template).
var kubeadmMappedV1_12 = map[string]string{
	// The maps of v1beta1 become lists of {name, value} sorted by name (ConvertToArgs).
	"clusterConfiguration.apiServer.extraArgs":            "a list of {name, value}: api/bootstrap/kubeadm/v1beta1/conversion.go:471",
	"clusterConfiguration.controllerManager.extraArgs":    "a list of {name, value}: api/bootstrap/kubeadm/v1beta1/conversion.go:489",
	"clusterConfiguration.scheduler.extraArgs":            "a list of {name, value}: api/bootstrap/kubeadm/v1beta1/conversion.go:504",
	"clusterConfiguration.etcd.local.extraArgs":           "a list of {name, value}: api/bootstrap/kubeadm/v1beta1/conversion.go:555",
	"initConfiguration.nodeRegistration.kubeletExtraArgs": "a list of {name, value}: api/bootstrap/kubeadm/v1beta1/conversion.go:572",
	"joinConfiguration.nodeRegistration.kubeletExtraArgs": "a list of {name, value}: api/bootstrap/kubeadm/v1beta1/conversion.go:572",
	// Durations become whole seconds (truncated: ConvertToSeconds, api/core/v1beta2/conversion.go:39).
	"clusterConfiguration.apiServer.timeoutForControlPlane": "initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds and joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds: api/bootstrap/kubeadm/v1beta1/conversion.go:208-213",
	"joinConfiguration.discovery.timeout":                   "joinConfiguration.timeouts.tlsBootstrapSeconds: api/bootstrap/kubeadm/v1beta1/conversion.go:214-215",
	"initConfiguration.bootstrapTokens[*].ttl":              "initConfiguration.bootstrapTokens[*].ttlSeconds: api/bootstrap/kubeadm/v1beta1/conversion.go:616",
}

func kubeadmKinds(release string, mapped map[string]string) []storagefacts.Kind {
	const group = "bootstrap.cluster.x-k8s.io"
	return []storagefacts.Kind{
		{
			Module: release, Group: group, Kind: "KubeadmConfig", Root: "spec",
			CRD:     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: bootstrapv1.KubeadmConfig{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: bootstrapv1beta1.KubeadmConfig{}}},
			Mapped:  mapped,
		},
		{
			Module: release, Group: group, Kind: "KubeadmConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: bootstrapv1.KubeadmConfigTemplate{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: bootstrapv1beta1.KubeadmConfigTemplate{}}},
			Mapped:  mapped,
		},
	}
}

// testdata/storage-facts.txt's lines for CAPI v1.12.10 are what its KubeadmConfig and
// KubeadmConfigTemplate types say.
func TestStorageFacts(t *testing.T) {
	storagefacts.Check(t, storageFactsFile, yaml.YAMLToJSON, kubeadmKinds(storagefacts.Release(t, "sigs.k8s.io/cluster-api"), kubeadmMappedV1_12)...)
}

// Every release in testdata/storage-facts.txt is one that a module of cluster-test pins, and
// every pinned release has lines: a line of a release no module checks would never fail.
func TestStorageFactsReleases(t *testing.T) {
	providers := []string{"sigs.k8s.io/cluster-api", "github.com/rancher/cluster-api-provider-rke2", "github.com/k3s-io/cluster-api-k3s"}
	pinned := map[string]string{} // release -> the go.mod requiring it directly
	for _, gomod := range []string{"go.mod", "capi/v1.14/go.mod", "capi/v1.10/go.mod", "capi/rke2-v0.20/go.mod", "capi/k3s-v0.4/go.mod"} {
		for _, r := range parseModFile(t, gomod).Require {
			for _, p := range providers {
				if r.Mod.Path == p && !r.Indirect {
					pinned[p+"@"+r.Mod.Version] = gomod
				}
			}
		}
	}
	data, err := os.ReadFile(storageFactsFile)
	framework.Must(t, err)
	lines := map[string]bool{}
	for i, l := range strings.Split(string(data), "\n") {
		cols := strings.Fields(l)
		if len(cols) == 0 || strings.HasPrefix(cols[0], "#") {
			continue
		}
		lines[cols[0]] = true
		if _, ok := pinned[cols[0]]; !ok {
			t.Errorf("%s:%d: %s is pinned by no module of cluster-test, so no test checks this line", storageFactsFile, i+1, cols[0])
		}
	}
	for release, gomod := range pinned {
		if !lines[release] {
			t.Errorf("%s: no line for %s, which %s pins (UPDATE_STORAGE_FACTS=1 in %s's folder writes them)", storageFactsFile, release, gomod, filepath.Dir(gomod))
		}
	}
}

// A KubeadmConfig (and template) read through v1beta1 from v1beta2 storage carries
// cluster.x-k8s.io/conversion-data, holding the v1beta2 object's JSON with apiVersion and kind;
// written back through v1beta1, the stored v1beta2 object does not. Through CAPI v1.12.10's
// own conversion (controller-runtime's webhook handler, as the CABPK manager serves it).
func TestStorageFactsConversionData(t *testing.T) {
	scheme := runtime.NewScheme()
	framework.Must(t, bootstrapv1beta1.AddToScheme(scheme))
	framework.Must(t, bootstrapv1.AddToScheme(scheme))
	handler := conversion.NewWebhookHandler(scheme)
	spec := bootstrapv1.KubeadmConfigSpec{Files: []bootstrapv1.File{{Path: "/etc/motd", Content: "hello"}}}
	meta := metav1.ObjectMeta{Name: "pool-a", Namespace: "default"}
	gv := bootstrapv1.GroupVersion.String()
	storagefacts.CheckConversionData(t, handler, &bootstrapv1.KubeadmConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "KubeadmConfig"}, ObjectMeta: meta, Spec: spec,
	}, bootstrapv1beta1.GroupVersion.String())
	storagefacts.CheckConversionData(t, handler, &bootstrapv1.KubeadmConfigTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "KubeadmConfigTemplate"}, ObjectMeta: meta,
		Spec: bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: spec}},
	}, bootstrapv1beta1.GroupVersion.String())
}
