package clustertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"
)

// templateSteps: with the defaulter back, a person's label and annotation, and a client-side
// and a server-side re-apply of the template, are admitted without a warning; the edit
// (old, new text of the file) is refused naming spec.template.spec.<path>.
func templateSteps(t *testing.T, m *framework.ManagementCluster, tmpl framework.BootstrapTemplate, provider string, edit [2]string, path string) {
	t.Helper()
	resource := strings.ToLower(tmpl.GVK.Kind) + "s"
	step(t, "a person's metadata-only update of the "+tmpl.GVK.Kind+" is admitted", func(t *testing.T) {
		since := time.Now()
		m.LabelAsPerson(t, tmpl.GVK, tmpl.Name, tmpl.File, provider)
		m.AdmittedWithoutWarning(t, "annotate", strings.ToLower(tmpl.GVK.Kind), tmpl.Name, "-n", framework.Namespace, "fleet.example.com/owner=platform")
		t.Logf("%s after the person's label (the defaulter ran):\n%s", tmpl.GVK.Kind, framework.SpecYAML(t, m.Get(t, tmpl.GVK, tmpl.Name)))
		m.CheckNotAnEdit(t, since, resource, tmpl.Name)
	})
	step(t, "re-applying the "+tmpl.GVK.Kind+" is admitted without a warning", func(t *testing.T) {
		since := time.Now()
		m.AdmittedWithoutWarning(t, "apply", "-f", tmpl.File)
		m.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", tmpl.File)
		m.CheckPersonAdmitted(t, since)
		m.CheckNotAnEdit(t, since, resource, tmpl.Name)
	})
	step(t, "a person's real edit of the "+tmpl.GVK.Kind+" is refused, naming the field", func(t *testing.T) {
		text := string(framework.ReadFile(t, m.Artifacts.Path(tmpl.File)))
		if !strings.Contains(text, edit[0]) {
			t.Fatalf("%s has no %q to edit", tmpl.File, edit[0])
		}
		framework.Must(t, os.WriteFile(m.Artifacts.Path("edited-"+tmpl.File), []byte(strings.Replace(text, edit[0], edit[1], 1)), 0o644))
		r := m.Person.Run(t, "apply", "-f", "edited-"+tmpl.File)
		for _, want := range []string{
			fmt.Sprintf("admission webhook %q denied the request", m.WebhookName()),
			"spec.template.spec." + path,
		} {
			if r.Err == nil || !strings.Contains(r.Stderr, want) {
				t.Errorf("want a refusal with %q: %v\n%s", want, r.Err, r.Stderr)
			}
		}
	})
}
