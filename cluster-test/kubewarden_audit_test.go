package clustertest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// auditScanChartRBAC: the person runs the chart's audit-scanner CronJob once (`kubectl create
// job --from=cronjob/audit-scanner`); its Job's Pod runs the real audit-scanner, which sends the
// fleet's objects of the policy's CREATE rules without wildcards to policy-server's /audit
// endpoint (through the policy-server Service's name: the Services stand-in) and writes an
// OpenReport per object. The chart's `audit-scanner` ServiceAccount holds `view`, which covers
// none of CAPI's kinds: before the README's RBAC (the contextAware step) it reports nothing for
// the policy.
func (s *stack) auditScanChartRBAC(t *testing.T) {
	if s.Tools.AuditScanner == "" {
		t.Skip("not run: the audit scanner (no AUDIT_SCANNER)")
	}
	results := s.RunAuditScanner(t, "audit-scanner-once")[s.Policy.Metadata.Name]
	if len(results) != 0 {
		t.Errorf("with the chart's RBAC the audit scanner reported %v; it may not list CAPI's kinds", results)
	}
	forbidden := 0
	for _, log := range s.PodLogs(t, "audit-scanner-once-") {
		forbidden += strings.Count(string(framework.ReadFile(t, log)), `cannot list resource \"machinepools\"`)
	}
	t.Logf("with the chart's RBAC, the audit scanner was refused the list of MachinePools %d times", forbidden)
}

// auditScan: once the README's RBAC block (applied by the contextAware step) binds the lookup
// ClusterRole to the audit scanner's ServiceAccount too, its run reports the MachinePool. The
// bootstrap configs are in no report: the policy's rule for them names `apiVersions: ["*"]`,
// and the audit scanner skips a rule with a wildcard.
func (s *stack) auditScan(t *testing.T) {
	if s.Tools.AuditScanner == "" {
		t.Skip("not run: the audit scanner (no AUDIT_SCANNER)")
	}
	s.plantContractBreakingPools(t)
	results := s.RunAuditScanner(t, "audit-scanner-twice")[s.Policy.Metadata.Name]
	got, ok := results["MachinePool "+framework.PoolName]
	if !ok {
		t.Errorf("no audit result of the policy for MachinePool %s: %v (reports: %s)", framework.PoolName, results, s.Artifacts.Path("audit-reports-audit-scanner-twice.yaml"))
	} else if !strings.HasPrefix(got, "pass") {
		t.Errorf("the audit result for MachinePool %s is %q, want pass", framework.PoolName, got)
	}
	for object := range results {
		if strings.HasPrefix(object, "KubeadmConfig ") {
			t.Errorf("the audit scanner reported %s, which the policy's wildcard rule should keep out of its scan", object)
		}
	}
}

// plantContractBreakingPools: a MachinePool whose configRef lacks its group (rule 5's
// contract flag) cannot be stored once CAPI stores v1beta2: the v1beta2 schema requires
// apiGroup, and a v1beta1 create without apiVersion fails in CAPI's conversion webhook, which
// looks the config's version up by group. So the audit scanner never meets one here (seen
// first in this test, CAPI v1.12.10); the flag is for clusters still storing v1beta1.
func (s *stack) plantContractBreakingPools(t *testing.T) {
	pools := []struct{ file, manifest, refused string }{
		{"contract-v1beta2.yaml", `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {name: contract-v1beta2, namespace: fleet}
spec:
  clusterName: c1
  template:
    spec:
      clusterName: c1
      bootstrap:
        configRef: {apiGroup: "", kind: KubeadmConfig, name: contract-v1beta2}
      infrastructureRef: {apiGroup: infrastructure.cluster-test.rollout-policy.dev, kind: TestMachinePool, name: contract-v1beta2}
`, "spec.template.spec.bootstrap.configRef.apiGroup in body should be at least 1 chars long"},
		{"contract-v1beta1.yaml", `apiVersion: cluster.x-k8s.io/v1beta1
kind: MachinePool
metadata: {name: contract-v1beta1, namespace: fleet}
spec:
  clusterName: c1
  template:
    spec:
      clusterName: c1
      bootstrap:
        configRef: {kind: KubeadmConfig, name: contract-v1beta1}
        dataSecretName: contract-v1beta1
      infrastructureRef: {apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1, kind: TestMachinePool, name: contract-v1beta1}
`, "conversion webhook for cluster.x-k8s.io/v1beta2, Kind=MachinePool failed"},
	}
	for _, p := range pools {
		framework.Must(t, os.WriteFile(s.Artifacts.Path(p.file), []byte(strings.ReplaceAll(p.manifest, "namespace: fleet", "namespace: "+framework.Namespace)), 0o644))
		r := s.Person.Run(t, "create", "-f", p.file)
		if r.Err == nil || !strings.Contains(r.Stderr, p.refused) {
			t.Errorf("kubectl create -f %s: want it refused with %q, got %v:\n%s", p.file, p.refused, r.Err, r.Stderr)
		}
	}
}

// noneRefused: from the whole audit log, no write of CAPI's managers or of Kubewarden's
// components (the ServiceAccounts of Kubewarden's namespace) was refused by an admission
// webhook, and none failed open but while a policy-server Pod stopped (reported).
func (s *stack) noneRefused(t *testing.T) {
	events := s.EventsSince(t, time.Time{})
	framework.Summarize(t, t.Name(), events)
	kubewardenSA := "system:serviceaccount:" + framework.KubewardenNamespace + ":"
	for _, e := range events {
		if !e.IsWrite() || e.ResponseStatus == nil || !strings.Contains(e.ResponseStatus.Message, "denied the request") {
			continue
		}
		if e.User.Username == s.CAPIManager || e.User.Username == s.CABPK || strings.HasPrefix(e.User.Username, kubewardenSA) {
			t.Errorf("a controller's write was refused: %s", e)
		}
	}
	s.checkWriters(t, events)
	for _, e := range framework.FailedOpen(events, s.WebhookName()) {
		if slices.ContainsFunc(s.Stops, func(w framework.Window) bool { return w.Contains(e.RequestReceivedTimestamp) }) {
			t.Logf("failed open while a policy-server Pod stopped or none ran: %s", e)
		} else {
			t.Errorf("admitted without the policy's answer, no policy-server stopping: %s", e)
		}
	}
}

// checkWriters reads from the audit log who wrote what the stack is made of: the policy's
// ValidatingWebhookConfiguration only the controller, under its Deployment's ServiceAccount;
// every Pod in the Kubewarden namespace kube-controller-manager, whose ReplicaSet controller
// (Deployments) and Job controller (the audit scanner) act under their own ServiceAccounts
// (--use-service-account-credentials).
func (s *stack) checkWriters(t *testing.T, events []framework.AuditEvent) {
	t.Helper()
	d := &appsv1.Deployment{}
	framework.Must(t, s.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: framework.KubewardenNamespace, Name: "kubewarden-controller"}, d))
	controller := "system:serviceaccount:" + framework.KubewardenNamespace + ":" + d.Spec.Template.Spec.ServiceAccountName
	podMakers := []string{"system:serviceaccount:kube-system:replicaset-controller", "system:serviceaccount:kube-system:job-controller"}
	webhookWriters, podCreators := map[string]int{}, map[string]int{}
	for _, e := range events {
		if !e.IsWrite() || e.ObjectRef == nil || e.Code() >= 300 || e.ObjectRef.Subresource != "" {
			continue
		}
		switch {
		case e.ObjectRef.Resource == "validatingwebhookconfigurations" && e.ObjectRef.Name == s.Policy.PolicyID():
			webhookWriters[e.User.Username]++
		case e.ObjectRef.Resource == "pods" && e.Verb == "create" && e.ObjectRef.Namespace == framework.KubewardenNamespace:
			podCreators[e.User.Username]++
		}
	}
	t.Logf("writes of ValidatingWebhookConfiguration %s: %v; Pods created in %s: %v", s.Policy.PolicyID(), webhookWriters, framework.KubewardenNamespace, podCreators)
	if webhookWriters[controller] == 0 {
		t.Errorf("the audit log shows no write of %s by the controller (%s): %v", s.Policy.PolicyID(), controller, webhookWriters)
	}
	for user := range webhookWriters {
		if user != controller {
			t.Errorf("%s wrote ValidatingWebhookConfiguration %s; only the controller (%s) should", user, s.Policy.PolicyID(), controller)
		}
	}
	if podCreators[podMakers[0]] == 0 {
		t.Errorf("no Pod in %s was created by kube-controller-manager's ReplicaSet controller: %v", framework.KubewardenNamespace, podCreators)
	}
	for user := range podCreators {
		if !slices.Contains(podMakers, user) {
			t.Errorf("%s created a Pod in %s; only kube-controller-manager's controllers should: %v", user, framework.KubewardenNamespace, podCreators)
		}
	}
}

// auditVersions: whether naming the bootstrap kinds' versions in a policy's rules, instead of
// policy.yaml's `apiVersions: ["*"]` (which the audit scanner skips), brings the fleet's
// configs into its reports. Two more policies of the same module, in monitor, with
// policy.yaml's rules but for the bootstrap ones: one names kubeadmconfigs and
// kubeadmconfigtemplates at v1beta2, which CAPI serves; the other names talosconfigs and
// talosconfigtemplates at v1alpha3 as well, whose CRDs this cluster lacks, as a cluster lacks
// the CRDs of every provider it does not run. The audit scanner resolves every resource a
// policy's rules name before it scans, and a policy with one it cannot resolve is skipped as
// errored, all of it.
func (s *stack) auditVersions(t *testing.T) {
	if s.Tools.AuditScanner == "" {
		t.Skip("not run: the audit scanner (no AUDIT_SCANNER)")
	}
	since := time.Now()
	base := framework.ReadObjects(t, framework.ReadFile(t, s.Artifacts.Path(s.PolicyFile)))[0]
	rules, _, _ := unstructured.NestedSlice(base.Object, "spec", "rules")
	var named []any
	for _, rule := range rules {
		r, _ := rule.(map[string]any)
		if !slices.Contains(framework.StringList(r["apiVersions"]), "*") {
			named = append(named, r)
		}
	}
	if len(named) == len(rules) {
		t.Fatalf("%s has no rule with apiVersions [\"*\"]: %v", s.PolicyFile, rules)
	}
	bootstrapRule := func(version string, resources ...string) any {
		return map[string]any{
			"apiGroups": []any{"bootstrap.cluster.x-k8s.io"}, "apiVersions": []any{version},
			"resources": toAny(resources), "operations": []any{"CREATE", "UPDATE", "DELETE"},
		}
	}
	kubeadm := bootstrapRule("v1beta2", "kubeadmconfigs", "kubeadmconfigtemplates")
	talos := bootstrapRule("v1alpha3", "talosconfigs", "talosconfigtemplates")
	served, unserved := s.Policy.Metadata.Name+"-served-versions", s.Policy.Metadata.Name+"-unserved-version"
	var files []string
	for _, v := range []struct {
		name  string
		extra []any
	}{{served, []any{kubeadm}}, {unserved, []any{kubeadm, talos}}} {
		name, extra := v.name, v.extra
		variant := base.DeepCopy()
		variant.SetName(name)
		framework.Must(t, unstructured.SetNestedField(variant.Object, "monitor", "spec", "mode"))
		framework.Must(t, unstructured.SetNestedSlice(variant.Object, append(slices.Clone(named), extra...), "spec", "rules"))
		file := "policy-" + strings.TrimPrefix(name, s.Policy.Metadata.Name+"-") + ".yaml"
		framework.Must(t, os.WriteFile(s.Artifacts.Path(file), framework.ToYAML(t, []*unstructured.Unstructured{variant}), 0o644))
		files = append(files, "-f", file)
	}
	if r := s.Person.Run(t, append([]string{"apply"}, files...)...); r.Err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", strings.Join(files, " "), r.Err, r.Stderr)
	}
	s.WaitRolledOut(t, "policy-server-default", since)
	for _, name := range []string{served, unserved} {
		s.WaitPolicyNamed(t, name, "active", 2*time.Minute)
	}

	const job = "audit-scanner-versions"
	results := s.RunAuditScanner(t, job)
	pool := s.Get(t, framework.MachinePoolGVK, framework.PoolName)
	config, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	if got, ok := results[served]["KubeadmConfig "+config]; !ok || !strings.HasPrefix(got, "pass") {
		t.Errorf("policy %s (kubeadmconfigs at v1beta2): the result for the pool's KubeadmConfig %s is %q (reported %t), want pass: %v", served, config, got, ok, results[served])
	}
	if got := results[served]["MachinePool "+framework.PoolName]; !strings.HasPrefix(got, "pass") {
		t.Errorf("policy %s: the result for MachinePool %s is %q, want pass", served, framework.PoolName, got)
	}
	if len(results[unserved]) != 0 {
		t.Errorf("policy %s (talosconfigs at v1alpha3, not served) has results: %v", unserved, results[unserved])
	}
	if got := results[s.Policy.Metadata.Name]["MachinePool "+framework.PoolName]; !strings.HasPrefix(got, "pass") {
		t.Errorf("policy.yaml's policy: the result for MachinePool %s is %q, want pass", framework.PoolName, got)
	}
	for object := range results[s.Policy.Metadata.Name] {
		if !strings.HasPrefix(object, "MachinePool ") && !strings.HasPrefix(object, "MachineDeployment ") && !strings.HasPrefix(object, "MachineSet ") {
			t.Errorf("policy.yaml's policy has a result for %s, which its wildcard rule should keep out of the scan", object)
		}
	}
	// What the scanner says of the policy it skipped, in its log.
	var said []string
	for _, log := range s.PodLogs(t, job+"-") {
		for _, line := range strings.Split(string(framework.ReadFile(t, log)), "\n") {
			if strings.Contains(line, unserved) || strings.Contains(line, "policies-errored") {
				said = append(said, line)
			}
		}
	}
	if !slices.ContainsFunc(said, func(line string) bool {
		return strings.Contains(line, unserved) && strings.Contains(line, "talosconfigs")
	}) {
		t.Errorf("the audit scanner's log names neither policy %s nor talosconfigs:\n%s", unserved, strings.Join(said, "\n"))
	}
	t.Logf("the audit scanner's log on the policies it skipped:\n%s", strings.Join(said, "\n"))

	removed := time.Now()
	if r := s.Person.Run(t, "delete", "clusteradmissionpolicy", served, unserved); r.Err != nil {
		t.Fatalf("kubectl delete clusteradmissionpolicy: %v\n%s", r.Err, r.Stderr)
	}
	s.WaitRolledOut(t, "policy-server-default", removed)
	s.WaitPolicy(t, "active", time.Minute)
	s.CheckControllersAdmitted(t, since)
	t.Logf("the two policies applied, scanned and deleted in %s", time.Since(since).Round(time.Second))
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
