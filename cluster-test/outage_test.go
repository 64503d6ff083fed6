package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (c *testCluster) outage(t *testing.T) {
	c.Server.Stop()
	down := time.Now()
	tokens := c.WaitForTokens(t, 3, 3*time.Minute)
	t.Logf("tokens CABPK wrote with the policy server down: %v", tokens)
	events := c.EventsSince(t, down)
	open := framework.FailedOpen(events, c.WebhookName())
	if len(open) < 2 {
		t.Fatalf("%d requests failed open while the policy server was down, want the rotations' (at least 2)", len(open))
	}
	for _, e := range open {
		if e.Code() >= 300 {
			t.Errorf("failed open but not admitted: %s", e)
		}
	}
	// None is lost: the token in the config is a live bootstrap token.
	config := c.Get(t, framework.KubeadmConfigGVK, "pool-1-b")
	token, _, _ := unstructured.NestedString(config.Object, framework.TokenPath...)
	id, _, _ := strings.Cut(token, ".")
	secret := &corev1.Secret{}
	if err := c.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + id}, secret); err != nil {
		t.Errorf("the config's token %s has no bootstrap token Secret: %v", id, err)
	}

	// Slow: something accepts the webhook's connections and never answers. The API server
	// waits timeoutSeconds, then fails open; CAPI's writes are late, not lost.
	timeout := time.Duration(*c.Policy.Spec.TimeoutSeconds) * time.Second
	slow := time.Now()
	stopHanging := framework.Hang(t, c.Server.Port)
	tokens = c.WaitForTokens(t, 2, 3*time.Minute)
	stopped := time.Now()
	stopHanging()
	t.Logf("tokens CABPK wrote with the policy server hanging: %v", tokens)
	// Requests still waiting when the listener closes fail open at once (connection reset):
	// only those answered while it hung show the timeout.
	open = nil
	for _, e := range framework.FailedOpen(c.EventsSince(t, slow), c.WebhookName()) {
		if e.StageTimestamp.Before(stopped) {
			open = append(open, e)
		}
	}
	if len(open) == 0 {
		t.Fatal("no request failed open while the policy server hung")
	}
	for _, e := range open {
		if e.Code() >= 300 {
			t.Errorf("failed open but not admitted: %s", e)
		}
		if e.Took() < timeout-500*time.Millisecond {
			t.Errorf("failed open after %s, before policy.yaml's timeoutSeconds (%s): %s", e.Took(), timeout, e)
		}
	}
	t.Logf("%d requests failed open after the webhook's timeout; the first took %s", len(open), open[0].Took())

	c.Server.Start(c.Artifacts, nil)
	up := time.Now()
	r := c.Person.Run(t, "patch", "kubeadmconfig", "pool-1-b", "-n", framework.Namespace, "--type", "merge", "-p",
		fmt.Sprintf(`{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"max-pods","value":%q}]}}}}`, editedMaxPods))
	if r.Err == nil || !strings.Contains(r.Stderr, "denied the request") {
		t.Errorf("with the policy server back the in-place edit was not refused: %v\n%s", r.Err, r.Stderr)
	}
	c.WaitForTokens(t, 2, 2*time.Minute)
	if open := framework.FailedOpen(c.EventsSince(t, up), c.WebhookName()); len(open) > 0 {
		t.Errorf("requests failed open with the policy server back: %s", open[0])
	}
	c.CheckControllersAdmitted(t, up)
}
