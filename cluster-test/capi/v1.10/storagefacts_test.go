package tools

import (
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/storagefacts"
	k3sv1beta1 "github.com/k3s-io/cluster-api-k3s/bootstrap/api/v1beta1"
	k3sv1beta2 "github.com/k3s-io/cluster-api-k3s/bootstrap/api/v1beta2"
	rke2v1alpha1 "github.com/rancher/cluster-api-provider-rke2/bootstrap/api/v1alpha1"
	rke2v1beta1 "github.com/rancher/cluster-api-provider-rke2/bootstrap/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"
)

// ../../testdata/storage-facts.txt's lines for CAPI v1.10.10, RKE2 v0.21.0 and k3s v0.3.1
// (../../storagefacts_test.go checks CAPI v1.12.10's). UPDATE_STORAGE_FACTS=1 rewrites them.
const storageFactsFile = "../../testdata/storage-facts.txt"

const group = "bootstrap.cluster.x-k8s.io"

// RKE2Config and RKE2ConfigTemplate (as ../rke2-v0.20 checks v0.20.1's): v1alpha1 served,
// v1beta1 stored. RKE2's conversion maps nothing by hand that v1beta1 lacks:
// agentConfig.version, the one v1alpha1 field without a place, is dropped
// (bootstrap/api/v1alpha1/conversion.go:162-165).
func rke2Kinds(release string) []storagefacts.Kind {
	return []storagefacts.Kind{
		{
			Module: release, Group: group, Kind: "RKE2Config", Root: "spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_rke2configs.yaml",
			Storage: storagefacts.Version{Name: "v1beta1", Object: rke2v1beta1.RKE2Config{}},
			Older:   []storagefacts.Version{{Name: "v1alpha1", Object: rke2v1alpha1.RKE2Config{}}},
		},
		{
			Module: release, Group: group, Kind: "RKE2ConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_rke2configtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta1", Object: rke2v1beta1.RKE2ConfigTemplate{}},
			Older:   []storagefacts.Version{{Name: "v1alpha1", Object: rke2v1alpha1.RKE2ConfigTemplate{}}},
		},
	}
}

func TestStorageFacts(t *testing.T) {
	capi := storagefacts.Release(t, "sigs.k8s.io/cluster-api")
	k3s := storagefacts.Release(t, "github.com/k3s-io/cluster-api-k3s")
	kinds := []storagefacts.Kind{
		// CAPI v1.10 serves v1beta1 only (v1alpha3 and v1alpha4 are in its CRDs, not served):
		// no conversion on any request, only v1beta1's own zero-is-absent fields.
		{
			Module: capi, Group: group, Kind: "KubeadmConfig", Root: "spec",
			CRD:     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml",
			Storage: storagefacts.Version{Name: "v1beta1", Object: bootstrapv1.KubeadmConfig{}},
		},
		{
			Module: capi, Group: group, Kind: "KubeadmConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta1", Object: bootstrapv1.KubeadmConfigTemplate{}},
		},
		// k3s: v1beta1 served, v1beta2 stored. Every v1beta1 path has a place in v1beta2
		// (serverConfig.disableExternalCloudProvider is v1beta2's
		// deprecatedDisableExternalCloudProvider, same JSON name).
		{
			Module: k3s, Group: group, Kind: "KThreesConfig", Root: "spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_kthreesconfigs.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: k3sv1beta2.KThreesConfig{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: k3sv1beta1.KThreesConfig{}}},
		},
		{
			Module: k3s, Group: group, Kind: "KThreesConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/config/crd/bases/bootstrap.cluster.x-k8s.io_kthreesconfigtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: k3sv1beta2.KThreesConfigTemplate{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: k3sv1beta1.KThreesConfigTemplate{}}},
		},
	}
	kinds = append(kinds, rke2Kinds(storagefacts.Release(t, "github.com/rancher/cluster-api-provider-rke2"))...)
	storagefacts.Check(t, storageFactsFile, yaml.YAMLToJSON, kinds...)
}

// RKE2 (v1alpha1 read from v1beta1 storage) and k3s (v1beta1 read from v1beta2 storage) use
// CAPI's utilconversion too: the older version read carries cluster.x-k8s.io/conversion-data
// with the stored object's apiVersion and kind. Through each provider's own conversion and
// controller-runtime's webhook handler, as their managers serve it.
func TestStorageFactsConversionData(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{rke2v1alpha1.AddToScheme, rke2v1beta1.AddToScheme, k3sv1beta1.AddToScheme, k3sv1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	handler := conversion.NewWebhookHandler(scheme)
	meta := metav1.ObjectMeta{Name: "pool-a", Namespace: "default"}

	rke2 := rke2v1beta1.RKE2ConfigSpec{Files: []rke2v1beta1.File{{Path: "/etc/motd", Content: "hello"}}}
	rke2GV := rke2v1beta1.GroupVersion.String()
	storagefacts.CheckConversionData(t, handler, &rke2v1beta1.RKE2Config{
		TypeMeta: metav1.TypeMeta{APIVersion: rke2GV, Kind: "RKE2Config"}, ObjectMeta: meta, Spec: rke2,
	}, rke2v1alpha1.GroupVersion.String())
	storagefacts.CheckConversionData(t, handler, &rke2v1beta1.RKE2ConfigTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: rke2GV, Kind: "RKE2ConfigTemplate"}, ObjectMeta: meta,
		Spec: rke2v1beta1.RKE2ConfigTemplateSpec{Template: rke2v1beta1.RKE2ConfigTemplateResource{Spec: rke2}},
	}, rke2v1alpha1.GroupVersion.String())

	k3s := k3sv1beta2.KThreesConfigSpec{Files: []k3sv1beta2.File{{Path: "/etc/motd", Content: "hello"}}}
	k3sGV := k3sv1beta2.GroupVersion.String()
	storagefacts.CheckConversionData(t, handler, &k3sv1beta2.KThreesConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: k3sGV, Kind: "KThreesConfig"}, ObjectMeta: meta, Spec: k3s,
	}, k3sv1beta1.GroupVersion.String())
	storagefacts.CheckConversionData(t, handler, &k3sv1beta2.KThreesConfigTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: k3sGV, Kind: "KThreesConfigTemplate"}, ObjectMeta: meta,
		Spec: k3sv1beta2.KThreesConfigTemplateSpec{Template: k3sv1beta2.KThreesConfigTemplateResource{Spec: k3s}},
	}, k3sv1beta1.GroupVersion.String())
}
