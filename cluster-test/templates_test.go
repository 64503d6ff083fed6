package clustertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// bootstrapTemplate is a bootstrap config's template (<Kind>Template, the config's spec under
// spec.template.spec) and a MachineDeployment of no replicas on it, as a GitOps repository
// keeps them; stored before the provider's defaulter with the pool's config.
type bootstrapTemplate struct {
	gvk  schema.GroupVersionKind
	name string
	file string
}

// writeTemplate writes the template of the config manifest, its MachineDeployment and their
// TestMachineTemplate into one file of the artifacts folder.
func (m *managementCluster) writeTemplate(t *testing.T, configManifest, name string) bootstrapTemplate {
	t.Helper()
	config := object(t, configManifest)
	tmpl := bootstrapTemplate{gvk: config.GroupVersionKind(), name: name + "-md"}
	tmpl.gvk.Kind += "Template"
	template := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": config.GetAPIVersion(),
		"kind":       tmpl.gvk.Kind,
		"metadata":   map[string]any{"name": tmpl.name, "namespace": namespace},
		"spec":       map[string]any{"template": map[string]any{"spec": config.Object["spec"]}},
	}}
	md := object(t, fmt.Sprintf(`
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
		tmpl.name, namespace, clusterName, tmpl.gvk.GroupVersion(), tmpl.gvk.Kind))
	infra := object(t, fmt.Sprintf(`
apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1
kind: TestMachineTemplate
metadata: {name: %s, namespace: %s}
spec: {template: {spec: {}}}`, tmpl.name, namespace))
	tmpl.file = tmpl.gvk.Kind + ".yaml"
	must(t, os.WriteFile(m.a.path(tmpl.file), toYAML(t, []*unstructured.Unstructured{template, md, infra}), 0o644))
	return tmpl
}

// applyTemplate applies the file and waits for CAPI's MachineDeployment controller to take
// the template on (the Cluster's ownerReference on it), before the defaulter is back.
func (m *managementCluster) applyTemplate(t *testing.T, tmpl bootstrapTemplate) {
	t.Helper()
	if r := m.person.run(t, "apply", "-f", tmpl.file); r.err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", tmpl.file, r.err, r.stderr)
	}
	stored := m.waitFor(t, tmpl.gvk, tmpl.name, 2*time.Minute, "owned by the Cluster (CAPI's MachineDeployment controller)", func(u *unstructured.Unstructured) bool {
		for _, ref := range u.GetOwnerReferences() {
			if ref.Kind == "Cluster" && ref.Name == clusterName {
				return true
			}
		}
		return false
	})
	t.Logf("%s as stored before the defaulter:\n%s", tmpl.gvk.Kind, specYAML(t, stored))
}

// templateSteps: with the defaulter back, a person's label and annotation, and a client-side
// and a server-side re-apply of the template, are admitted without a warning; the edit
// (old, new text of the file) is refused naming spec.template.spec.<path>.
func (m *managementCluster) templateSteps(t *testing.T, tmpl bootstrapTemplate, provider string, edit [2]string, path string) {
	t.Helper()
	resource := strings.ToLower(tmpl.gvk.Kind) + "s"
	step(t, "a person's metadata-only update of the "+tmpl.gvk.Kind+" is admitted", func(t *testing.T) {
		since := time.Now()
		m.labelAsPerson(t, tmpl.gvk, tmpl.name, tmpl.file, provider)
		m.admittedWithoutWarning(t, "annotate", strings.ToLower(tmpl.gvk.Kind), tmpl.name, "-n", namespace, "fleet.example.com/owner=platform")
		t.Logf("%s after the person's label (the defaulter ran):\n%s", tmpl.gvk.Kind, specYAML(t, m.get(t, tmpl.gvk, tmpl.name)))
		m.checkNotAnEdit(t, since, resource, tmpl.name)
	})
	step(t, "re-applying the "+tmpl.gvk.Kind+" is admitted without a warning", func(t *testing.T) {
		since := time.Now()
		m.admittedWithoutWarning(t, "apply", "-f", tmpl.file)
		m.admittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", tmpl.file)
		m.checkPersonAdmitted(t, since)
		m.checkNotAnEdit(t, since, resource, tmpl.name)
	})
	step(t, "a person's real edit of the "+tmpl.gvk.Kind+" is refused, naming the field", func(t *testing.T) {
		text := string(readFile(t, m.a.path(tmpl.file)))
		if !strings.Contains(text, edit[0]) {
			t.Fatalf("%s has no %q to edit", tmpl.file, edit[0])
		}
		must(t, os.WriteFile(m.a.path("edited-"+tmpl.file), []byte(strings.Replace(text, edit[0], edit[1], 1)), 0o644))
		r := m.person.run(t, "apply", "-f", "edited-"+tmpl.file)
		for _, want := range []string{
			fmt.Sprintf("admission webhook %q denied the request", m.webhookName()),
			"spec.template.spec." + path,
		} {
			if r.err == nil || !strings.Contains(r.stderr, want) {
				t.Errorf("want a refusal with %q: %v\n%s", want, r.err, r.stderr)
			}
		}
	})
}
