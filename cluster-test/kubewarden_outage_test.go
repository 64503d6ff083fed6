package clustertest

import (
	"context"
	"fmt"
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
