package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubewardenTools are Kubewarden's own tools, as its users run them: .ci/run hands them on from
// Kubewarden's release (KUBEWARDEN_CONTROLLER, POLICY_SERVER, KWCTL, KUBEWARDEN_CHARTS), run.sh
// builds the chart renderer (cluster-test/kubewarden, Helm as a Go module: KUBEWARDEN_RENDER).
type KubewardenTools struct {
	Controller, PolicyServer, Kwctl, charts, render string
	// auditScanner (AUDIT_SCANNER) is optional: without it the audit step is skipped.
	AuditScanner string
}

// The release names and namespace of Kubewarden's documentation (`helm install --namespace
// kubewarden --create-namespace kubewarden-crds kubewarden/kubewarden-crds`, and so on), in
// the order it installs the charts.
var KubewardenCharts = []string{"kubewarden-crds", "kubewarden-controller", "kubewarden-defaults"}

var (
	PolicyServerGVK           = schema.GroupVersionKind{Group: "policies.kubewarden.io", Version: "v1", Kind: "PolicyServer"}
	clusterAdmissionPolicyGVK = schema.GroupVersionKind{Group: "policies.kubewarden.io", Version: "v1", Kind: "ClusterAdmissionPolicy"}
)

// FindKubewardenTools are the tools from the environment; without one of them the test is skipped,
// saying what did not run.
func FindKubewardenTools(t *testing.T) KubewardenTools {
	t.Helper()
	k := KubewardenTools{
		Controller: os.Getenv("KUBEWARDEN_CONTROLLER"), PolicyServer: os.Getenv("POLICY_SERVER"),
		Kwctl: os.Getenv("KWCTL"), charts: os.Getenv("KUBEWARDEN_CHARTS"), render: os.Getenv("KUBEWARDEN_RENDER"),
		AuditScanner: os.Getenv("AUDIT_SCANNER"),
	}
	var missing []string
	for name, value := range map[string]string{"KUBEWARDEN_CONTROLLER": k.Controller, "POLICY_SERVER": k.PolicyServer, "KWCTL": k.Kwctl, "KUBEWARDEN_CHARTS": k.charts} {
		if value == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Skipf("not run: Kubewarden's charts, controller and policy-server in front of CAPI (no %s; .ci/run sets them from Kubewarden's release)", strings.Join(missing, ", "))
	}
	if k.render == "" {
		t.Fatal("KUBEWARDEN_RENDER is not set: run.sh builds the chart renderer (cluster-test/kubewarden) when KUBEWARDEN_CHARTS is set")
	}
	for _, tool := range []string{k.Controller, k.PolicyServer, k.Kwctl, k.render, filepath.Join(k.charts, "kubewarden-crds", "Chart.yaml")} {
		if _, err := os.Stat(tool); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("docker-registry"); err != nil {
		t.Fatal("no docker-registry (the test's OCI registry): .ci/system-packages kubewarden installs it")
	}
	return k
}

// Kubewarden is Kubewarden as the test installs it in a management cluster: its tools, the
// kubelet stand-in that runs its Pods, the OCI registry that serves the policy's module.
type Kubewarden struct {
	Cluster *ManagementCluster
	Tools   KubewardenTools
	Node    *Node
	// registry is host:port of the test's OCI registry; module the policy's module in it.
	Registry, Module string
	// policyFile is policy.yaml with its module rewritten to the registry, in the artifacts.
	PolicyFile string
	// root is the whole test: what a step starts (the registry) outlives the step.
	Root *testing.T
	// stops are the times a policy-server Pod stopped (a rollout's end, a Pod deleted): a
	// request in flight to it then may fail open (noneRefused).
	Stops []Window
}

// window is a span of time.
type Window struct{ From, To time.Time }

func (w Window) Contains(t time.Time) bool { return !t.Before(w.From) && !t.After(w.To) }

// ReportStopFailures logs the requests since the time that failed open while a policy-server
// Pod stopped, and records the window: policy-server 1.35 exits on SIGTERM without draining
// and kube-apiserver keeps its connections to a Pod until they close, so a request in flight
// to the stopping Pod is reset and, failurePolicy Ignore, admitted without the policy's answer.
func (s *Kubewarden) ReportStopFailures(t *testing.T, since time.Time) {
	t.Helper()
	s.Stops = append(s.Stops, Window{From: since, To: time.Now()})
	for _, e := range FailedOpen(s.Cluster.EventsSince(t, since), s.Cluster.WebhookName()) {
		t.Logf("failed open as a policy-server Pod stopped with the request in flight: %s", e)
	}
}

// render is `helm install`'s rendering of a chart with its default values (cluster-test/kubewarden).
func (s *Kubewarden) Render(t *testing.T, chart string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(s.Tools.render, "-namespace", KubewardenNamespace, "-kube-version", "v1.34.3", chart, filepath.Join(s.Tools.charts, chart))
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("render %s: %v\n%s", chart, err, stderr)
	}
	Must(t, os.WriteFile(s.Cluster.Artifacts.Path(chart+".yaml"), out, 0o644))
	return ReadObjects(t, out)
}

// WaitDeployment waits for a Deployment of Kubewarden's namespace to be rolled out: every
// replica updated and available, no old Pod left.
func (s *Kubewarden) WaitDeployment(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	d := &appsv1.Deployment{}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.Cluster.CP.Client.Get(ctx, client.ObjectKey{Namespace: KubewardenNamespace, Name: name}, d); err != nil {
			return false, nil
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != replicas ||
			d.Status.AvailableReplicas != replicas || d.Status.Replicas != replicas {
			return false, nil
		}
		// And the old Pods gone, not only scaled away: a terminating policy-server still holds
		// kube-apiserver's connections.
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return false, err
		}
		pods := &corev1.PodList{}
		if err := s.Cluster.CP.Client.List(ctx, pods, client.InNamespace(KubewardenNamespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return false, nil
		}
		return int32(len(pods.Items)) == replicas, nil
	})
	if err != nil {
		t.Fatalf("Deployment %s/%s not rolled out after %s: %+v (node: %s, kube-controller-manager: %s)", KubewardenNamespace, name, timeout, d.Status, s.Cluster.Artifacts.Path("node.log"), s.Cluster.CP.ControllerManager.Log)
	}
}

// StartRegistry runs Debian's docker-registry on 127.0.0.1, plain HTTP, its storage in the
// artifacts, until the test ends.
func (s *Kubewarden) StartRegistry() string {
	t := s.Root
	t.Helper()
	port := FreePort(t)
	dir := s.Cluster.Artifacts.Path("registry")
	Must(t, os.MkdirAll(filepath.Join(dir, "storage"), 0o755))
	config := filepath.Join(dir, "config.yml")
	Must(t, os.WriteFile(config, []byte(fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%d\n", filepath.Join(dir, "storage"), port)), 0o644))
	bin, err := exec.LookPath("docker-registry")
	Must(t, err)
	p := StartProcess(t, s.Cluster.Artifacts, "docker-registry", bin, []string{"serve", config})
	WaitHTTP(t, p, fmt.Sprintf("http://127.0.0.1:%d/v2/", port), time.Minute, nil)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// WaitPolicy waits for the ClusterAdmissionPolicy's status.policyStatus.
func (s *Kubewarden) WaitPolicy(t *testing.T, status string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	return s.WaitPolicyNamed(t, s.Cluster.Policy.Metadata.Name, status, timeout)
}

// WaitPolicyNamed waits for the status.policyStatus of the ClusterAdmissionPolicy of that name.
func (s *Kubewarden) WaitPolicyNamed(t *testing.T, name, status string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		u = s.GetPolicy(t, name)
		got, _, _ := unstructured.NestedString(u.Object, "status", "policyStatus")
		return got == status, nil
	})
	if err != nil {
		t.Fatalf("ClusterAdmissionPolicy %s not %s after %s:\n%s\n(policy-server logs: %s)", name, status, timeout,
			ToYAML(t, []*unstructured.Unstructured{u}), s.Cluster.Artifacts.Path("pod-policy-server-default-*.log"))
	}
	return u
}

// GetPolicy is the ClusterAdmissionPolicy of that name as it is now; no such policy: an empty
// object.
func (s *Kubewarden) GetPolicy(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterAdmissionPolicyGVK)
	if err := s.Cluster.CP.Client.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
		u = &unstructured.Unstructured{}
		u.SetGroupVersionKind(clusterAdmissionPolicyGVK)
	}
	return u
}

// PolicyCondition is a condition of a policy's status: "Status Reason: Message", "" if absent.
func PolicyCondition(policy *unstructured.Unstructured, conditionType string) string {
	conditions, _, _ := unstructured.NestedSlice(policy.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == conditionType {
			return fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return ""
}

// PatchContextAware: the person patches the policy's settings; the controller rolls the
// policy-server out with them and the policy is active again.
func (s *Kubewarden) PatchContextAware(t *testing.T, on bool) {
	t.Helper()
	changed := time.Now()
	if r := s.Cluster.Person.Run(t, "patch", "clusteradmissionpolicy", s.Cluster.Policy.Metadata.Name, "--type", "merge", "-p",
		fmt.Sprintf(`{"spec":{"settings":{"contextAware":%t}}}`, on)); r.Err != nil {
		t.Fatalf("kubectl patch clusteradmissionpolicy: %v\n%s", r.Err, r.Stderr)
	}
	s.WaitRolledOut(t, "policy-server-default", changed)
	s.WaitPolicy(t, "active", 2*time.Minute)
}

// AuditResults are the results of the fleet's OpenReports by policy (the
// ClusterAdmissionPolicy's name), each "Kind name" -> "result message".
type AuditResults map[string]map[string]string

// RunAuditScanner creates a Job from the audit-scanner CronJob, waits for it and returns the
// results of the fleet's OpenReports.
func (s *Kubewarden) RunAuditScanner(t *testing.T, name string) AuditResults {
	t.Helper()
	if r := s.Cluster.Person.Run(t, "create", "job", "--from=cronjob/audit-scanner", name, "-n", KubewardenNamespace); r.Err != nil {
		t.Fatalf("kubectl create job: %v\n%s", r.Err, r.Stderr)
	}
	job := &batchv1.Job{}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.Cluster.CP.Client.Get(ctx, client.ObjectKey{Namespace: KubewardenNamespace, Name: name}, job); err != nil {
			return false, nil
		}
		for _, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil || job.Status.Succeeded != 1 {
		t.Fatalf("the audit scanner's Job %s did not complete: %+v (logs: %v)", name, job.Status, s.PodLogs(t, name+"-"))
	}
	reports := &unstructured.UnstructuredList{}
	reports.SetGroupVersionKind(schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "ReportList"})
	Must(t, s.Cluster.CP.Client.List(context.Background(), reports, client.InNamespace(Namespace)))
	Must(t, os.WriteFile(s.Cluster.Artifacts.Path("audit-reports-"+name+".yaml"), ToYAML(t, reportItems(reports)), 0o644))
	results := AuditResults{}
	for _, report := range reports.Items {
		kind, _, _ := unstructured.NestedString(report.Object, "scope", "kind")
		object, _, _ := unstructured.NestedString(report.Object, "scope", "name")
		items, _, _ := unstructured.NestedSlice(report.Object, "results")
		for _, item := range items {
			result, _ := item.(map[string]any)
			// The audit scanner names a ClusterAdmissionPolicy by its policy-server ID.
			policy, _ := result["policy"].(string)
			policy = strings.TrimPrefix(policy, "clusterwide-")
			if results[policy] == nil {
				results[policy] = map[string]string{}
			}
			results[policy][kind+" "+object] = fmt.Sprintf("%v %v", result["result"], result["message"])
		}
	}
	t.Logf("%s: the audit scanner's results in %s, by policy: %v", name, Namespace, results)
	return results
}

// PodLogs are the logs of the Pods whose name starts with prefix.
func (s *Kubewarden) PodLogs(t *testing.T, prefix string) []string {
	t.Helper()
	logs, err := filepath.Glob(s.Cluster.Artifacts.Path("pod-" + prefix + "*.log"))
	Must(t, err)
	return logs
}

func reportItems(list *unstructured.UnstructuredList) []*unstructured.Unstructured {
	var items []*unstructured.Unstructured
	for i := range list.Items {
		items = append(items, &list.Items[i])
	}
	return items
}

// WaitRolledOut waits for the controller to change a Deployment after the time (a new
// generation), then for the rollout.
func (s *Kubewarden) WaitRolledOut(t *testing.T, name string, since time.Time) {
	t.Helper()
	d := &appsv1.Deployment{}
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rs := &appsv1.ReplicaSetList{}
		if s.Cluster.CP.Client.Get(ctx, client.ObjectKey{Namespace: KubewardenNamespace, Name: name}, d) != nil ||
			s.Cluster.CP.Client.List(ctx, rs, client.InNamespace(KubewardenNamespace)) != nil {
			return false, nil
		}
		for _, r := range rs.Items {
			if r.CreationTimestamp.After(since.Add(-time.Second)) && metav1.IsControlledBy(&r, d) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the controller did not roll %s out after %s: %v", name, since.Format(time.RFC3339), err)
	}
	s.WaitDeployment(t, name, 3*time.Minute)
	s.ReportStopFailures(t, since)
}

// Revision is the Deployment's rollout revision (deployment.kubernetes.io/revision, which
// kube-controller-manager's Deployment controller sets on it and on its newest ReplicaSet).
func (s *Kubewarden) Revision(t *testing.T, name string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	Must(t, s.Cluster.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: KubewardenNamespace, Name: name}, d))
	return d.Annotations["deployment.kubernetes.io/revision"]
}

// WaitCrashLooping waits for the newest ReplicaSet of the Deployment, of a revision after
// `after`, to have a Pod whose container was restarted at least `restarts` times, and returns
// that Pod: a new Pod template whose process keeps exiting.
func (s *Kubewarden) WaitCrashLooping(t *testing.T, name, after string, restarts int32, timeout time.Duration) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	var seen string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if s.Cluster.CP.Client.Get(ctx, client.ObjectKey{Namespace: KubewardenNamespace, Name: name}, d) != nil {
			return false, nil
		}
		revision := d.Annotations["deployment.kubernetes.io/revision"]
		if revision == after {
			return false, nil
		}
		rs := s.replicaSetOf(ctx, d, revision)
		if rs == nil {
			return false, nil
		}
		pods := s.podsOf(ctx, rs)
		seen = fmt.Sprintf("revision %s, ReplicaSet %s, %d Pods", revision, rs.Name, len(pods))
		for _, pod := range pods {
			for _, c := range pod.Status.ContainerStatuses {
				if c.RestartCount >= restarts {
					found = pod
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Pod of a new ReplicaSet of %s restarted %d times in %s (%s; node: %s)", name, restarts, timeout, seen, s.Cluster.Artifacts.Path("node.log"))
	}
	return found
}

// ReplicaSetOf is the name of the ReplicaSet that made the Pod (its controller).
func ReplicaSetOf(pod corev1.Pod) string {
	if owner := metav1.GetControllerOf(&pod); owner != nil {
		return owner.Name
	}
	return ""
}

// PolicyServerPods are the Pods of the default PolicyServer's Deployment, as they are now.
func (s *Kubewarden) PolicyServerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	Must(t, s.Cluster.CP.Client.List(context.Background(), pods, client.InNamespace(KubewardenNamespace), client.MatchingLabels{"kubewarden/policy-server": "default"}))
	return pods.Items
}

// PodReady: the Pod's Ready condition is true.
func PodReady(pod corev1.Pod) bool { return podReady(&pod) }

// Restarts is how often the Pod's container was restarted.
func Restarts(pod corev1.Pod) int32 {
	var n int32
	for _, c := range pod.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

func (s *Kubewarden) replicaSetOf(ctx context.Context, d *appsv1.Deployment, revision string) *appsv1.ReplicaSet {
	list := &appsv1.ReplicaSetList{}
	if s.Cluster.CP.Client.List(ctx, list, client.InNamespace(KubewardenNamespace)) != nil {
		return nil
	}
	for i := range list.Items {
		rs := &list.Items[i]
		if metav1.IsControlledBy(rs, d) && rs.Annotations["deployment.kubernetes.io/revision"] == revision {
			return rs
		}
	}
	return nil
}

func (s *Kubewarden) podsOf(ctx context.Context, rs *appsv1.ReplicaSet) []corev1.Pod {
	pods := &corev1.PodList{}
	if s.Cluster.CP.Client.List(ctx, pods, client.InNamespace(KubewardenNamespace), client.MatchingLabels{appsv1.DefaultDeploymentUniqueLabelKey: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]}) != nil {
		return nil
	}
	var out []corev1.Pod
	for _, pod := range pods.Items {
		if metav1.IsControlledBy(&pod, rs) {
			out = append(out, pod)
		}
	}
	return out
}
