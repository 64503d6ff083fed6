package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// LabelAsPerson is a person's metadata-only update: kubectl label. When the policy refuses
// it, the failure shows the evidence: kubectl's answer, the stored spec (the request's
// oldObject), the spec as the defaulter leaves it (its object) and the policy's verdicts.
func (m *ManagementCluster) LabelAsPerson(t *testing.T, gvk schema.GroupVersionKind, name, file, provider string) {
	t.Helper()
	before := m.Get(t, gvk, name)
	r := m.Person.Run(t, "label", strings.ToLower(gvk.Kind), name, "-n", Namespace, "team=platform")
	if r.Err == nil {
		if w := PolicyWarnings(r.Stderr); len(w) > 0 {
			t.Errorf("POLICY: a person's kubectl label of %s %s printed a warning of the policy: %q", gvk.Kind, name, w)
		}
		return
	}
	t.Fatalf("POLICY: a person's metadata-only update (kubectl label) of a %s stored before %s's defaulter was refused: "+
		"the policy reads what the defaulter did to the spec as an edit.\n"+
		"kubectl's stderr:\n%s\nthe stored spec (the request's oldObject):\n%s\n"+
		"the spec as the defaulter leaves it (the request's object; from a server-side dry-run CREATE of the same manifest):\n%s\n"+
		"the policy's verdicts (%s):\n%s",
		gvk.Kind, provider, r.Stderr, SpecYAML(t, before), SpecYAML(t, m.defaulted(t, file, gvk.Kind, name)),
		strings.Join(m.PolicyServerLogs(t), ", "), m.verdictsOn(t, name))
}

// defaulted is the config of the manifest (its document of that kind and name) as the provider's
// defaulter leaves it: a server-side dry-run CREATE of it under another name (which the
// policy admits: a new config).
func (m *ManagementCluster) defaulted(t *testing.T, file, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var manifest string
	for _, doc := range strings.Split(string(ReadFile(t, m.Artifacts.Path(file))), "\n---\n") {
		if obj := Object(t, doc); obj.GetKind() == kind && obj.GetName() == name {
			obj.SetName(name + "-dry-run")
			manifest = string(ToYAML(t, []*unstructured.Unstructured{obj}))
		}
	}
	Must(t, os.WriteFile(m.Artifacts.Path("dry-run-"+file), []byte(manifest), 0o644))
	r := m.Person.Run(t, "create", "--dry-run=server", "-o", "json", "-f", "dry-run-"+file)
	if r.Err != nil {
		t.Fatalf("kubectl create --dry-run=server: %v\n%s", r.Err, r.Stderr)
	}
	u := &unstructured.Unstructured{}
	Must(t, u.UnmarshalJSON([]byte(r.Stdout)))
	return u
}

// CreateJoinToken is Cluster c1's join token Secret, which RKE2's and k3s' control plane
// providers write (`<cluster>-token`, key value).
func (m *ManagementCluster) CreateJoinToken(t *testing.T) {
	t.Helper()
	Must(t, m.CP.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterName + "-token", Namespace: Namespace, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": ClusterName}},
		Data:       map[string][]byte{"value": []byte("cluster-test-join-token")},
	}))
}

// WriteConfigs writes file in the artifacts folder: manifest's config once for each of names
// (its NAME).
func (m *ManagementCluster) WriteConfigs(t *testing.T, file, manifest string, names []string) string {
	t.Helper()
	text := string(ReadFile(t, manifest))
	var docs []string
	for _, name := range names {
		docs = append(docs, strings.ReplaceAll(text, "NAME", name))
	}
	Must(t, os.WriteFile(m.Artifacts.Path(file), []byte(strings.Join(docs, "\n---\n")), 0o644))
	return file
}

// BootstrapTemplate is a bootstrap config's template (<Kind>Template, the config's spec under
// spec.template.spec) and a MachineDeployment of no replicas on it, as a GitOps repository
// keeps them; stored before the provider's defaulter with the pool's config.
type BootstrapTemplate struct {
	GVK  schema.GroupVersionKind
	Name string
	File string
}

// WriteTemplate writes the template of the config manifest, its MachineDeployment and their
// TestMachineTemplate into one file of the artifacts folder.
func (m *ManagementCluster) WriteTemplate(t *testing.T, configManifest, name string) BootstrapTemplate {
	t.Helper()
	config := Object(t, configManifest)
	tmpl := BootstrapTemplate{GVK: config.GroupVersionKind(), Name: name + "-md"}
	tmpl.GVK.Kind += "Template"
	template := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": config.GetAPIVersion(),
		"kind":       tmpl.GVK.Kind,
		"metadata":   map[string]any{"name": tmpl.Name, "namespace": Namespace},
		"spec":       map[string]any{"template": map[string]any{"spec": config.Object["spec"]}},
	}}
	md := Object(t, fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  clusterName: %[3]s
  replicas: 0
  selector: {matchLabels: {pool: %[1]s}}
  template:
    metadata: {labels: {pool: %[1]s}}
    spec:
      clusterName: %[3]s
      version: v1.34.3
      bootstrap:
        configRef: {apiVersion: %[4]s, kind: %[5]s, name: %[1]s}
      infrastructureRef: {apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1, kind: TestMachineTemplate, name: %[1]s}`,
		tmpl.Name, Namespace, ClusterName, tmpl.GVK.GroupVersion(), tmpl.GVK.Kind))
	infra := Object(t, fmt.Sprintf(`
apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1
kind: TestMachineTemplate
metadata: {name: %s, namespace: %s}
spec: {template: {spec: {}}}`, tmpl.Name, Namespace))
	tmpl.File = tmpl.GVK.Kind + ".yaml"
	Must(t, os.WriteFile(m.Artifacts.Path(tmpl.File), ToYAML(t, []*unstructured.Unstructured{template, md, infra}), 0o644))
	return tmpl
}

// ApplyTemplate applies the file and waits for CAPI's MachineDeployment controller to take
// the template on (the Cluster's ownerReference on it), before the defaulter is back.
func (m *ManagementCluster) ApplyTemplate(t *testing.T, tmpl BootstrapTemplate) {
	t.Helper()
	if r := m.Person.Run(t, "apply", "-f", tmpl.File); r.Err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", tmpl.File, r.Err, r.Stderr)
	}
	stored := m.WaitFor(t, tmpl.GVK, tmpl.Name, 2*time.Minute, "owned by the Cluster (CAPI's MachineDeployment controller)", func(u *unstructured.Unstructured) bool {
		for _, ref := range u.GetOwnerReferences() {
			if ref.Kind == "Cluster" && ref.Name == ClusterName {
				return true
			}
		}
		return false
	})
	t.Logf("%s as stored before the defaulter:\n%s", tmpl.GVK.Kind, SpecYAML(t, stored))
}

// WithoutDefaulter removes the MutatingWebhookConfigurations that default the resources
// (plurals of bootstrap.cluster.x-k8s.io) until the returned function puts them back: what is written
// meanwhile is stored as it was sent, as by a release before the defaulter, or restored from
// a backup while the provider was down.
func (m *ManagementCluster) WithoutDefaulter(t *testing.T, resources ...string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	list := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	Must(t, m.CP.Client.List(ctx, list))
	var removed []admissionregistrationv1.MutatingWebhookConfiguration
	defaulted := map[string]bool{}
	for _, mwc := range list.Items {
		matches := false
		for _, w := range mwc.Webhooks {
			for _, r := range w.Rules {
				for _, res := range r.Resources {
					if slices.Contains(resources, res) {
						matches, defaulted[res] = true, true
					}
				}
			}
		}
		if matches {
			removed = append(removed, mwc)
		}
	}
	for _, res := range resources {
		if !defaulted[res] {
			t.Fatalf("no MutatingWebhookConfiguration defaults %s", res)
		}
	}
	for i := range removed {
		Must(t, m.CP.Client.Delete(ctx, &removed[i]))
	}
	return func() {
		t.Helper()
		for _, mwc := range removed {
			mwc.ResourceVersion, mwc.UID = "", ""
			Must(t, m.CP.Client.Create(ctx, &mwc))
		}
	}
}

// Pools writes the manifests of MachinePools named after their configs (a TestMachinePool
// each), configRef of the kind and apiVersion given, as a v1beta1 GitOps repository has them.
func (m *ManagementCluster) Pools(t *testing.T, configAPIVersion, configKind string, names ...string) string {
	t.Helper()
	var docs []string
	for _, name := range names {
		docs = append(docs, fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta1
kind: MachinePool
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  clusterName: %[3]s
  replicas: 0
  template:
    spec:
      clusterName: %[3]s
      version: v1.34.3
      bootstrap:
        configRef: {apiVersion: %[4]s, kind: %[5]s, name: %[1]s}
      infrastructureRef: {apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1, kind: TestMachinePool, name: %[1]s}
---
apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1
kind: TestMachinePool
metadata: {name: %[1]s, namespace: %[2]s}
spec: {providerIDList: []}`, name, Namespace, ClusterName, configAPIVersion, configKind))
	}
	file := configKind + "-pools.yaml"
	Must(t, os.WriteFile(m.Artifacts.Path(file), []byte(strings.Join(docs, "\n---\n")), 0o644))
	return file
}

// MarkV1beta1Ready does what the infrastructure provider of each pool and the control plane
// provider would under the v1beta1 contract: status.ready, and the control plane initialized.
func (m *ManagementCluster) MarkV1beta1Ready(t *testing.T, controlPlane schema.GroupVersionKind, status map[string]any, pools ...string) {
	t.Helper()
	for _, name := range pools {
		infra := &unstructured.Unstructured{}
		infra.SetAPIVersion("infrastructure.cluster-test.rollout-policy.dev/v1alpha1")
		infra.SetKind("TestMachinePool")
		Must(t, m.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, infra))
		m.MarkStatus(t, infra, map[string]any{"ready": true, "replicas": int64(0)})
	}
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(controlPlane)
	Must(t, m.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: ClusterName}, cp))
	m.MarkStatus(t, cp, status)
}

// SpecYAML is the object's spec, for the log.
func SpecYAML(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	out, err := yaml.Marshal(u.Object["spec"])
	Must(t, err)
	return string(out)
}

// CABPTManagerFlags are the Talos bootstrap provider's (CABPT's) own flags: CAPI's names for its
// webhook server, health and diagnostics, but --enable-leader-election (its Deployment's args
// turn it on; outside a pod controller-runtime cannot tell the lease's namespace). Its
// kubeconfig is KUBECONFIG's.
func CABPTManagerFlags(s *ManagerSetup) ([]string, string) {
	s.Env = append(s.Env, "KUBECONFIG="+s.Kubeconfig)
	return []string{
		fmt.Sprintf("--webhook-port=%d", s.webhookPort),
		"--webhook-cert-dir=" + s.CertDir,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", s.Health),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", FreePort(s.t)),
		"--insecure-diagnostics=true",
		"--enable-leader-election=false",
	}, fmt.Sprintf("http://127.0.0.1:%d/readyz", s.Health)
}

// WebhookRejections is kube-apiserver's apiserver_admission_webhook_rejection_count of each
// webhook named, every operation summed. kube-apiserver calls the validating webhooks of a
// request in parallel and answers with the first refusal it collected: the count tells which
// webhooks refused a request whose answer named only one.
func (m *ManagementCluster) WebhookRejections(t *testing.T, webhooks ...string) map[string]float64 {
	t.Helper()
	raw, err := m.CP.Clientset.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	Must(t, err)
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	Must(t, err)
	counts := map[string]float64{}
	for _, w := range webhooks {
		counts[w] = 0
	}
	if f := families["apiserver_admission_webhook_rejection_count"]; f != nil {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if _, ok := counts[l.GetValue()]; ok && l.GetName() == "name" {
					counts[l.GetValue()] += metric.GetCounter().GetValue()
				}
			}
		}
	}
	return counts
}

// PolicyRefusals are the messages of the refusals `policy-host serve` logged for the object
// named (its validation lines with allowed=false); ok is false when the policy server's log is
// not policy-host's (the real policy-server logs in its own format).
func (m *ManagementCluster) PolicyRefusals(t *testing.T, name string) (messages []string, ok bool) {
	t.Helper()
	for _, log := range m.PolicyServerLogs(t) {
		for _, line := range strings.Split(string(ReadFile(t, log)), "\n") {
			_, fields, found := strings.Cut(line, "policy-host serve: validation ")
			if !found {
				continue
			}
			ok = true
			if strings.Contains(fields, " name="+name+" ") && strings.Contains(fields, " allowed=false ") {
				_, message, _ := strings.Cut(fields, " message=")
				messages = append(messages, message)
			}
		}
	}
	return messages, ok
}
