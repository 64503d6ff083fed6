package clustertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// templateSteps: with the defaulter back, a person's label and annotation, and a client-side
// and a server-side re-apply of the template, are admitted without a warning; the edit
// (old, new text of the file) is refused naming spec.template.spec.<path>.
func templateSteps(t *testing.T, m *managementCluster, tmpl bootstrapTemplate, provider string, edit [2]string, path string) {
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
