package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// stack is the management cluster with Kubewarden installed in front of CAPI. Its steps are
// its own methods and, shared with TestCluster, testCluster's (promoted: s.reapply is
// TestCluster's reapply, the policy's contextAware switched through Kubewarden).
type stack struct {
	*testCluster
	*framework.Kubewarden
	// moduleFile is the annotated module the person built (ANNOTATED_POLICY), pushed by kwctl.
	moduleFile string
}

// TestKubewardenStack: Kubewarden installed as its charts install it, in front of CAPI, the
// policy applied from policy.yaml and served from the module the real kwctl pushed to an OCI
// registry; then the README's path, as a person follows it.
func TestKubewardenStack(t *testing.T) {
	tools := framework.FindKubewardenTools(t)
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.ArtifactsForTest(t)
	ca := framework.NewCA(t)
	started := time.Now()
	m := framework.StartCAPI(t, a, bin, ca)
	s := &stack{testCluster: &testCluster{ManagementCluster: m, bin: bin, ca: ca}, Kubewarden: &framework.Kubewarden{Cluster: m, Tools: tools, Root: t}}
	s.setContextAware = s.PatchContextAware
	s.Policy = framework.ReadPolicy(t)
	s.AddPerson(t, bin)
	binaries := map[string]string{"kubewarden-controller": tools.Controller, "policy-server": tools.PolicyServer}
	if tools.AuditScanner != "" {
		binaries["audit-scanner"] = tools.AuditScanner
	}
	s.Node = framework.StartNode(t, a, s.CP, framework.KubewardenNamespace, binaries)
	t.Logf("control plane and CAPI up in %s", time.Since(started).Round(time.Second))
	for _, name := range []string{"pool-1.yaml", "pool-1-a.yaml", "pool-2.v1beta1.yaml", "pool-2-a.v1beta1.yaml", "workers-md-0.v1beta1.yaml", "workers-md-0.yaml"} {
		framework.Must(t, os.WriteFile(a.Path(name), framework.ReadFile(t, filepath.Join("testdata", "fleet", name)), 0o644))
	}

	// Each step names the earlier steps it builds on (Needs): one run alone, with
	// `go test -run '^TestKubewardenStack$/^<its ID>:'`, runs them first. The shared ones
	// (reapply, personEdits, tokenRotations, rotation, v1beta1Clients, replaceForce,
	// rotateCommand, clusterctlMove) are TestCluster's, run through Kubewarden; clusterctlMove
	// moves to a second management cluster built as TestCluster's are.
	framework.RunSteps(t, []framework.Step{
		{ID: "installCharts", Name: "the charts installed: the controller and the default PolicyServer run from their Deployments", Run: s.installCharts},
		{ID: "applyPolicy", Name: "the module pushed with kwctl and policy.yaml applied: the policy is active", Needs: []string{"installCharts"}, Run: s.applyPolicy},
		{ID: "compareWebhook", Name: "the controller's ValidatingWebhookConfiguration against the one the test builds by hand", Needs: []string{"applyPolicy"}, Run: s.compareWebhook},
		{ID: "bringUpPool", Name: "CAPI brings a pool up behind Kubewarden, every controller write admitted", Needs: []string{"applyPolicy"}, Run: s.bringUpPool},
		{ID: "reapply", Name: "re-applying unchanged manifests is admitted without a warning", Needs: []string{"bringUpPool"}, Run: s.reapply},
		{ID: "monitorEdit", Name: "monitor: a person's in-place edit of the config in use is admitted, the refusal it would be only in policy-server's log", Needs: []string{"bringUpPool"}, Run: s.monitorEdit},
		{ID: "protect", Name: "mode: protect in the person's policy.yaml, applied: the policy-server rolls out, CABPK's writes admitted, then the same edit is refused with the paths", Needs: []string{"monitorEdit"}, Run: s.protect},
		{ID: "protectToMonitor", Name: "protect -> monitor (a file still saying monitor, applied) is refused by the controller", Needs: []string{"protect"}, Run: s.protectToMonitor},
		{ID: "newModuleTag", Name: "the person's policy.yaml (mode: protect) applied with a new module tag: admitted, the policy active again, the edit still refused", Needs: []string{"protect"}, Run: s.newModuleTag},
		{ID: "settingsMistake", Name: "a second policy with a misspelt settings key, then a third with a bad value, applied in protect while CABPK rotates: kubectl admits both, the new policy-server Pod exits naming the key, the old Pod keeps judging until it is deleted; the bad policies deleted, all back", Needs: []string{"protect"}, Run: s.settingsMistake},
		{ID: "personEdits", Name: "a person's in-place edit is refused with the field paths and the rotation to do", Needs: []string{"protect"}, Run: s.personEdits},
		{ID: "tokenRotations", Name: "CABPK rotates the pool's token three times, each admitted without a warning", Needs: []string{"protect"}, Run: s.tokenRotations},
		{ID: "rotation", Name: "rotating configRef as the README says is admitted and CAPI rolls the new config", Needs: []string{"protect"}, Run: s.rotation},
		{ID: "auditScanChartRBAC", Name: "the audit scanner run as its CronJob runs it, with the chart's RBAC only: nothing of CAPI's kinds reported", Needs: []string{"bringUpPool"}, Run: s.auditScanChartRBAC},
		{ID: "contextAware", Name: "the README's lookup RBAC bound to the chart's ServiceAccounts: contextAware warns the rotated-out edit, refuses the referenced DELETE", Needs: []string{"rotation"}, Run: s.contextAware},
		{ID: "replicaDeleted", Name: "two policy-server replicas, one Pod deleted while CABPK rotates: nothing refused, the Deployment back at two", Needs: []string{"protect"}, Run: s.replicaDeleted},
		{ID: "machinePoolDeletion", Name: "kubectl delete machinepool completes in every cascade, with and without contextAware, CAPI's and the garbage collector's deletes admitted", Needs: []string{"protect"}, Run: s.machinePoolDeletion},
		{ID: "replaceForce", Name: "kubectl replace --force of the config in use: refused with contextAware, admitted with a warning by default", Needs: []string{"protect"}, Run: s.replaceForce},
		{ID: "v1beta1Clients", Name: "v1beta1 clients through CAPI's conversion: re-applies admitted, edits refused by their v1beta1 path", Needs: []string{"protect"}, Run: s.v1beta1Clients},
		{ID: "outage", Name: "the PolicyServer scaled to zero: CABPK's rotations pass unjudged, and verdicts return with it", Needs: []string{"protect"}, Run: s.outage},
		{ID: "auditScan", Name: "the audit scanner, bound the lookup role by the README's RBAC: the MachinePool passed; a contract-breaking pool cannot be stored", Needs: []string{"contextAware"}, Run: s.auditScan},
		{ID: "auditVersions", Name: "the bootstrap rules with their versions named, in two more policies: the audit scanner reports the configs when every version named is served, and skips the whole policy, its MachinePools too, as errored when one is not", Needs: []string{"auditScan"}, Run: s.auditVersions},
		{ID: "rotateCommand", Name: "capi-rollout-check rotate does the rotation a refusal asks for, CAPI takes it up; its bad inputs change nothing", Needs: []string{"protect"}, Run: s.rotateCommand},
		{ID: "clusterctlMove", Name: "clusterctl move to a second management cluster completes, nothing refused, the pool reconciles there", Needs: []string{"rotation", "v1beta1Clients"}, Run: s.clusterctlMove},
		{ID: "noneRefused", Name: "no write of CAPI's controllers or of Kubewarden's components was refused in the whole run; the controller wrote the webhook, kube-controller-manager made the Pods", Needs: []string{"applyPolicy"}, Run: s.noneRefused},
	})
	t.Logf("TestKubewardenStack took %s", time.Since(started).Round(time.Second))
}

func (s *stack) installCharts(t *testing.T) {
	ctx := context.Background()
	c := s.PersonClient(t)
	// --create-namespace: Helm labels the namespace it creates with its name.
	framework.Must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.KubewardenNamespace, Labels: map[string]string{"name": framework.KubewardenNamespace}}}))
	for _, chart := range framework.KubewardenCharts {
		begin := time.Now()
		objects := s.Render(t, chart)
		var crds []string
		for _, obj := range objects {
			namespaced, err := c.IsObjectNamespaced(obj)
			if err == nil && namespaced && obj.GetNamespace() == "" {
				obj.SetNamespace(framework.KubewardenNamespace)
			}
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("helm install %s: create %s %s: %v", chart, obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj.GetName())
			}
		}
		framework.WaitEstablished(t, s.CP, crds)
		// helm install --wait: every Deployment of the chart available.
		for _, obj := range objects {
			if obj.GetKind() == "Deployment" {
				s.WaitDeployment(t, obj.GetName(), 3*time.Minute)
			}
		}
		if chart == "kubewarden-defaults" {
			// The default PolicyServer: the controller makes its Deployment.
			s.WaitDeployment(t, "policy-server-default", 3*time.Minute)
		}
		t.Logf("helm install %s: %d objects, ready in %s", chart, len(objects), time.Since(begin).Round(time.Second))
	}
}

func (s *stack) applyPolicy(t *testing.T) {
	s.Registry = s.StartRegistry()
	sources := s.Artifacts.Path("kwctl-sources.yaml")
	framework.Must(t, os.WriteFile(sources, []byte(fmt.Sprintf("insecure_sources: [%q]\n", s.Registry)), 0o644))
	// docs/operations.md's commands: `make` (ANNOTATED_POLICY, built by `make cluster-test`), kwctl push
	// to the person's own registry, module: pointed there, capi-rollout-check settings,
	// kubectl apply.
	module, err := filepath.Abs(filepath.Join("..", "annotated-policy.wasm"))
	framework.Must(t, err)
	if m := os.Getenv("ANNOTATED_POLICY"); m != "" {
		module = m
	}
	s.moduleFile = module
	// The tag policy.yaml names, in the test's registry.
	original := string(framework.ReadFile(t, filepath.Join("..", "policy.yaml")))
	moduleLine := regexp.MustCompile(`(?m)^(  module: )registry://[^/]+/(.*)$`)
	match := moduleLine.FindStringSubmatch(original)
	if match == nil {
		t.Fatal("policy.yaml has no `  module: registry://...` line")
	}
	s.Module = "registry://" + s.Registry + "/" + match[2]
	push := exec.Command(s.Tools.Kwctl, "push", "--sources-path", sources, module, s.Module)
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("kwctl push %s: %v\n%s", s.Module, err, out)
	}
	t.Logf("kwctl push %s:\n%s", s.Module, out)

	// The default PolicyServer may pull from the registry over plain HTTP, as a user with a
	// private registry sets it (the chart's PolicyServer.insecureSources).
	r := s.Person.Run(t, "patch", "policyserver", "default", "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"insecureSources":[%q]}}`, s.Registry))
	if r.Err != nil {
		t.Fatalf("kubectl patch policyserver default: %v\n%s", r.Err, r.Stderr)
	}
	s.WaitDeployment(t, "policy-server-default", 3*time.Minute)

	// policy.yaml with only its module changed.
	s.PolicyFile = "policy.yaml"
	rewritten := moduleLine.ReplaceAllString(original, "${1}"+s.Module)
	framework.Must(t, os.WriteFile(s.Artifacts.Path(s.PolicyFile), []byte(rewritten), 0o644))
	check := exec.Command(framework.RolloutCheckBinary(t), "settings", s.PolicyFile)
	check.Dir = s.Artifacts.Dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("capi-rollout-check settings policy.yaml: %v\n%s", err, out)
	}
	r = s.Person.Run(t, "apply", "-f", s.PolicyFile)
	if r.Err != nil {
		t.Fatalf("kubectl apply -f policy.yaml: %v\n%s", r.Err, r.Stderr)
	}
	s.WaitPolicy(t, "active", 3*time.Minute)
}

// compareWebhook reports how the controller's ValidatingWebhookConfiguration differs from the
// one framework/policy.go builds by hand, field by field; the fields that decide which requests the
// policy sees and how a failure is handled must be equal.
func (s *stack) compareWebhook(t *testing.T) {
	real := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	framework.Must(t, s.CP.Client.Get(context.Background(), client.ObjectKey{Name: s.Policy.PolicyID()}, real))
	out, err := json.MarshalIndent(real, "", "  ")
	framework.Must(t, err)
	framework.Must(t, os.WriteFile(s.Artifacts.Path("controller-webhook.json"), out, 0o644))
	// The hand-made one as the API server would store it (its defaults: a rule's scope "*", an
	// empty objectSelector), by a server-side dry-run under another name.
	hand := s.Policy.WebhookConfiguration("https://policy-server.invalid", nil)
	hand.Name += "-by-hand"
	framework.Must(t, s.CP.Client.Create(context.Background(), hand, client.DryRunAll))
	if len(real.Webhooks) != 1 {
		t.Fatalf("the controller's %s has %d webhooks, want 1:\n%s", real.Name, len(real.Webhooks), out)
	}
	w, h := real.Webhooks[0], hand.Webhooks[0]
	fields := []struct {
		name       string
		real, hand any
		// decides: a difference changes which requests reach the policy or what a failure does.
		decides bool
	}{
		{"name", w.Name, h.Name, true},
		{"metadata.name", real.Name, strings.TrimSuffix(hand.Name, "-by-hand"), true},
		{"rules", w.Rules, h.Rules, true},
		{"failurePolicy", w.FailurePolicy, h.FailurePolicy, true},
		{"matchPolicy", w.MatchPolicy, h.MatchPolicy, true},
		{"namespaceSelector", w.NamespaceSelector, h.NamespaceSelector, true},
		{"objectSelector", w.ObjectSelector, h.ObjectSelector, true},
		{"sideEffects", w.SideEffects, h.SideEffects, true},
		{"timeoutSeconds", w.TimeoutSeconds, h.TimeoutSeconds, true},
		{"admissionReviewVersions", w.AdmissionReviewVersions, h.AdmissionReviewVersions, true},
		{"matchConditions", w.MatchConditions, h.MatchConditions, true},
		{"clientConfig.service", w.ClientConfig.Service, h.ClientConfig.Service, false},
		{"clientConfig.url", w.ClientConfig.URL, h.ClientConfig.URL, false},
		{"clientConfig.caBundle", len(w.ClientConfig.CABundle) > 0, len(h.ClientConfig.CABundle) > 0, false},
		{"metadata.labels", real.Labels, hand.Labels, false},
		{"metadata.annotations", real.Annotations, hand.Annotations, false},
		{"metadata.ownerReferences", real.OwnerReferences, hand.OwnerReferences, false},
	}
	var report []string
	for _, f := range fields {
		if framework.JSONEqual(f.real, f.hand) {
			continue
		}
		line := fmt.Sprintf("%s: controller %s, by hand %s", f.name, compactJSON(f.real), compactJSON(f.hand))
		report = append(report, line)
		if f.decides {
			t.Errorf("the hand-made webhook differs where it matters: %s", line)
		}
	}
	if w.ClientConfig.Service != nil {
		svc := w.ClientConfig.Service
		t.Logf("the controller's webhook calls Service %s/%s port %d path %s", svc.Namespace, svc.Name, ptrValue(svc.Port), ptrValue(svc.Path))
	}
	text := "The controller's ValidatingWebhookConfiguration " + real.Name + " against framework/policy.go's, where they differ:\n  " + strings.Join(report, "\n  ") + "\n"
	framework.Must(t, os.WriteFile(s.Artifacts.Path("webhook-differences.txt"), []byte(text), 0o644))
	t.Log(text)
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func compactJSON(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}

func (s *stack) bringUpPool(t *testing.T) {
	s.CreateCluster(t)
	for _, file := range []string{"pool-1-a.yaml", "pool-1.yaml"} {
		r := s.Person.Run(t, "apply", "-f", file)
		if r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	s.ProvisionInfrastructure(t, framework.PoolName)
	s.WaitFor(t, framework.KubeadmConfigGVK, "pool-1-a", 3*time.Minute, "adopted by the pool, token and data secret filled", func(u *unstructured.Unstructured) bool {
		token, _, _ := unstructured.NestedString(u.Object, framework.TokenPath...)
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, framework.PoolName) && token != "" && secret == "pool-1-a"
	})
	s.CheckControllersAdmitted(t, time.Time{})
}

// editConfig is the person's edit of the config in use: the sysctl changed in pool-1-a.yaml
// and applied, as in TestCluster's personEdits.
func (s *stack) editConfig(t *testing.T, from, to string, flags ...string) framework.KubectlResult {
	t.Helper()
	original := string(framework.ReadFile(t, s.Artifacts.Path("pool-1-a.yaml")))
	edited := strings.Replace(original, from, to, 1)
	if edited == original {
		t.Fatalf("pool-1-a.yaml has no %q", from)
	}
	framework.Must(t, os.WriteFile(s.Artifacts.Path("pool-1-a-edited.yaml"), []byte(edited), 0o644))
	return s.Person.Run(t, append(append([]string{"apply"}, flags...), "-f", "pool-1-a-edited.yaml")...)
}

// monitorEdit: in monitor policy-server admits what the policy refuses, dropping the refusal
// from its answer (its status and message; the policy's warnings would be kept, and a refusal
// carries none): kubectl prints nothing of it, and the refusal, paths and all, is in
// policy-server's log ("policy evaluation (monitor mode)").
func (s *stack) monitorEdit(t *testing.T) {
	since := time.Now()
	const refusal = "spec.files[0].content: Forbidden: changed"
	before := s.monitorRefusals(t, refusal)
	r := s.editConfig(t, "262144", "524288")
	if r.Err != nil {
		t.Fatalf("in monitor the edit was refused: %v\n%s", r.Err, r.Stderr)
	}
	if w := framework.PolicyWarnings(r.Stderr); len(w) > 0 {
		t.Errorf("in monitor kubectl printed a warning of the policy: %q", w)
	}
	var logged []string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		logged = s.monitorRefusals(t, refusal)
		return len(logged) > len(before), nil
	})
	if err != nil {
		t.Errorf("policy-server's log has no monitor-mode refusal naming %s after the edit", refusal)
	} else {
		t.Logf("policy-server logged the refusal it did not send:\n%s", logged[len(logged)-1])
	}
	// The person puts it back (an edit too, admitted in monitor).
	if r := s.Person.Run(t, "apply", "-f", "pool-1-a.yaml"); r.Err != nil {
		t.Fatalf("kubectl apply -f pool-1-a.yaml: %v\n%s", r.Err, r.Stderr)
	}
	s.CheckPersonAdmitted(t, since)
	s.CheckControllersAdmitted(t, since)
}

// monitorRefusals: the lines of the policy-server Pods' logs where policy-server, in monitor,
// logged a refusal of the policy containing text.
func (s *stack) monitorRefusals(t *testing.T, text string) []string {
	t.Helper()
	logs, err := filepath.Glob(s.Artifacts.Path("pod-policy-server-*.log"))
	framework.Must(t, err)
	var lines []string
	for _, log := range logs {
		for _, line := range strings.Split(string(framework.ReadFile(t, log)), "\n") {
			if strings.Contains(line, "policy evaluation (monitor mode)") && strings.Contains(line, "allowed: false") && strings.Contains(line, text) {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

func (s *stack) protect(t *testing.T) {
	since := time.Now()
	deployment := &appsv1.Deployment{}
	framework.Must(t, s.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: framework.KubewardenNamespace, Name: "policy-server-default"}, deployment))
	generation := deployment.Generation
	// The README's step: mode: protect in the person's copy of policy.yaml, applied.
	s.changePolicyFile(t, s.PolicyFile, "mode", "protect")
	r := s.Person.Run(t, "apply", "-f", s.PolicyFile)
	if r.Err != nil {
		t.Fatalf("kubectl apply -f policy.yaml (mode: protect): %v\n%s", r.Err, r.Stderr)
	}
	// The controller writes the new policies.yml and rolls the policy-server out again.
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.CP.Client.Get(ctx, client.ObjectKey{Namespace: framework.KubewardenNamespace, Name: "policy-server-default"}, deployment); err != nil {
			return false, nil
		}
		return deployment.Generation > generation, nil
	})
	if err != nil {
		t.Fatalf("the controller did not roll policy-server-default out after the switch to protect (generation %d)", generation)
	}
	s.WaitDeployment(t, "policy-server-default", 3*time.Minute)
	s.WaitPolicy(t, "active", 2*time.Minute)
	rolledOut := time.Now()
	t.Logf("policy-server-default rolled out in %s", rolledOut.Sub(since).Round(time.Second))

	r = s.editConfig(t, "262144", "524288")
	if r.Err == nil {
		t.Fatalf("in protect the edit was admitted:\n%s", r.Stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("admission webhook %q denied the request", s.WebhookName()),
		"spec.files[0].content: Forbidden: changed",
		"The config is in use by MachinePool fleet/pool-1",
		`set spec.template.spec.bootstrap.configRef.name of MachinePool fleet/pool-1 to "pool-1-`,
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("kubectl's stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
	// CABPK's writes while the policy-server rolled out: none refused, none failed open.
	events := s.EventsSince(t, since)
	var cabpkWrites int
	for _, e := range events {
		if e.User.Username == s.CABPK && e.Resource() == "kubeadmconfigs" && e.IsWrite() && e.RequestReceivedTimestamp.Before(rolledOut) {
			cabpkWrites++
		}
	}
	t.Logf("CABPK wrote kubeadmconfigs %d times during the rollout", cabpkWrites)
	// And CABPK's next rotation goes through the policy in protect.
	tokens := s.WaitForTokens(t, 2, 2*time.Minute)
	t.Logf("CABPK rotated pool-1-a's token under protect: %v", tokens)
	events = s.EventsSince(t, since)
	s.ReportStopFailures(t, since)
	s.CheckControllersAdmitted(t, since)
}

// protectToMonitor: docs/operations.md's "protect -> monitor is refused by Kubewarden", as a GitOps
// user meets it (a file still saying mode: monitor applied once the policy is in protect), by
// the controller's validating webhook for ClusterAdmissionPolicies (the controller chart's
// vclusteradmissionpolicy.kb.io, served by the controller's process): kubectl prints the
// field's reason, the audit log names the webhook.
func (s *stack) protectToMonitor(t *testing.T) {
	since := time.Now()
	stale := "policy-monitor.yaml"
	framework.Must(t, os.WriteFile(s.Artifacts.Path(stale), framework.ReadFile(t, s.Artifacts.Path(s.PolicyFile)), 0o644))
	s.changePolicyFile(t, stale, "mode", "monitor")
	r := s.Person.Run(t, "apply", "-f", stale)
	if r.Err == nil {
		t.Fatalf("protect -> monitor was admitted:\n%s", r.Stdout)
	}
	if want := "spec.mode: Forbidden: field cannot transition from protect to monitor"; !strings.Contains(r.Stderr, want) {
		t.Errorf("kubectl's stderr lacks %q:\n%s", want, r.Stderr)
	}
	const webhook = "vclusteradmissionpolicy.kb.io"
	var refused []framework.AuditEvent
	for _, e := range framework.DeniedBy(s.EventsSince(t, since), webhook) {
		if e.User.Username == s.PersonName && e.Resource() == "clusteradmissionpolicies" {
			refused = append(refused, e)
		}
	}
	if len(refused) != 1 {
		t.Errorf("the audit log shows %d refusals of the person's patch by %s, want 1", len(refused), webhook)
	} else {
		t.Logf("refused by the controller's webhook: %s", refused[0])
	}
	policy := s.WaitPolicy(t, "active", time.Minute)
	if got, _, _ := unstructured.NestedString(policy.Object, "spec", "mode"); got != "protect" {
		t.Errorf("the policy's mode is %q, want protect", got)
	}
}

// contextAware: the README's ClusterRole and binding (to the chart's `policy-server`
// ServiceAccount in kubewarden) applied by the person, then `contextAware: true` set in the
// policy's settings: the controller rolls the policy-server out, and its lookups tell the
// rotated-out config from the one in use.
func (s *stack) contextAware(t *testing.T) {
	since := time.Now()
	rbac := s.Artifacts.Path("lookups-rbac.yaml")
	framework.Must(t, os.WriteFile(rbac, framework.LookupsRBAC(t), 0o644))
	subjects := framework.ServiceAccountsOf(t, framework.ReadObjects(t, framework.LookupsRBAC(t)))
	for _, subject := range subjects {
		if sa := (&corev1.ServiceAccount{}); s.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: subject.Namespace, Name: subject.Name}, sa) != nil {
			t.Fatalf("the README binds the lookups to ServiceAccount %s/%s, which the charts did not create", subject.Namespace, subject.Name)
		}
	}
	for _, args := range [][]string{
		{"apply", "-f", "lookups-rbac.yaml"},
		{"patch", "clusteradmissionpolicy", s.Policy.Metadata.Name, "--type", "merge", "-p", `{"spec":{"settings":{"contextAware":true}}}`},
	} {
		if r := s.Person.Run(t, args...); r.Err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), r.Err, r.Stderr)
		}
	}
	s.WaitRolledOut(t, "policy-server-default", since)
	s.WaitPolicy(t, "active", 2*time.Minute)
	for _, subject := range subjects {
		for _, resource := range []string{"machinepools.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io"} {
			r := s.Person.Run(t, "auth", "can-i", "list", resource, "-n", framework.Namespace, "--as", "system:serviceaccount:"+subject.Namespace+":"+subject.Name)
			if strings.TrimSpace(r.Stdout) != "yes" {
				t.Errorf("the chart's ServiceAccount %s/%s may not list %s: %s %s", subject.Namespace, subject.Name, resource, r.Stdout, r.Stderr)
			}
		}
	}
	patch := fmt.Sprintf(`{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"max-pods","value":%q}]}}}}`, editedMaxPods)
	checkLookupVerdicts(t, s.ManagementCluster, patch)
	s.CheckControllersAdmitted(t, since)
}

// replicaDeleted: the default PolicyServer scaled to two replicas (its `replicas`, the chart's
// PolicyServer.replicaCount), then one of its Pods deleted as a person deletes one (kubectl
// delete pod waits until it is gone) while CABPK rotates the pool's token: the other replica
// answers, and kube-controller-manager's Deployment controller brings a new one up.
func (s *stack) replicaDeleted(t *testing.T) {
	r := s.Person.Run(t, "patch", "policyserver", "default", "--type", "merge", "-p", `{"spec":{"replicas":2}}`)
	if r.Err != nil {
		t.Fatalf("kubectl patch policyserver default: %v\n%s", r.Err, r.Stderr)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := s.CP.Client.Get(ctx, client.ObjectKey{Namespace: framework.KubewardenNamespace, Name: "policy-server-default"}, d); err != nil {
			return false, nil
		}
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2, nil
	})
	if err != nil {
		t.Fatal("the controller did not scale policy-server-default to 2 replicas")
	}
	s.WaitDeployment(t, "policy-server-default", 3*time.Minute)
	pods := &corev1.PodList{}
	framework.Must(t, s.CP.Client.List(context.Background(), pods, client.InNamespace(framework.KubewardenNamespace), client.MatchingLabels{"kubewarden/policy-server": "default"}))
	if len(pods.Items) != 2 {
		t.Fatalf("%d policy-server Pods, want 2", len(pods.Items))
	}
	since := time.Now()
	victim := pods.Items[0].Name
	if r := s.Person.Run(t, "delete", "pod", victim, "-n", framework.KubewardenNamespace); r.Err != nil {
		t.Fatalf("kubectl delete pod %s: %v\n%s", victim, r.Err, r.Stderr)
	}
	tokens := s.WaitForTokens(t, 2, 2*time.Minute)
	t.Logf("CABPK rotated the token after the Pod's deletion: %v", tokens)
	s.WaitDeployment(t, "policy-server-default", 3*time.Minute)
	s.ReportStopFailures(t, since)
	s.CheckControllersAdmitted(t, since)
}

// machinePoolDeletion is TestCluster's deletion step through Kubewarden: six pools, each
// rotated once, deleted by the person with each of kubectl's cascades, first with the policy's
// contextAware: true (set by the contextAware step), then with it false again, which the
// person sets in the policy's settings (the controller rolls the policy-server out).
func (s *stack) machinePoolDeletion(t *testing.T) {
	c := s.testCluster
	since := time.Now()
	cases := []deletionCase{
		{"del-ca-background", "background", true},
		{"del-ca-foreground", "foreground", true},
		{"del-ca-orphan", "orphan", true},
		{"del-background", "background", false},
		{"del-foreground", "foreground", false},
		{"del-orphan", "orphan", false},
	}
	c.rotatedPools(t, cases)
	c.deletePools(t, cases, true, func(on bool) { s.PatchContextAware(t, on) })
	checkGarbageCollectorNotRefused(t, s.EventsSince(t, since), s.WebhookName())
	s.CheckPersonAdmitted(t, since)
	s.CheckControllersAdmitted(t, since)
}

// outage: the person scales the default PolicyServer to no replica (the controller scales its
// Deployment, kube-controller-manager deletes the Pods): the policy's Service has no endpoint,
// kube-apiserver cannot call the webhook, and with failurePolicy Ignore CABPK's rotations pass,
// audited failed-open; scaled back, the person's edit is refused again.
func (s *stack) outage(t *testing.T) {
	ps := &unstructured.Unstructured{}
	ps.SetGroupVersionKind(framework.PolicyServerGVK)
	framework.Must(t, s.CP.Client.Get(context.Background(), client.ObjectKey{Name: "default"}, ps))
	replicas, _, _ := unstructured.NestedInt64(ps.Object, "spec", "replicas")
	scale := func(n int64) {
		t.Helper()
		if r := s.Person.Run(t, "patch", "policyserver", "default", "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)); r.Err != nil {
			t.Fatalf("kubectl patch policyserver default: %v\n%s", r.Err, r.Stderr)
		}
		err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			d := &appsv1.Deployment{}
			if err := s.CP.Client.Get(ctx, client.ObjectKey{Namespace: framework.KubewardenNamespace, Name: "policy-server-default"}, d); err != nil {
				return false, nil
			}
			return d.Spec.Replicas != nil && int64(*d.Spec.Replicas) == n, nil
		})
		if err != nil {
			t.Fatalf("the controller did not scale policy-server-default to %d", n)
		}
		s.WaitDeployment(t, "policy-server-default", 3*time.Minute)
	}
	since := time.Now()
	scale(0)
	down := time.Now()
	tokens := s.WaitForTokens(t, 2, 2*time.Minute)
	t.Logf("CABPK rotated the token with no policy-server: %v", tokens)
	var unjudged int
	for _, e := range framework.FailedOpen(s.EventsSince(t, down), s.WebhookName()) {
		if e.User.Username == s.CABPK && e.Resource() == "kubeadmconfigs" {
			unjudged++
		}
	}
	if unjudged == 0 {
		t.Error("no write of CABPK's is audited failed-open with no policy-server")
	}
	t.Logf("CABPK's kubeadmconfigs writes admitted unjudged (failed-open): %d", unjudged)
	scale(replicas)
	s.Stops = append(s.Stops, framework.Window{From: since, To: time.Now()})
	r := s.editConfig(t, "262144", "524288")
	if r.Err == nil || !strings.Contains(r.Stderr, fmt.Sprintf("admission webhook %q denied the request", s.WebhookName())) {
		t.Errorf("with the policy-server back the edit was not refused by the policy: %v\n%s", r.Err, r.Stderr)
	}
	s.CheckControllersAdmitted(t, since)
}

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

// changePolicyFile is the person's change of a field of spec in their copy of policy.yaml
// (file, in the artifacts): the line `  <field>: ...` set to value.
func (s *stack) changePolicyFile(t *testing.T, file, field, value string) {
	t.Helper()
	path := s.Artifacts.Path(file)
	text := string(framework.ReadFile(t, path))
	line := regexp.MustCompile(`(?m)^(  ` + regexp.QuoteMeta(field) + `: ).*$`)
	if n := len(line.FindAllString(text, -1)); n != 1 {
		t.Fatalf("%s has %d lines `  %s: ...`, want 1", file, n, field)
	}
	framework.Must(t, os.WriteFile(path, []byte(line.ReplaceAllLiteralString(text, "  "+field+": "+value)), 0o644))
}

// newModuleTag: after the README's protect step, the person's next change as a GitOps user
// makes it: the same module pushed under a new tag, their policy.yaml (which says mode:
// protect since that step) pointed at it and applied. The controller admits it, rolls the
// policy-server out with the new module, and the policy is active again and still refuses.
func (s *stack) newModuleTag(t *testing.T) {
	since := time.Now()
	if text := string(framework.ReadFile(t, s.Artifacts.Path(s.PolicyFile))); !regexp.MustCompile(`(?m)^  mode: protect$`).MatchString(text) {
		t.Fatalf("the person's %s does not say mode: protect", s.PolicyFile)
	}
	module := s.Module[:strings.LastIndex(s.Module, ":")] + ":v0.1.1"
	push := exec.Command(s.Tools.Kwctl, "push", "--sources-path", s.Artifacts.Path("kwctl-sources.yaml"), s.moduleFile, module)
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("kwctl push %s: %v\n%s", module, err, out)
	}
	t.Logf("kwctl push %s:\n%s", module, out)
	s.changePolicyFile(t, s.PolicyFile, "module", module)
	r := s.Person.Run(t, "apply", "-f", s.PolicyFile)
	if r.Err != nil {
		t.Fatalf("kubectl apply -f policy.yaml (mode: protect, module %s) was refused: %v\n%s", module, r.Err, r.Stderr)
	}
	s.Module = module
	s.WaitRolledOut(t, "policy-server-default", since)
	policy := s.WaitPolicy(t, "active", 2*time.Minute)
	for field, want := range map[string]string{"module": module, "mode": "protect"} {
		if got, _, _ := unstructured.NestedString(policy.Object, "spec", field); got != want {
			t.Errorf("the policy's spec.%s is %q, want %q", field, got, want)
		}
	}
	r = s.editConfig(t, "262144", "524288")
	if r.Err == nil || !strings.Contains(r.Stderr, fmt.Sprintf("admission webhook %q denied the request", s.WebhookName())) {
		t.Errorf("with the new module the edit was not refused by the policy: %v\n%s", r.Err, r.Stderr)
	}
	s.CheckControllersAdmitted(t, since)
}

// settingsMistake: docs/operations.md's warning that Kubewarden takes any settings on apply, as a
// person meets it. While the policy is in protect and CABPK rotates the pool's token, the
// person applies a second ClusterAdmissionPolicy of the same module (their policy.yaml under
// another name) with a misspelt key, `inPlaceEdit: reject`, then a third with a bad value,
// `inPlaceEdits: rejct`: kubectl admits both, the controller adds them to the PolicyServer's
// configuration and rolls it out, and the new Pod's policy-server exits naming the key; the
// old Pod keeps serving the good policy. Then that last good Pod is deleted, as a node drain
// or an eviction deletes it: its replacement reads the same configuration and exits too, and
// the policy's webhook has nothing to call. Then the person deletes the two policies and the
// stack is back to normal.
func (s *stack) settingsMistake(t *testing.T) {
	const deployment = "policy-server-default"
	since := time.Now()
	serving := map[string]string{} // the Pods serving before: name -> their ReplicaSet
	for _, pod := range s.PolicyServerPods(t) {
		if framework.PodReady(pod) {
			serving[pod.Name] = framework.ReplicaSetOf(pod)
		}
	}
	if len(serving) == 0 {
		t.Fatal("no policy-server Pod is ready before the mistake")
	}
	mistakes := []struct {
		file, name, from, to string
		// key: what names the mistake in the policy's own message.
		key string
	}{
		{"policy-typo.yaml", s.Policy.Metadata.Name + "-typo", "inPlaceEdits: reject", "inPlaceEdit: reject", "inPlaceEdit:"},
		{"policy-bad-value.yaml", s.Policy.Metadata.Name + "-bad-value", "inPlaceEdits: reject", "inPlaceEdits: rejct", `"rejct"`},
	}
	var names, keys []string
	for _, m := range mistakes {
		revision := s.Revision(t, deployment)
		s.writePolicyVariant(t, m.file, m.name, m.from, m.to)
		// The README's check, before kubectl apply, finds it.
		check := exec.Command(framework.RolloutCheckBinary(t), "settings", m.file)
		check.Dir = s.Artifacts.Dir
		out, err := check.CombinedOutput()
		t.Logf("capi-rollout-check settings %s: exit %d\n%s", m.file, exitCode(err), out)
		if exitCode(err) != 1 || !strings.Contains(string(out), m.key) {
			t.Errorf("capi-rollout-check settings %s: exit %d, want 1 naming %s", m.file, exitCode(err), m.key)
		}
		r := s.Person.Run(t, "apply", "-f", m.file)
		t.Logf("kubectl apply -f %s: exit %d, stdout %q, stderr %q", m.file, exitCode(r.Err), r.Stdout, r.Stderr)
		if r.Err != nil {
			t.Fatalf("kubectl apply -f %s was refused: %v\n%s", m.file, r.Err, r.Stderr)
		}
		if want := "clusteradmissionpolicy.policies.kubewarden.io/" + m.name + " created"; !strings.Contains(r.Stdout, want) {
			t.Errorf("kubectl apply -f %s printed %q, want %q", m.file, r.Stdout, want)
		}
		names, keys = append(names, m.name), append(keys, m.key)

		// The controller rolls the PolicyServer out with the new policy; the new Pod exits.
		pod := s.WaitCrashLooping(t, deployment, revision, 1, 2*time.Minute)
		lines := s.invalidSettings(t, pod.Name)
		if len(lines) == 0 {
			t.Errorf("the log of %s (%v) has no line `Policy settings are invalid`", pod.Name, s.PodLogs(t, pod.Name))
		}
		for _, line := range lines {
			if !slices.ContainsFunc(keys, func(key string) bool { return strings.Contains(line, key) }) {
				t.Errorf("policy-server's exit names none of %q: %s", keys, line)
			}
			// docs/operations.md: the line names the problem, not the policy.
			if slices.ContainsFunc(names, func(name string) bool { return strings.Contains(line, name) }) {
				t.Errorf("policy-server's exit names the policy: %s", line)
			}
		}
		t.Logf("Pod %s of the new ReplicaSet %s, restarted %d times, exited each time with:\n%s", pod.Name, framework.ReplicaSetOf(pod), framework.Restarts(pod), strings.Join(lines, "\n"))
		s.checkStillServing(t, serving)
		s.checkPoliciesWhileBad(t, m.name, m.key)
	}

	// Meanwhile CAPI's writes: CABPK rotates the token, judged by the old Pod.
	judged := s.waitCABPKWrite(t, since, false)
	t.Logf("CABPK's writes to kubeadmconfigs since the first bad policy, the old Pod judging: %d", judged)
	for _, e := range framework.FailedOpen(s.EventsSince(t, since), s.WebhookName()) {
		t.Errorf("admitted without the policy's answer while the old Pod served: %s", e)
	}
	s.CheckControllersAdmitted(t, since)
	if r := s.editConfig(t, "262144", "524288"); r.Err == nil || !strings.Contains(r.Stderr, fmt.Sprintf("admission webhook %q denied the request", s.WebhookName())) {
		t.Errorf("with the old Pod serving, the person's edit was not refused by the policy: %v\n%s", r.Err, r.Stderr)
	}
	s.checkEventsName(t, since, keys)

	// The last good Pod goes, as a node drain or an eviction takes it: the Deployment's old
	// ReplicaSet makes another from the old template, which reads the same configuration.
	deleted := time.Now()
	for name := range serving {
		if r := s.Person.Run(t, "delete", "pod", name, "-n", framework.KubewardenNamespace); r.Err != nil {
			t.Fatalf("kubectl delete pod %s: %v\n%s", name, r.Err, r.Stderr)
		}
	}
	replacement := s.waitPolicyServerPod(t, "a replacement of the deleted Pod, restarted", func(pod corev1.Pod) bool {
		_, old := serving[pod.Name]
		return !old && slices.Contains(slices.Collect(maps.Values(serving)), framework.ReplicaSetOf(pod)) && framework.Restarts(pod) >= 1
	})
	t.Logf("the old ReplicaSet's new Pod %s, restarted %d times, exited with:\n%s", replacement.Name, framework.Restarts(replacement), strings.Join(s.invalidSettings(t, replacement.Name), "\n"))
	for _, pod := range s.PolicyServerPods(t) {
		if framework.PodReady(pod) {
			t.Errorf("policy-server Pod %s is ready with the bad policies in the configuration", pod.Name)
		}
	}
	unjudged := s.waitCABPKWrite(t, deleted, true)
	t.Logf("with no policy-server Pod ready, CABPK's writes admitted unjudged (failed-open): %d", unjudged)
	if r := s.editConfig(t, "262144", "524288", "--dry-run=server"); r.Err != nil {
		t.Errorf("with no policy-server Pod ready, the person's edit (--dry-run=server) was refused: %v\n%s", r.Err, r.Stderr)
	} else {
		t.Logf("with no policy-server Pod ready, the person's edit (--dry-run=server) was admitted: %s", strings.TrimSpace(r.Stdout))
	}

	// The person deletes the two policies: the controller rolls the PolicyServer out without
	// them and everything is back.
	recovering := time.Now()
	if r := s.Person.Run(t, append([]string{"delete", "clusteradmissionpolicy"}, names...)...); r.Err != nil {
		t.Fatalf("kubectl delete clusteradmissionpolicy %s: %v\n%s", strings.Join(names, " "), r.Err, r.Stderr)
	}
	s.WaitRolledOut(t, deployment, recovering)
	// From the deletion to the rollout's end no policy-server Pod was ready (noneRefused).
	s.Stops = append(s.Stops, framework.Window{From: deleted, To: time.Now()})
	for _, e := range framework.FailedOpen(s.EventsSince(t, deleted), s.WebhookName()) {
		t.Logf("failed open, no policy-server Pod ready: %s", e)
	}
	t.Logf("policy-server-default rolled out %s after the delete", time.Since(recovering).Round(time.Second))
	for _, name := range names {
		if got := s.GetPolicy(t, name); got.GetName() != "" {
			t.Errorf("ClusterAdmissionPolicy %s still exists after kubectl delete", name)
		}
	}
	s.WaitPolicy(t, "active", time.Minute)
	var reachable string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		reachable = framework.PolicyCondition(s.GetPolicy(t, s.Policy.Metadata.Name), "PolicyUniquelyReachable")
		return strings.HasPrefix(reachable, "True "), nil
	})
	if err != nil {
		t.Errorf("the policy's PolicyUniquelyReachable is %q after the rollout, want True", reachable)
	}
	for _, pod := range s.PolicyServerPods(t) {
		if !framework.PodReady(pod) || framework.Restarts(pod) > 0 {
			t.Errorf("policy-server Pod %s: ready %t, restarted %d times after the rollout", pod.Name, framework.PodReady(pod), framework.Restarts(pod))
		}
	}
	if r := s.editConfig(t, "262144", "524288"); r.Err == nil || !strings.Contains(r.Stderr, fmt.Sprintf("admission webhook %q denied the request", s.WebhookName())) {
		t.Errorf("after the bad policies were deleted the edit was not refused by the policy: %v\n%s", r.Err, r.Stderr)
	}
	s.CheckControllersAdmitted(t, since)
	t.Logf("the mistakes, the outage they made and the repair took %s", time.Since(since).Round(time.Second))
}

// writePolicyVariant writes the person's policy.yaml under another name, the line `from` of
// its settings replaced by `to`.
func (s *stack) writePolicyVariant(t *testing.T, file, name, from, to string) {
	t.Helper()
	text := string(framework.ReadFile(t, s.Artifacts.Path(s.PolicyFile)))
	for _, edit := range []struct {
		line    *regexp.Regexp
		replace string
	}{
		{regexp.MustCompile(`(?m)^  name: .*$`), "  name: " + name},
		{regexp.MustCompile(`(?m)^    ` + regexp.QuoteMeta(from) + `$`), "    " + to},
	} {
		if n := len(edit.line.FindAllString(text, -1)); n != 1 {
			t.Fatalf("%s has %d lines matching %s, want 1", s.PolicyFile, n, edit.line)
		}
		text = edit.line.ReplaceAllLiteralString(text, edit.replace)
	}
	framework.Must(t, os.WriteFile(s.Artifacts.Path(file), []byte(text), 0o644))
}

// invalidSettings: the lines of a Pod's logs (every run of its container) where policy-server
// said a policy's settings are invalid.
func (s *stack) invalidSettings(t *testing.T, pod string) []string {
	t.Helper()
	var lines []string
	for _, log := range s.PodLogs(t, pod) {
		for _, line := range strings.Split(string(framework.ReadFile(t, log)), "\n") {
			if strings.Contains(line, "Policy settings are invalid") {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// checkStillServing: the Pods that served before are still there and ready.
func (s *stack) checkStillServing(t *testing.T, serving map[string]string) {
	t.Helper()
	now := map[string]corev1.Pod{}
	for _, pod := range s.PolicyServerPods(t) {
		now[pod.Name] = pod
	}
	for name := range serving {
		pod, ok := now[name]
		if !ok || !framework.PodReady(pod) {
			t.Errorf("policy-server Pod %s, which served before, is gone or not ready (present %t)", name, ok)
		}
	}
	d := &appsv1.Deployment{}
	framework.Must(t, s.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: framework.KubewardenNamespace, Name: "policy-server-default"}, d))
	t.Logf("Deployment policy-server-default: replicas %d, updated %d, ready %d, available %d, unavailable %d",
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas)
	if d.Status.AvailableReplicas < int32(len(serving)) {
		t.Errorf("Deployment policy-server-default has %d available replicas, want the %d that served before", d.Status.AvailableReplicas, len(serving))
	}
}

// checkPoliciesWhileBad: the bad policy's status (the controller has not made its webhook) and
// the good one's (still active).
func (s *stack) checkPoliciesWhileBad(t *testing.T, name, key string) {
	t.Helper()
	var bad *unstructured.Unstructured
	var status string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		bad = s.GetPolicy(t, name)
		status, _, _ = unstructured.NestedString(bad.Object, "status", "policyStatus")
		return status != "" && framework.PolicyCondition(bad, "PolicyUniquelyReachable") != "", nil
	})
	if err != nil {
		t.Errorf("the controller wrote no status of ClusterAdmissionPolicy %s: %s", name, framework.ToYAML(t, []*unstructured.Unstructured{bad}))
	}
	statusText := compactJSON(bad.Object["status"])
	t.Logf("ClusterAdmissionPolicy %s: status %s", name, statusText)
	if status != "pending" {
		t.Errorf("ClusterAdmissionPolicy %s is %q, want pending", name, status)
	}
	if c := framework.PolicyCondition(bad, "PolicyActive"); !strings.HasPrefix(c, "False ") {
		t.Errorf("ClusterAdmissionPolicy %s: PolicyActive %q, want False", name, c)
	}
	if strings.Contains(statusText, key) {
		t.Errorf("the status of ClusterAdmissionPolicy %s names the key %s (docs/operations.md says only the Pod's log does): %s", name, key, statusText)
	}
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := s.CP.Client.Get(context.Background(), client.ObjectKey{Name: "clusterwide-" + name}, webhook); !apierrors.IsNotFound(err) {
		t.Errorf("ValidatingWebhookConfiguration clusterwide-%s: %v, want none", name, err)
	}
	good := s.GetPolicy(t, s.Policy.Metadata.Name)
	if status, _, _ := unstructured.NestedString(good.Object, "status", "policyStatus"); status != "active" {
		t.Errorf("the good policy is %q while the bad one is pending, want active", status)
	}
	t.Logf("the good policy: PolicyActive %q, PolicyUniquelyReachable %q, PolicyServerConfigurationUpToDate %q",
		framework.PolicyCondition(good, "PolicyActive"), framework.PolicyCondition(good, "PolicyUniquelyReachable"),
		framework.PolicyCondition(good, "PolicyServerConfigurationUpToDate"))
}

// checkEventsName: neither the PolicyServer's status nor an Event of Kubewarden's namespace
// since the time names a key: only the Pod's log does. (The kubelet's own Events, BackOff and
// the like, which the stand-in does not write, carry no log line either.)
func (s *stack) checkEventsName(t *testing.T, since time.Time, keys []string) {
	t.Helper()
	ps := &unstructured.Unstructured{}
	ps.SetGroupVersionKind(framework.PolicyServerGVK)
	framework.Must(t, s.CP.Client.Get(context.Background(), client.ObjectKey{Name: "default"}, ps))
	status := compactJSON(ps.Object["status"])
	t.Logf("PolicyServer default: status %s", status)
	for _, key := range keys {
		if strings.Contains(status, key) {
			t.Errorf("the PolicyServer's status names %s: %s", key, status)
		}
	}
	events := &corev1.EventList{}
	framework.Must(t, s.CP.Client.List(context.Background(), events, client.InNamespace(framework.KubewardenNamespace)))
	var recent []string
	for _, e := range events.Items {
		if e.LastTimestamp.Time.Before(since.Add(-time.Second)) && e.EventTime.Time.Before(since.Add(-time.Second)) {
			continue
		}
		line := fmt.Sprintf("%s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		recent = append(recent, line)
		for _, key := range keys {
			if strings.Contains(e.Message, key) {
				t.Errorf("an Event names %s: %s", key, line)
			}
		}
	}
	t.Logf("Events in %s since the first bad policy: %d\n  %s", framework.KubewardenNamespace, len(recent), strings.Join(recent, "\n  "))
}

// waitPolicyServerPod waits for a Pod of the default PolicyServer that matches.
func (s *stack) waitPolicyServerPod(t *testing.T, what string, match func(corev1.Pod) bool) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, pod := range s.PolicyServerPods(t) {
			if match(pod) {
				found = pod
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no policy-server Pod: %s (node: %s)", what, s.Artifacts.Path("node.log"))
	}
	return found
}

// waitCABPKWrite waits for a write of CABPK's to the configs since the time, one admitted
// without the policy's answer if failedOpen; it returns how many such writes there were.
func (s *stack) waitCABPKWrite(t *testing.T, since time.Time, failedOpen bool) int {
	t.Helper()
	var n int
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		events := s.EventsSince(t, since)
		if failedOpen {
			events = framework.FailedOpen(events, s.WebhookName())
		}
		n = 0
		for _, e := range events {
			if e.User.Username == s.CABPK && e.Resource() == "kubeadmconfigs" && e.IsWrite() {
				n++
			}
		}
		return n > 0, nil
	})
	if err != nil {
		t.Errorf("no write of CABPK's to kubeadmconfigs since %s (failed open: %t)", since.Format(time.RFC3339), failedOpen)
	}
	return n
}

// exitCode is a command's exit code (0: it succeeded, -1: it did not run).
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
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
