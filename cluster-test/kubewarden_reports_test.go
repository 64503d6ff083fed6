package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var reportListGVK = schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "ReportList"}

// reports: the OpenReports Reports of every namespace, by namespace/name.
func (s *stack) reports(t *testing.T) map[string]unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(reportListGVK)
	framework.Must(t, s.CP.Client.List(context.Background(), list))
	out := map[string]unstructured.Unstructured{}
	for _, r := range list.Items {
		out[r.GetNamespace()+"/"+r.GetName()] = r
	}
	return out
}

// withoutTimestamps: a Report's results, each without its timestamp (a run's own).
func withoutTimestamps(t *testing.T, report map[string]any) []any {
	t.Helper()
	results, _, _ := unstructured.NestedSlice(report, "results")
	for _, r := range results {
		delete(r.(map[string]any), "timestamp")
	}
	return results
}

// driftReportsManifest: capi-rollout-check/deploy/drift-reports.yaml as a person applies it
// here: its ClusterRole given the list of this fleet's own infrastructure kinds, as its comment
// asks; its CronJob apart (its image runs nowhere here).
func driftReportsManifest(t *testing.T) (rbac, cronJob string) {
	t.Helper()
	var docs []string
	for _, doc := range strings.Split(string(framework.ReadFile(t, "../capi-rollout-check/deploy/drift-reports.yaml")), "\n---\n") {
		if strings.Contains(doc, "\nkind: CronJob\n") {
			cronJob = doc
			continue
		}
		docs = append(docs, doc)
	}
	rbac = strings.Join(docs, "\n---\n")
	reports := `  - apiGroups: ["openreports.io"]`
	if !strings.Contains(rbac, reports) || cronJob == "" {
		t.Fatalf("drift-reports.yaml has no rule for openreports.io or no CronJob:\n%s", rbac)
	}
	fleet := `  - apiGroups: ["infrastructure.cluster-test.rollout-policy.dev"]
    resources: ["testmachinepools", "testmachines"]
    verbs: ["list"]
`
	return strings.Replace(rbac, reports, fleet+reports, 1), cronJob
}

// driftReports: capi-rollout-check/deploy/drift-reports.yaml applied (its CronJob validated by
// a server dry run), then `capi-rollout-check drift -A -o report --apply` as its
// ServiceAccount, as the CronJob runs it: its RBAC is enough, and the OpenReports CRD that
// Kubewarden 1.35's charts install takes every Report it writes; read back, each holds exactly
// what `-o report` prints, one result per object, whose result is the verdict `-o json` gives
// it; the audit scanner's Reports are left as they were.
func (s *stack) driftReports(t *testing.T) {
	rbac, cronJob := driftReportsManifest(t)
	framework.Must(t, os.WriteFile(s.Artifacts.Path("drift-reports-rbac.yaml"), []byte(rbac), 0o644))
	framework.Must(t, os.WriteFile(s.Artifacts.Path("drift-reports-cronjob.yaml"), []byte(cronJob), 0o644))
	if r := s.Person.Run(t, "apply", "-f", "drift-reports-rbac.yaml"); r.Err != nil {
		t.Fatalf("kubectl apply -f drift-reports-rbac.yaml: %v\n%s", r.Err, r.Stderr)
	}
	if r := s.Person.Run(t, "apply", "--dry-run=server", "-f", "drift-reports-cronjob.yaml"); r.Err != nil {
		t.Errorf("kubectl apply --dry-run=server -f drift-reports-cronjob.yaml: %v\n%s", r.Err, r.Stderr)
	}
	sa := s.ServiceAccountKubectl(t, framework.KubewardenNamespace, "capi-rollout-check-drift")

	before := s.reports(t)
	run := framework.RunRolloutCheck(t, s.Artifacts.Dir, sa, "drift", "-A", "-o", "report", "--apply")
	if run.Code != 0 || !strings.Contains(run.Stdout, " applied (") {
		t.Fatalf("drift -A -o report --apply exited %d:\n%s%s", run.Code, run.Stdout, run.Stderr)
	}
	after := s.reports(t)
	for key, r := range before {
		if strings.HasSuffix(key, "/capi-rollout-check-drift") {
			continue
		}
		if got, ok := after[key]; !ok || got.GetResourceVersion() != r.GetResourceVersion() {
			t.Errorf("drift --apply changed another tool's Report %s", key)
		}
	}

	// What -o report prints now (the state is the same): what was stored, timestamps aside.
	printed := framework.RunRolloutCheck(t, s.Artifacts.Dir, s.Person, "drift", "-A", "-o", "report")
	stored := 0
	for _, doc := range strings.Split(printed.Stdout, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		want := map[string]any{}
		framework.Must(t, yaml.Unmarshal([]byte(doc), &want))
		ns, _, _ := unstructured.NestedString(want, "metadata", "namespace")
		got, ok := after[ns+"/capi-rollout-check-drift"]
		if !ok {
			t.Errorf("drift --apply stored no Report in namespace %s", ns)
			continue
		}
		stored++
		if source, _, _ := unstructured.NestedString(got.Object, "source"); source != "capi-rollout-check" {
			t.Errorf("Report %s/capi-rollout-check-drift: source %q", ns, source)
		}
		if g, w := withoutTimestamps(t, got.Object), withoutTimestamps(t, want); !framework.JSONEqual(g, w) {
			t.Errorf("Report %s/capi-rollout-check-drift as stored:\n%v\nwant what -o report prints:\n%v", ns, g, w)
		}
		if g, w := got.Object["summary"], want["summary"]; !framework.JSONEqual(g, w) {
			t.Errorf("Report %s/capi-rollout-check-drift's summary %v, want %v", ns, g, w)
		}
	}
	if stored == 0 {
		t.Fatalf("drift -A -o report printed no Report:\n%s", printed.Stdout)
	}

	// Each object of -o json is one result of its namespace's Report, its verdict mapped.
	j := framework.RunRolloutCheck(t, s.Artifacts.Dir, s.Person, "drift", "-A", "-o", "json")
	report := framework.ParseDrift(t, j.Stdout)
	results := map[string]string{}
	for key, r := range after {
		if !strings.HasSuffix(key, "/capi-rollout-check-drift") {
			continue
		}
		items, _, _ := unstructured.NestedSlice(r.Object, "results")
		for _, item := range items {
			res := item.(map[string]any)
			resources, _ := res["resources"].([]any)
			if len(resources) != 1 {
				t.Errorf("Report %s: a result naming %d objects: %v", key, len(resources), res)
				continue
			}
			o := resources[0].(map[string]any)
			results[fmt.Sprintf("%s %s/%s", o["kind"], o["namespace"], o["name"])] = fmt.Sprint(res["result"])
		}
	}
	want := map[string]string{}
	verdicts := map[string]string{"current": "pass", "stale": "fail", "unknown": "skip"}
	for _, item := range report.Items {
		want[fmt.Sprintf("%s %s/%s", item.Kind, item.Namespace, item.Name)] = verdicts[item.Verdict]
	}
	if !framework.JSONEqual(results, want) {
		t.Errorf("the stored Reports' results %v, want the table's verdicts %v", results, want)
	}
	keys := make([]string, 0, len(results))
	for k, v := range results {
		keys = append(keys, k+": "+v)
	}
	slices.Sort(keys)
	t.Logf("drift's Reports: %d results: %s", len(results), strings.Join(keys, ", "))
}
