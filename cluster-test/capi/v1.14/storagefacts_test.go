package tools

import (
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/storagefacts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmconversion "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/conversion"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"
)

// ../../testdata/storage-facts.txt's lines for CAPI v1.14.2 (../../storagefacts_test.go checks
// v1.12.10's). UPDATE_STORAGE_FACTS=1 rewrites them.
const storageFactsFile = "../../testdata/storage-facts.txt"

// What CAPI v1.14.2's conversion does with the v1beta1 paths (below spec, or a template's
// spec.template.spec) that v1beta2 has no same-shaped place for, instead of dropping them.
// The functions are in sigs.k8s.io/cluster-api/api@v1.14.2; since v1.14 ConvertTo itself is
// sigs.k8s.io/cluster-api@v1.14.2 bootstrap/kubeadm/webhooks/conversion/kubeadmconfig.go:38
// (kubeadmconfigtemplate.go:35 for the template).
var kubeadmMapped = map[string]string{
	// The maps of v1beta1 become lists of {name, value} sorted by name (ConvertToArgs).
	"clusterConfiguration.apiServer.extraArgs":            "a list of {name, value}: api bootstrap/kubeadm/v1beta1/conversion.go:201",
	"clusterConfiguration.controllerManager.extraArgs":    "a list of {name, value}: api bootstrap/kubeadm/v1beta1/conversion.go:219",
	"clusterConfiguration.scheduler.extraArgs":            "a list of {name, value}: api bootstrap/kubeadm/v1beta1/conversion.go:234",
	"clusterConfiguration.etcd.local.extraArgs":           "a list of {name, value}: api bootstrap/kubeadm/v1beta1/conversion.go:285",
	"initConfiguration.nodeRegistration.kubeletExtraArgs": "a list of {name, value}: api bootstrap/kubeadm/v1beta1/conversion.go:302",
	"joinConfiguration.nodeRegistration.kubeletExtraArgs": "a list of {name, value}: api bootstrap/kubeadm/v1beta1/conversion.go:302",
	// Durations become whole seconds (truncated: ConvertToSeconds, api core/v1beta2/conversion.go:29).
	"clusterConfiguration.apiServer.timeoutForControlPlane": "initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds and joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds: bootstrap/kubeadm/webhooks/conversion/kubeadmconfig.go:205-210",
	"joinConfiguration.discovery.timeout":                   "joinConfiguration.timeouts.tlsBootstrapSeconds: bootstrap/kubeadm/webhooks/conversion/kubeadmconfig.go:211-212",
	"initConfiguration.bootstrapTokens[*].ttl":              "initConfiguration.bootstrapTokens[*].ttlSeconds: api bootstrap/kubeadm/v1beta1/conversion.go:346",
}

func TestStorageFacts(t *testing.T) {
	release := storagefacts.Release(t, "sigs.k8s.io/cluster-api")
	// The types are in the api module, which go.mod replaces with the same release.
	if api := storagefacts.Release(t, "sigs.k8s.io/cluster-api/api"); api != "sigs.k8s.io/cluster-api/api@"+release[len("sigs.k8s.io/cluster-api@"):] {
		t.Fatalf("%s with %s: the facts are keyed by the release, which must be one", release, api)
	}
	const group = "bootstrap.cluster.x-k8s.io"
	storagefacts.Check(t, storageFactsFile, yaml.YAMLToJSON,
		storagefacts.Kind{
			Module: release, Group: group, Kind: "KubeadmConfig", Root: "spec",
			CRD:     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: bootstrapv1.KubeadmConfig{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: bootstrapv1beta1.KubeadmConfig{}}},
			Mapped:  kubeadmMapped,
		},
		storagefacts.Kind{
			Module: release, Group: group, Kind: "KubeadmConfigTemplate", Root: "spec.template.spec",
			CRD:     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
			Storage: storagefacts.Version{Name: "v1beta2", Object: bootstrapv1.KubeadmConfigTemplate{}},
			Older:   []storagefacts.Version{{Name: "v1beta1", Object: bootstrapv1beta1.KubeadmConfigTemplate{}}},
			Mapped:  kubeadmMapped,
		},
	)
}

// A KubeadmConfig (and template) read through v1beta1 from v1beta2 storage carries
// cluster.x-k8s.io/conversion-data, holding the v1beta2 object's JSON with apiVersion and kind
// (MarshalDataUnsafeNoCopy since v1.14); written back through v1beta1, the stored object does
// not. Through CABPK's own converters, registered as its manager registers them
// (bootstrap/kubeadm/webhooks/admission: WithConverter).
func TestStorageFactsConversionData(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	registry := conversion.NewRegistry()
	for kind, newConverter := range map[string]func(*runtime.Scheme) (conversion.Converter, error){
		"KubeadmConfig":         kubeadmconversion.KubeadmConfig,
		"KubeadmConfigTemplate": kubeadmconversion.KubeadmConfigTemplate,
	} {
		c, err := newConverter(scheme)
		if err != nil {
			t.Fatal(err)
		}
		if err := registry.RegisterConverter(schema.GroupKind{Group: bootstrapv1.GroupVersion.Group, Kind: kind}, c); err != nil {
			t.Fatal(err)
		}
	}
	handler := conversion.NewWebhookHandler(scheme, registry)
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
