package clustertest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
	since := time.Now()
	serving := s.servingPolicyServers(t)
	mistakes := []settingsMistakeFile{
		{"policy-typo.yaml", s.Policy.Metadata.Name + "-typo", "inPlaceEdits: reject", "inPlaceEdit: reject", "inPlaceEdit:"},
		{"policy-bad-value.yaml", s.Policy.Metadata.Name + "-bad-value", "inPlaceEdits: reject", "inPlaceEdits: rejct", `"rejct"`},
	}
	var names, keys []string
	for _, m := range mistakes {
		names, keys = append(names, m.name), append(keys, m.key)
		s.applySettingsMistake(t, m, names, keys, serving)
	}
	s.oldPodKeepsJudging(t, since, keys)
	deleted := s.lastGoodPodDeleted(t, serving)
	s.badPoliciesDeleted(t, names, since, deleted)
	t.Logf("the mistakes, the outage they made and the repair took %s", time.Since(since).Round(time.Second))
}

// policyServerDeployment is the default PolicyServer's Deployment, which the controller makes.
const policyServerDeployment = "policy-server-default"

// settingsMistakeFile is a copy of the person's policy.yaml under another name with one
// mistake in its settings; key is what names the mistake in the policy's own message.
type settingsMistakeFile struct {
	file, name, from, to string
	key                  string
}

// servingPolicyServers: the policy-server Pods ready before the mistake, name -> their ReplicaSet.
func (s *stack) servingPolicyServers(t *testing.T) map[string]string {
	serving := map[string]string{}
	for _, pod := range s.PolicyServerPods(t) {
		if framework.PodReady(pod) {
			serving[pod.Name] = framework.ReplicaSetOf(pod)
		}
	}
	if len(serving) == 0 {
		t.Fatal("no policy-server Pod is ready before the mistake")
	}
	return serving
}

// applySettingsMistake: capi-rollout-check settings finds the mistake, kubectl apply admits it,
// the controller rolls the PolicyServer out and the new Pod exits naming the key (names and
// keys: the mistakes applied so far), while the Pods serving before keep serving.
func (s *stack) applySettingsMistake(t *testing.T, m settingsMistakeFile, names, keys []string, serving map[string]string) {
	const deployment = policyServerDeployment
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

// oldPodKeepsJudging: meanwhile CABPK rotates the token, judged by the old Pod, and the
// person's edit is still refused.
func (s *stack) oldPodKeepsJudging(t *testing.T, since time.Time, keys []string) {
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
}

// lastGoodPodDeleted: the last good Pod goes, as a node drain or an eviction takes it; the
// Deployment's old ReplicaSet makes another from the old template, which reads the same
// configuration and exits too. Returns when the Pods were deleted.
func (s *stack) lastGoodPodDeleted(t *testing.T, serving map[string]string) time.Time {
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
	return deleted
}

// badPoliciesDeleted: the person deletes the two policies; the controller rolls the
// PolicyServer out without them and everything is back.
func (s *stack) badPoliciesDeleted(t *testing.T, names []string, since, deleted time.Time) {
	const deployment = policyServerDeployment
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
