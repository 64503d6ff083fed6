package tools

import (
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/storagefacts"
	k3sv1beta1 "github.com/k3s-io/cluster-api-k3s/bootstrap/api/v1beta1"
	k3sv1beta2 "github.com/k3s-io/cluster-api-k3s/bootstrap/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"
)

// ../../testdata/storage-facts.txt's lines for k3s v0.4.0 (../v1.10 checks v0.3.1's).
// UPDATE_STORAGE_FACTS=1 rewrites them.
const storageFactsFile = "../../testdata/storage-facts.txt"

// KThreesConfig and KThreesConfigTemplate: v1beta1 served, v1beta2 stored. Every v1beta1 path
// has a place in v1beta2 (serverConfig.disableExternalCloudProvider is v1beta2's
// deprecatedDisableExternalCloudProvider, same JSON name).
func TestStorageFacts(t *testing.T) {
	k3s := storagefacts.Release(t, "github.com/k3s-io/cluster-api-k3s")
	const group = "bootstrap.cluster.x-k8s.io"
	storagefacts.Check(t, storageFactsFile, yaml.YAMLToJSON,
		storagefacts.Kind{
			Module: k3s, Group: group, Kind: "KThreesConfig", Root: "spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_kthreesconfigs.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: k3sv1beta2.KThreesConfig{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: k3sv1beta1.KThreesConfig{}}},
		},
		storagefacts.Kind{
			Module: k3s, Group: group, Kind: "KThreesConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_kthreesconfigtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: k3sv1beta2.KThreesConfigTemplate{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: k3sv1beta1.KThreesConfigTemplate{}}},
		})
}

// A KThreesConfig (and template) read through v1beta1 from v1beta2 storage carries
// cluster.x-k8s.io/conversion-data with the stored object's apiVersion and kind: through k3s'
// own conversion and controller-runtime's webhook handler, as its manager serves it.
func TestStorageFactsConversionData(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{k3sv1beta1.AddToScheme, k3sv1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	handler := conversion.NewWebhookHandler(scheme)
	meta := metav1.ObjectMeta{Name: "pool-a", Namespace: "default"}
	spec := k3sv1beta2.KThreesConfigSpec{Files: []k3sv1beta2.File{{Path: "/etc/motd", Content: "hello"}}}
	gv := k3sv1beta2.GroupVersion.String()
	storagefacts.CheckConversionData(t, handler, &k3sv1beta2.KThreesConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "KThreesConfig"}, ObjectMeta: meta, Spec: spec,
	}, k3sv1beta1.GroupVersion.String())
	storagefacts.CheckConversionData(t, handler, &k3sv1beta2.KThreesConfigTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "KThreesConfigTemplate"}, ObjectMeta: meta,
		Spec: k3sv1beta2.KThreesConfigTemplateSpec{Template: k3sv1beta2.KThreesConfigTemplateResource{Spec: spec}},
	}, k3sv1beta1.GroupVersion.String())
}
