package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// garbageCollector is the identity kube-controller-manager's garbage collector acts as
// (--use-service-account-credentials): the one the policy's rule 4 names.
const garbageCollector = "system:serviceaccount:kube-system:generic-garbage-collector"

// deletionBound is how long a person's `kubectl delete machinepool` may take: it waits for the
// pool to be gone (CAPI's finalizer and, by its cascade, the garbage collector's).
const deletionBound = 2 * time.Minute

// machinePoolDeletion: a person deletes MachinePools with kubectl, as the README's users do,
// once with the policy as the test runs it and once with contextAware: true. Each pool was
// rotated once, so it owns two configs: <pool>-a rotated out, <pool>-b in use. CAPI's
// MachinePool controller deletes the config its configRef names (and the infrastructure)
// before it lets the pool go; kube-controller-manager's garbage collector deletes the
// rotated-out one after the pool is gone (--cascade=background, kubectl's default), or both
// while the pool still exists (--cascade=foreground); with --cascade=orphan it removes the
// pool's ownerReference from both, and the person deletes the orphaned, rotated-out config.
// Every deletion completes within deletionBound, and the audit log shows CAPI's, the garbage
// collector's and the person's requests for the configs admitted by the policy's answer (not
// refused, not failed open).
func (c *testCluster) machinePoolDeletion(t *testing.T) {
	since := time.Now()
	cases := []deletionCase{
		{"del-background", "background", false},
		{"del-foreground", "foreground", false},
		{"del-orphan", "orphan", false},
		{"del-ca-background", "background", true},
		{"del-ca-foreground", "foreground", true},
		{"del-ca-orphan", "orphan", true},
	}
	c.rotatedPools(t, cases)
	contextAware := false
	defer func() {
		if contextAware {
			c.useContextAware(t, false)
		}
	}()
	c.deletePools(t, cases, false, func(on bool) {
		c.useContextAware(t, on)
		contextAware = on
	})

	checkGarbageCollectorNotRefused(t, c.EventsSince(t, since), c.WebhookName())
	// What the policy server judged of the garbage collector (policy-host serve's log).
	if verdicts, ok := framework.ReadVerdicts(t, c.PolicyServerLogs(t)); ok {
		deletes := 0
		for _, v := range verdicts {
			if v.User != garbageCollector {
				continue
			}
			if v.Operation == "DELETE" {
				deletes++
			}
			if !v.Allowed || v.Warnings > 0 {
				t.Errorf("the policy judged the garbage collector's %s of a %s: allowed=%t, %d warnings", v.Operation, v.Kind, v.Allowed, v.Warnings)
			}
		}
		if deletes == 0 {
			t.Error("the policy server judged no DELETE of the garbage collector")
		}
	}
	c.CheckPersonAdmitted(t, since)
	c.CheckControllersAdmitted(t, since)
}

// deletionCase is a MachinePool the deletion steps make, rotate once and delete with a cascade
// of kubectl's, with the policy's contextAware as given.
type deletionCase struct {
	pool, cascade string
	contextAware  bool
}

// rotatedPools makes each case's pool and its first config <pool>-a from the person's checkout,
// then rotates it as the README says (a new config <pool>-b, the configRef pointed at it), and
// waits until CAPI adopted <pool>-b and copied its data secret into the pool.
func (c *testCluster) rotatedPools(t *testing.T, cases []deletionCase) {
	t.Helper()
	var files []string
	for _, tc := range cases {
		files = append(files, c.writePool(t, tc.pool)...)
	}
	c.personApplies(t, files...)
	for _, tc := range cases {
		c.ProvisionInfrastructure(t, tc.pool)
	}
	for _, tc := range cases {
		c.waitForDataSecret(t, tc.pool, tc.pool+"-a")
	}
	files = nil
	for _, tc := range cases {
		rotated := strings.NewReplacer("name: "+tc.pool+"-a", "name: "+tc.pool+"-b", "262144", "524288").
			Replace(string(framework.ReadFile(t, c.Artifacts.Path(tc.pool+"-a.yaml"))))
		framework.Must(t, os.WriteFile(c.Artifacts.Path(tc.pool+"-b.yaml"), []byte(rotated), 0o644))
		files = append(files, tc.pool+"-b.yaml")
	}
	c.personApplies(t, files...)
	for _, tc := range cases {
		if r := c.Person.Run(t, "patch", "machinepool", tc.pool, "-n", framework.Namespace, "--type", "merge", "-p",
			`{"spec":{"template":{"spec":{"bootstrap":{"configRef":{"name":"`+tc.pool+`-b"}}}}}}`); r.Err != nil {
			t.Fatalf("the rotation of %s: %v\n%s", tc.pool, r.Err, r.Stderr)
		}
	}
	for _, tc := range cases {
		c.waitForDataSecret(t, tc.pool, tc.pool+"-b")
		c.WaitFor(t, framework.KubeadmConfigGVK, tc.pool+"-b", time.Minute, "adopted by the pool", func(u *unstructured.Unstructured) bool {
			return framework.ControlledByPool(u, tc.pool)
		})
	}
}

// deletePools deletes each case's pool in order, a subtest each (deletePool). The policy's
// contextAware is `contextAware` to begin with; setContextAware switches it before the first
// case that wants it otherwise.
func (c *testCluster) deletePools(t *testing.T, cases []deletionCase, contextAware bool, setContextAware func(bool)) {
	t.Helper()
	for _, tc := range cases {
		if tc.contextAware != contextAware {
			setContextAware(tc.contextAware)
			contextAware = tc.contextAware
		}
		name := "kubectl delete machinepool --cascade=" + tc.cascade
		if tc.contextAware {
			name += " with contextAware: true"
		}
		t.Run(name, func(t *testing.T) { c.deletePool(t, tc.pool, tc.cascade) })
	}
}

// checkGarbageCollectorNotRefused fails on every write of the garbage collector's in events
// that webhook refused.
func checkGarbageCollectorNotRefused(t *testing.T, events []framework.AuditEvent, webhook string) {
	t.Helper()
	for _, e := range framework.DeniedBy(events, webhook) {
		if e.User.Username == garbageCollector {
			t.Errorf("the policy refused the garbage collector's write: %s", e)
		}
	}
}

// deletePool deletes MachinePool pool as a person does, with kubectl's --cascade, and checks
// what became of its configs <pool>-a (rotated out) and <pool>-b (in use).
func (c *testCluster) deletePool(t *testing.T, pool, cascade string) {
	start := time.Now()
	r := c.Person.Run(t, "delete", "machinepool", pool, "-n", framework.Namespace, "--cascade="+cascade, "--timeout="+deletionBound.String())
	took := time.Since(start)
	if r.Err != nil {
		t.Fatalf("kubectl delete machinepool %s --cascade=%s did not complete in %s: %v\n%s (logs: %s, %s)",
			pool, cascade, deletionBound, r.Err, r.Stderr, c.CAPILog, c.CP.ControllerManager.Log)
	}
	if w := framework.PolicyWarnings(r.Stderr); len(w) > 0 {
		t.Errorf("kubectl delete machinepool printed a warning of the policy: %q", w)
	}
	t.Logf("kubectl delete machinepool %s --cascade=%s completed in %s", pool, cascade, took.Round(time.Millisecond))

	inUse, rotatedOut := pool+"-b", pool+"-a"
	c.waitGone(t, inUse)
	if cascade == "orphan" {
		orphaned := c.Get(t, framework.KubeadmConfigGVK, rotatedOut)
		if refs := orphaned.GetOwnerReferences(); len(refs) > 0 {
			t.Errorf("with --cascade=orphan %s still has ownerReferences %v", rotatedOut, refs)
		}
		r := c.Person.Run(t, "delete", "kubeadmconfig", rotatedOut, "-n", framework.Namespace, "--timeout="+deletionBound.String())
		if r.Err != nil {
			t.Errorf("the person's DELETE of the orphaned, rotated-out %s: %v\n%s", rotatedOut, r.Err, r.Stderr)
		}
		if w := framework.PolicyWarnings(r.Stderr); len(w) > 0 {
			t.Errorf("the person's DELETE of the orphaned, rotated-out %s printed a warning of the policy: %q", rotatedOut, w)
		}
	}
	c.waitGone(t, rotatedOut)

	// The audit log's requests for the two configs since the deletion began, by user.
	var writes []framework.AuditEvent
	var lastPoolWrite time.Time
	for _, e := range c.EventsSince(t, start) {
		if e.ObjectRef == nil || e.ObjectRef.Namespace != framework.Namespace || !e.IsWrite() {
			continue
		}
		if e.ObjectRef.Resource == "machinepools" && e.ObjectRef.Name == pool && e.StageTimestamp.After(lastPoolWrite) {
			lastPoolWrite = e.StageTimestamp
		}
		if e.ObjectRef.Resource == "kubeadmconfigs" && (e.ObjectRef.Name == inUse || e.ObjectRef.Name == rotatedOut) {
			writes = append(writes, e)
		}
	}
	framework.Summarize(t, "the configs of "+pool, writes)
	admitted := func(user, verb, name string) []framework.AuditEvent {
		var out []framework.AuditEvent
		for _, e := range writes {
			if e.User.Username == user && e.Verb == verb && e.ObjectRef.Name == name && e.Code() < 300 {
				out = append(out, e)
			}
		}
		return out
	}
	for _, e := range framework.DeniedBy(writes, c.WebhookName()) {
		t.Errorf("refused: %s", e)
	}
	for _, e := range framework.FailedOpen(writes, c.WebhookName()) {
		t.Errorf("admitted without the policy's answer (failed open): %s", e)
	}
	for _, e := range writes {
		if e.Code() >= 300 && !notAVerdict(e) {
			t.Errorf("not admitted: %s", e)
		}
	}
	switch cascade {
	case "background":
		if len(admitted(c.CAPIManager, "delete", inUse)) == 0 {
			t.Errorf("no DELETE of %s by CAPI's manager admitted", inUse)
		}
		if len(admitted(garbageCollector, "delete", rotatedOut)) == 0 {
			t.Errorf("no DELETE of %s by the garbage collector admitted", rotatedOut)
		}
	case "foreground":
		deletes := admitted(garbageCollector, "delete", rotatedOut)
		if len(deletes) == 0 {
			t.Fatalf("no DELETE of %s by the garbage collector admitted", rotatedOut)
		}
		if !deletes[0].StageTimestamp.Before(lastPoolWrite) {
			t.Errorf("the garbage collector deleted %s at %s, after the pool's last write (%s): not while the pool existed",
				rotatedOut, deletes[0].StageTimestamp, lastPoolWrite)
		}
		if len(admitted(garbageCollector, "delete", inUse))+len(admitted(c.CAPIManager, "delete", inUse)) == 0 {
			t.Errorf("no DELETE of %s by the garbage collector or CAPI's manager admitted", inUse)
		}
	case "orphan":
		if len(admitted(c.CAPIManager, "delete", inUse)) == 0 {
			t.Errorf("no DELETE of %s by CAPI's manager admitted", inUse)
		}
		if len(admitted(garbageCollector, "patch", rotatedOut))+len(admitted(garbageCollector, "update", rotatedOut)) == 0 {
			t.Errorf("no write of the garbage collector orphaning %s admitted", rotatedOut)
		}
		if len(admitted(c.PersonName, "delete", rotatedOut)) == 0 {
			t.Errorf("the person's DELETE of the orphaned %s is not in the audit log as admitted", rotatedOut)
		}
	}
}

// notAVerdict: the answers to a controller's write of a config that the API server gives
// without a verdict of the policy, and after which the controller goes on: a DELETE or PATCH of a
// config another controller deleted first (404: CAPI's and the garbage collector's deletes
// race), a write on a resourceVersion gone stale (409, retried), and the garbage collector's
// first try of a strategic merge patch, which a custom resource does not take (415: it retries
// with a JSON merge patch).
func notAVerdict(e framework.AuditEvent) bool {
	switch e.Code() {
	case 404, 409, 415:
		return !strings.Contains(e.ResponseStatus.Message, "denied the request")
	}
	return false
}

// writePool writes MachinePool pool, its TestMachinePool and its KubeadmConfig <pool>-a into
// the person's checkout, made from pool-1's manifests; it returns their files.
func (c *testCluster) writePool(t *testing.T, pool string) []string {
	t.Helper()
	names := strings.NewReplacer("pool-1-a", pool+"-a", "pool-1", pool)
	var files []string
	for from, to := range map[string]string{"pool-1.yaml": pool + ".yaml", "pool-1-a.yaml": pool + "-a.yaml"} {
		text := names.Replace(string(framework.ReadFile(t, filepath.Join("testdata", "fleet", from))))
		framework.Must(t, os.WriteFile(c.Artifacts.Path(to), []byte(text), 0o644))
		files = append(files, to)
	}
	slices.Sort(files) // the config first: <pool>-a.yaml sorts before <pool>.yaml
	return files
}

// personApplies is the person's `kubectl apply` of the files, which must be admitted.
func (c *testCluster) personApplies(t *testing.T, files ...string) {
	t.Helper()
	args := []string{"apply"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	if r := c.Person.Run(t, args...); r.Err != nil {
		t.Fatalf("kubectl apply: %v\n%s", r.Err, r.Stderr)
	}
}

// waitForDataSecret waits for CAPI to copy the config's data secret name into the pool.
func (c *testCluster) waitForDataSecret(t *testing.T, pool, config string) {
	t.Helper()
	c.WaitFor(t, framework.MachinePoolGVK, pool, 3*time.Minute, "on "+config+"'s data secret", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return name == config
	})
}

// waitGone waits for the KubeadmConfig to be deleted.
func (c *testCluster) waitGone(t *testing.T, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.KubeadmConfigGVK)
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.CP.Client.Get(ctx, client.ObjectKey{Namespace: framework.Namespace, Name: name}, u)), nil
	})
	if err != nil {
		t.Fatalf("KubeadmConfig %s not deleted after a minute; last seen:\n%s\n(logs: %s, %s)", name,
			framework.ToYAML(t, []*unstructured.Unstructured{u}), c.CAPILog, c.CP.ControllerManager.Log)
	}
}
