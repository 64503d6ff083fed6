package tools

import (
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/storagefacts"
	rke2v1alpha1 "github.com/rancher/cluster-api-provider-rke2/bootstrap/api/v1alpha1"
	rke2v1beta1 "github.com/rancher/cluster-api-provider-rke2/bootstrap/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"
)

// ../../testdata/storage-facts.txt's lines for RKE2 v0.20.1 (../v1.10 checks v0.21.0's, the
// same way). UPDATE_STORAGE_FACTS=1 rewrites them.
const storageFactsFile = "../../testdata/storage-facts.txt"

// RKE2Config and RKE2ConfigTemplate: v1alpha1 served, v1beta1 stored. RKE2's conversion maps
// nothing by hand that v1beta1 lacks: agentConfig.version, the one v1alpha1 field without a
// place, is dropped (bootstrap/api/v1alpha1/conversion.go:162-165).
func TestStorageFacts(t *testing.T) {
	const group = "bootstrap.cluster.x-k8s.io"
	release := storagefacts.Release(t, "github.com/rancher/cluster-api-provider-rke2")
	storagefacts.Check(t, storageFactsFile, yaml.YAMLToJSON,
		storagefacts.Kind{
			Module: release, Group: group, Kind: "RKE2Config", Root: "spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_rke2configs.yaml",
			Storage: storagefacts.Version{Name: "v1beta1", Object: rke2v1beta1.RKE2Config{}},
			Older:   []storagefacts.Version{{Name: "v1alpha1", Object: rke2v1alpha1.RKE2Config{}}},
		},
		storagefacts.Kind{
			Module: release, Group: group, Kind: "RKE2ConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_rke2configtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta1", Object: rke2v1beta1.RKE2ConfigTemplate{}},
			Older:   []storagefacts.Version{{Name: "v1alpha1", Object: rke2v1alpha1.RKE2ConfigTemplate{}}},
		},
	)
}

// A v1alpha1 read from v1beta1 storage carries cluster.x-k8s.io/conversion-data with the stored
// object's apiVersion and kind (RKE2's own conversion through controller-runtime's handler).
func TestStorageFactsConversionData(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{rke2v1alpha1.AddToScheme, rke2v1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	handler := conversion.NewWebhookHandler(scheme)
	meta := metav1.ObjectMeta{Name: "pool-a", Namespace: "default"}
	spec := rke2v1beta1.RKE2ConfigSpec{Files: []rke2v1beta1.File{{Path: "/etc/motd", Content: "hello"}}}
	gv := rke2v1beta1.GroupVersion.String()
	storagefacts.CheckConversionData(t, handler, &rke2v1beta1.RKE2Config{
		TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "RKE2Config"}, ObjectMeta: meta, Spec: spec,
	}, rke2v1alpha1.GroupVersion.String())
	storagefacts.CheckConversionData(t, handler, &rke2v1beta1.RKE2ConfigTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "RKE2ConfigTemplate"}, ObjectMeta: meta,
		Spec: rke2v1beta1.RKE2ConfigTemplateSpec{Template: rke2v1beta1.RKE2ConfigTemplateResource{Spec: spec}},
	}, rke2v1alpha1.GroupVersion.String())
}
