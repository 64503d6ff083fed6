package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
