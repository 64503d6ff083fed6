package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// `capi-rollout-check roll` acting on a pool others act on too, on the no-roll stand-in's pool
// of 3 (maxUnavailable 1, a floor of 2): a second roll, the pool scaled under it, a Ready
// Machine deleted by someone else the moment roll decides, a replacement that never becomes
// Ready, kube-apiserver restarted. Each samples the pool's Ready Machines every 100 ms. They
// run on the newest CAPI release only: roll's safety is the CLI's, and one release shows it.

const rollLease = "capi-rollout-check-roll-" + noRollPool

// newestCAPIOnly skips the step on every release but the newest TestCluster runs.
func newestCAPIOnly(t *testing.T) {
	t.Helper()
	if v := os.Getenv("CAPI_VERSION"); v != "" && !strings.HasPrefix(v, "v1.14.") {
		t.Skipf("roll's fleet-safety steps run on CAPI v1.14 only (this run: %s)", v)
	}
}

// staleAgain: a new rotation of the pool's config, so that every instance is stale again; the
// pool settled with its replicas. The new data Secret.
func (c *testCluster) staleAgain(t *testing.T, value string) string {
	t.Helper()
	secret := c.noRollRotateTo(t, value)
	c.noRollInfrastructure().Synced(t)
	c.waitSettled(t, time.Minute)
	return secret
}

// personDeletes: the Machines of the pool's namespace the person (roll) deleted since the time,
// in the audit log's order.
func (c *testCluster) personDeletes(t *testing.T, since time.Time) []string {
	t.Helper()
	var names []string
	for _, e := range c.EventsSince(t, since) {
		if e.ObjectRef != nil && e.Resource() == "machines" && e.ObjectRef.Namespace == noRollNamespace &&
			e.Verb == "delete" && e.User.Username == c.PersonName && e.Code() < 300 {
			names = append(names, e.ObjectRef.Name)
		}
	}
	return names
}

// checkNoneTwice: no Machine among the deletes twice.
func checkNoneTwice(t *testing.T, deletes []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range deletes {
		if seen[n] {
			t.Errorf("Machine %s deleted twice (deletes: %v)", n, deletes)
		}
		seen[n] = true
	}
}

// checkOnceEach: want Machines deleted, none twice.
func checkOnceEach(t *testing.T, deletes []string, want int) {
	t.Helper()
	checkNoneTwice(t, deletes)
	if len(deletes) != want {
		t.Errorf("%d Machines deleted (%v), want %d", len(deletes), deletes, want)
	}
}

// checkLeaseGone: the pool's Lease was released.
func (c *testCluster) checkLeaseGone(t *testing.T) {
	t.Helper()
	lease := &unstructured.Unstructured{}
	lease.SetAPIVersion("coordination.k8s.io/v1")
	lease.SetKind("Lease")
	err := c.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: noRollNamespace, Name: rollLease}, lease)
	if !apierrors.IsNotFound(err) {
		t.Errorf("the Lease %s/%s is still there after the roll (%v): %v", noRollNamespace, rollLease, err, lease.Object["spec"])
	}
}

// rollTwoAtOnce: two rolls of the pool started together, as two people: the second refused at
// once naming the first's holder (exit 4), every stale Machine deleted exactly once.
func (c *testCluster) rollTwoAtOnce(t *testing.T) {
	newestCAPIOnly(t)
	since := time.Now()
	c.staleAgain(t, "2097152")
	sampler := c.sampleReady()
	started := time.Now()
	a := c.startRoll(t, "--timeout", "3m")
	b := c.startRoll(t, "--timeout", "3m")
	t.Logf("the two rolls started %s apart", time.Since(started))
	ra, rb := a.wait(t), b.wait(t)
	sampler.end(t, noRollReplicas-1)
	first, second, other := ra, rb, a
	if ra.code == 4 {
		first, second, other = rb, ra, b
	}
	if first.code != 0 || second.code != 4 {
		t.Fatalf("the two rolls exited %d and %d, want one 0 and one 4 (another roll holds the pool):\n%s%s\n%s%s", ra.code, rb.code, ra.stdout, ra.stderr, rb.stdout, rb.stderr)
	}
	want := fmt.Sprintf("capi-rollout-check roll: MachinePool %s/%s is being rolled by another roll: Lease %s/%s (", noRollNamespace, noRollPool, noRollNamespace, rollLease)
	if !strings.HasPrefix(second.stderr, want) || !strings.Contains(second.stderr, fmt.Sprintf(" pid %d took it ", other.cmd.Process.Pid)) {
		t.Errorf("the refused roll's stderr %q, want %q... naming pid %d", second.stderr, want, other.cmd.Process.Pid)
	}
	if second.stdout != "" {
		t.Errorf("the refused roll printed a plan:\n%s", second.stdout)
	}
	checkOnceEach(t, c.personDeletes(t, since), noRollReplicas)
	c.checkLeaseGone(t)
}

// rollScaledUnderIt: a roll while the pool is scaled up to 4 after its first delete and back
// down to 3 after its second (kubectl scale, as the cluster autoscaler changes replicas): the
// floor follows replicas (3 while 4, 2 while 3), the roll ends without waiting out a timeout.
func (c *testCluster) rollScaledUnderIt(t *testing.T) {
	newestCAPIOnly(t)
	since := time.Now()
	secret := c.staleAgain(t, "4194304")
	sampler := c.sampleReady()
	p := c.startRoll(t, "--timeout", "3m")
	scale := func(n int) {
		if r := c.Person.Run(t, "scale", "machinepool/"+noRollPool, "-n", noRollNamespace, fmt.Sprintf("--replicas=%d", n)); r.Err != nil {
			t.Errorf("kubectl scale --replicas=%d: %v\n%s", n, r.Err, r.Stderr)
		}
		t.Logf("scaled the pool to %d replicas at %s", n, time.Now().Format(time.RFC3339Nano))
	}
	for line := range p.lines {
		switch {
		case strings.HasPrefix(line, "step 1: deleted Machine "):
			scale(noRollReplicas + 1)
		case strings.HasPrefix(line, "step 2: deleted Machine "):
			scale(noRollReplicas)
		}
	}
	r := p.wait(t)
	sampler.end(t, noRollReplicas-1)
	if r.code != 0 {
		t.Fatalf("roll exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("MachinePool %s/%s: replicas now %d (were %d): maxUnavailable 1: deletes up to 1 Machine at a time, never below %d Ready\n", noRollNamespace, noRollPool, noRollReplicas+1, noRollReplicas, noRollReplicas),
		fmt.Sprintf("MachinePool %s/%s: replicas now %d (were %d): maxUnavailable 1: deletes up to 1 Machine at a time, never below %d Ready\n", noRollNamespace, noRollPool, noRollReplicas, noRollReplicas+1, noRollReplicas-1),
		fmt.Sprintf("every Machine was launched after data Secret %s\n", secret),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("roll's output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "timed out") {
		t.Errorf("roll waited out a timeout:\n%s%s", r.stdout, r.stderr)
	}
	for _, i := range c.waitSettled(t, 2*time.Minute) {
		if i.LaunchedWith != secret {
			t.Errorf("instance %s runs data Secret %q after the roll, want %q", i.Name, i.LaunchedWith, secret)
		}
	}
	checkNoneTwice(t, c.personDeletes(t, since))
	c.checkLeaseGone(t)
}

// rollRacedByHand: someone else deletes a Ready Machine of the pool the moment roll decides its
// next delete (when roll prints its plan, and each replacement Ready: the read its decision
// rests on follows at once). roll decides again on the read just before its delete, and never
// takes the pool below its floor; a delete of the other actor's that lands after that read
// (one kubectl call before roll's delete) is the Lease's documented limit: roll then says the
// pool is below its floor and waits. Repeated until one such delete lands within 200 ms of the
// read roll decided on.
func (c *testCluster) rollRacedByHand(t *testing.T) {
	newestCAPIOnly(t)
	landed := false
	for attempt, value := range []string{"8388608", "16777216"} {
		if landed {
			break
		}
		since := time.Now()
		c.staleAgain(t, value)
		sampler := c.sampleReady()
		p := c.startRoll(t, "--timeout", "3m")
		var deleted []string
		for line := range p.lines {
			decides := strings.HasSuffix(line, "; in this order:") || strings.Contains(line, " is Ready (launched ")
			if !decides || len(deleted) >= 2 {
				continue
			}
			if name := c.deleteAReadyMachine(t); name != "" {
				deleted = append(deleted, name)
			}
		}
		r := p.wait(t)
		sampler.end(t, 0)
		if r.code != 0 {
			t.Fatalf("roll exited %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		events := c.EventsSince(t, since)
		inGap := false
		for _, name := range deleted {
			race := raceOf(events, c.PersonName, name)
			t.Logf("attempt %d: %s", attempt+1, race)
			landed = landed || race.decidedWithin(200*time.Millisecond)
			inGap = inGap || race.afterRollsLastRead
		}
		belowSaid := strings.Contains(r.stdout, "below the floor: ")
		switch {
		case sampler.fewest >= noRollReplicas-1:
		case inGap && belowSaid:
			t.Logf("a delete by hand landed between roll's last read and its delete: the pool went to %d Ready, and roll said so and waited", sampler.fewest)
		default:
			t.Errorf("the pool went down to %d Ready, below the floor %d, with no delete by hand after roll's last read (or roll did not say so):\n%s", sampler.fewest, noRollReplicas-1, r.stdout)
		}
		rolls := c.personDeletes(t, since)
		checkNoneTwice(t, rolls)
		for _, name := range deleted {
			if slices.Contains(rolls, name) {
				t.Errorf("roll deleted Machine %s again, which someone else had deleted", name)
			}
		}
		c.checkLeaseGone(t)
	}
	if !landed {
		t.Errorf("in 2 rolls no delete by hand landed within 200 ms of the read roll decided on: the race was not tried")
	}
}

// deleteAReadyMachine deletes, as another actor (the API server's admin, as the autoscaler or a
// MachineHealthCheck would), a Ready Machine of the pool not being deleted, the newest first.
func (c *testCluster) deleteAReadyMachine(t *testing.T) string {
	t.Helper()
	instances := c.PoolInstances(t, noRollNamespace, noRollPool)
	for i := len(instances) - 1; i >= 0; i-- {
		in := instances[i]
		if !in.Ready || in.Deleting || in.Machine == "" {
			continue
		}
		m := &unstructured.Unstructured{}
		m.SetGroupVersionKind(framework.MachineGVK)
		m.SetNamespace(noRollNamespace)
		m.SetName(in.Machine)
		if err := c.CP.Client.Delete(context.Background(), m); err != nil {
			t.Logf("delete Machine %s by hand: %v", in.Machine, err)
			return ""
		}
		t.Logf("deleted Machine %s by hand at %s", in.Machine, time.Now().Format(time.RFC3339Nano))
		return in.Machine
	}
	return ""
}

// race: when a delete by hand landed against roll's reads of the pool's Machines and its
// deletes, from the audit log.
type race struct {
	name string
	// hand: the delete by hand; decided: roll's read just before it; rollDelete: roll's next
	// delete after it, and lastRead roll's read just before that.
	hand, decided, rollDelete, lastRead time.Time
	afterRollsLastRead                  bool
}

func raceOf(events []framework.AuditEvent, person, name string) race {
	r := race{name: name}
	var reads, deletes []time.Time
	for _, e := range events {
		if e.ObjectRef == nil || e.Resource() != "machines" || e.ObjectRef.Namespace != noRollNamespace {
			continue
		}
		at := e.RequestReceivedTimestamp
		switch {
		case e.Verb == "delete" && e.User.Username != person && e.ObjectRef.Name == name && r.hand.IsZero():
			r.hand = at
		case e.Verb == "list" && e.User.Username == person:
			reads = append(reads, at)
		case e.Verb == "delete" && e.User.Username == person:
			deletes = append(deletes, at)
		}
	}
	for _, at := range reads {
		if at.Before(r.hand) {
			r.decided = at
		}
	}
	for _, at := range deletes {
		if at.After(r.hand) {
			r.rollDelete = at
			break
		}
	}
	for _, at := range reads {
		if !r.rollDelete.IsZero() && at.Before(r.rollDelete) {
			r.lastRead = at
		}
	}
	r.afterRollsLastRead = !r.rollDelete.IsZero() && r.hand.After(r.lastRead)
	return r
}

func (r race) decidedWithin(d time.Duration) bool {
	return !r.hand.IsZero() && !r.decided.IsZero() && r.hand.Sub(r.decided) <= d
}

func (r race) String() string {
	return fmt.Sprintf("Machine %s deleted by hand %s after roll's read before it; roll's next delete %s later, its last read before that %s before it (the delete by hand after that read: %v)",
		r.name, r.hand.Sub(r.decided), r.rollDelete.Sub(r.hand), r.rollDelete.Sub(r.lastRead), r.afterRollsLastRead)
}

// rollNeverReady: a replacement the stand-in holds not Ready (its instance never registers a
// Node): roll stops after its timeout with nothing more deleted, naming it and the command that
// goes on; once the instance is let be Ready, that command finishes the roll.
func (c *testCluster) rollNeverReady(t *testing.T) {
	newestCAPIOnly(t)
	since := time.Now()
	secret := c.staleAgain(t, "33554432")
	infra := c.noRollInfrastructure()
	infra.HoldNotReady(true)
	sampler := c.sampleReady()
	r := c.startRoll(t, "--timeout", "10s").wait(t)
	infra.HoldNotReady(false)
	want := "; re-run the same command to go on: capi-rollout-check roll machinepool/" + noRollPool + " -n " + noRollNamespace + "\n"
	if r.code != 3 || !strings.Contains(r.stderr, "capi-rollout-check roll: timed out after 10s waiting for the replacement of ") ||
		!strings.Contains(r.stderr, ") is not Ready: 1 Machine deleted so far; roll kept at least 2 Ready by its own deletes") || !strings.HasSuffix(r.stderr, want) {
		t.Fatalf("roll with a replacement never Ready: exit %d, stderr %q; want 3, the replacement named, 1 deleted and %q", r.code, r.stderr, want)
	}
	if d := c.personDeletes(t, since); len(d) != 1 {
		t.Errorf("the stopped roll deleted %v, want 1 Machine", d)
	}
	c.checkLeaseGone(t)
	// The command it printed, run as the person runs it.
	command := strings.Fields(strings.TrimSpace(r.stderr[strings.LastIndex(r.stderr, "to go on: ")+len("to go on: "):]))
	if command[0] != "capi-rollout-check" {
		t.Fatalf("the printed command %v", command)
	}
	run := framework.RunRolloutCheck(t, c.Artifacts.Dir, c.Person, append(command[1:], "--timeout", "3m")...)
	sampler.end(t, noRollReplicas-1)
	if run.Code != 0 || !strings.Contains(run.Stdout, fmt.Sprintf("done: %d Machines replaced", noRollReplicas-1)) {
		t.Fatalf("the printed command exited %d:\n%s%s", run.Code, run.Stdout, run.Stderr)
	}
	for _, i := range c.waitSettled(t, 2*time.Minute) {
		if i.LaunchedWith != secret {
			t.Errorf("instance %s runs data Secret %q, want %q", i.Name, i.LaunchedWith, secret)
		}
	}
	checkOnceEach(t, c.personDeletes(t, since), noRollReplicas)
}

// rollAPIServerRestarted: kube-apiserver stopped (SIGTERM) after roll's first delete, down
// for 5 s after it stopped listening, then started again: roll says it retries, goes on when the API server is back, finishes, each stale
// Machine deleted once, and releases its Lease.
func (c *testCluster) rollAPIServerRestarted(t *testing.T) {
	newestCAPIOnly(t)
	since := time.Now()
	secret := c.staleAgain(t, "67108864")
	p := c.startRoll(t, "--timeout", "3m")
	restarted := false
	for line := range p.lines {
		if !restarted && strings.HasPrefix(line, "step 1: deleted Machine ") {
			restarted = true
			c.CP.RestartAPIServer(t, 5*time.Second)
		}
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("roll across the API server's restart exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "retrying: kubectl ") {
		t.Errorf("roll did not say it retried while the API server was down:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "memcache.go") {
		t.Errorf("roll's retry line carries kubectl's client log lines:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("every Machine was launched after data Secret %s\n", secret)) {
		t.Errorf("roll did not finish:\n%s", r.stdout)
	}
	// roll waited for each replacement's Machine to be Ready; the instances it left, as they are
	// now (the pool settling after the restart is CAPI's to do, not roll's: not waited for).
	for _, i := range c.PoolInstances(t, noRollNamespace, noRollPool) {
		if !i.Deleting && i.LaunchedWith != secret {
			t.Errorf("instance %s runs data Secret %q, want %q", i.Name, i.LaunchedWith, secret)
		}
	}
	checkOnceEach(t, c.personDeletes(t, since), noRollReplicas)
	c.checkLeaseGone(t)
}

// rotateRefreshFromBefore: `rotate` of a pool on an AWSMachinePool (a stand-in object, as CAPA
// left it) whose PostLaunchTemplateUpdateOperationSuccess is False from a refresh that failed
// an hour before: rotate does not report that failure as this rotation's, nor a refresh in
// progress; at its timeout it names the condition as older than the rotation (exit 3).
func (c *testCluster) rotateRefreshFromBefore(t *testing.T) {
	newestCAPIOnly(t)
	const pool = "aws-pool"
	crds := framework.ReadObjects(t, framework.ReadFile(t, "testdata/aws-machinepool.yaml"))
	c.CP.CreateAll(t, crds)
	framework.WaitEstablished(t, c.CP, []string{crds[0].GetName()})
	config := sysctlConfig(pool+"-a", noRollNamespace)
	manifest := fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  clusterName: %[3]s
  replicas: 1
  template:
    spec:
      clusterName: %[3]s
      version: v1.34.3
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: %[1]s-a}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachinePool, name: %[1]s}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachinePool
metadata: {name: %[1]s, namespace: %[2]s}
spec: {providerIDList: ["aws:///us-east-1a/i-0aa"]}
`, pool, noRollNamespace, noRollCluster)
	framework.Must(t, os.WriteFile(c.Artifacts.Path(pool+"-a.yaml"), []byte(config), 0o644))
	framework.Must(t, os.WriteFile(c.Artifacts.Path(pool+".yaml"), []byte(manifest), 0o644))
	for _, file := range []string{pool + "-a.yaml", pool + ".yaml"} {
		if r := c.Person.Run(t, "apply", "-f", file); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	failedAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	awsPool := &unstructured.Unstructured{}
	awsPool.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	awsPool.SetKind("AWSMachinePool")
	framework.Must(t, c.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: noRollNamespace, Name: pool}, awsPool))
	framework.Must(t, unstructured.SetNestedField(awsPool.Object, map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"ready":          true,
		"conditions": []any{map[string]any{
			"type": "PostLaunchTemplateUpdateOperationSuccess", "status": "False", "severity": "Error",
			"reason": "PostLaunchTemplateUpdateOperationFailed", "message": "AccessDenied: autoscaling:StartInstanceRefresh",
			"lastTransitionTime": failedAt.Format(time.RFC3339),
		}},
	}, "status"))
	framework.Must(t, c.CP.Client.Status().Update(context.Background(), awsPool))
	c.WaitForIn(t, framework.MachinePoolGVK, noRollNamespace, pool, 2*time.Minute, "its config's data Secret copied", func(u *unstructured.Unstructured) bool {
		s, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return s == pool+"-a"
	})
	edited := pool + "-a-edited.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(edited), []byte(strings.Replace(config, "262144", "524288", 1)), 0o644))
	r := c.rolloutCheckIn(t, noRollNamespace, c.Person.Kubeconfig, nil, "machinepool/"+pool, "-f", edited, "--timeout", "15s")
	named := fmt.Sprintf("AWSMachinePool %s/%s", noRollNamespace, pool)
	for _, want := range []string{
		named + " (CAPA) replaces the existing instances: an instance refresh (spec.refreshPreferences.disable: true turns it off)\n",
		named + ": the instance refresh has not ended within 15s (0 of 1 instances replaced)",
		fmt.Sprintf("%s: PostLaunchTemplateUpdateOperationSuccess is False since %s, before this rotation (", named, failedAt.Format(time.RFC3339)),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rotate's output lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	for _, wrong := range []string{"could not start the instance refresh", "instance refresh in progress"} {
		if strings.Contains(r.stdout, wrong) {
			t.Errorf("rotate reported %q from a condition set before the rotation:\n%s", wrong, r.stdout)
		}
	}
	if r.code != 3 {
		t.Errorf("rotate exited %d, want 3 (the refresh not seen to end):\n%s%s", r.code, r.stdout, r.stderr)
	}
}
