package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
