package clustertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A pool on an infrastructure that replaces no instance on new bootstrap data (CAPD's
// DockerMachinePool, as CAPZ's and CAPOCI's pools): Cluster c3 in a namespace of its own, which
// the fleet's steps (clusterctl move of the fleet's namespace among them) never see, its
// instances kept by the stand-in of framework/infrastructure.go.
const (
	noRollNamespace = "fleet-infra"
	noRollCluster   = "c3"
	noRollPool      = "workers"
	noRollReplicas  = 3
)

// noRollInfrastructure: the stand-in, started once, living until the whole test ends (the
// steps that use it build on each other).
func (c *testCluster) noRollInfrastructure() *framework.NoRollInfrastructure {
	c.noRollOnce.Do(func() { c.noRoll = c.StartNoRollInfrastructure(c.root, noRollNamespace) })
	return c.noRoll
}

// noRollBringUp: a person applies a pool of 3 replicas on the no-roll infrastructure; each
// instance becomes a MachinePool Machine with its Node, Ready, launched with the pool's data
// Secret; every write of CAPI's and CABPK's is admitted.
func (c *testCluster) noRollBringUp(t *testing.T) {
	since := time.Now()
	infra := c.noRollInfrastructure()
	c.CreateClusterIn(t, noRollNamespace, noRollCluster)
	config := sysctlConfig(noRollPool+"-a", noRollNamespace)
	pool := framework.NoRollPoolManifest(noRollPool, noRollNamespace, noRollCluster, noRollReplicas, "bootstrap.cluster.x-k8s.io", "KubeadmConfig", noRollPool+"-a")
	framework.Must(t, os.WriteFile(c.Artifacts.Path(noRollPool+"-a.yaml"), []byte(config), 0o644))
	framework.Must(t, os.WriteFile(c.Artifacts.Path(noRollPool+".yaml"), []byte(pool), 0o644))
	for _, file := range []string{noRollPool + "-a.yaml", noRollPool + ".yaml"} {
		if r := c.Person.Run(t, "apply", "-f", file); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	instances := c.waitSettled(t, 3*time.Minute)
	mp := c.GetIn(t, framework.MachinePoolGVK, noRollNamespace, noRollPool)
	secret, _, _ := unstructured.NestedString(mp.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
	if secret != noRollPool+"-a" {
		t.Errorf("the pool's dataSecretName is %q, want %s-a (CABPK's Secret of its config)", secret, noRollPool)
	}
	for _, i := range instances {
		if i.LaunchedWith != secret {
			t.Errorf("instance %s was launched with data Secret %q, want %q", i.Name, i.LaunchedWith, secret)
		}
	}
	infra.Synced(t)
	c.checkNoRollAdmitted(t, since)
}

// sysctlConfig is a person's KubeadmConfig name in namespace: a sysctl file (vm.max_map_count
// 262144, which a rotation's edit changes) and the kubelet's max-pods.
func sysctlConfig(name, namespace string) string {
	return fmt.Sprintf(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  files:
    - path: /etc/sysctl.d/90-fleet.conf
      content: |
        vm.max_map_count = 262144
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs:
        - {name: max-pods, value: "110"}
`, name, namespace)
}

// waitSettled waits for the pool's instances to be what the stand-in keeps: as many as the
// pool's replicas, none being deleted, each with its Machine Ready on its Node, the pool's
// providerIDList one entry per instance.
func (c *testCluster) waitSettled(t *testing.T, timeout time.Duration) []framework.Instance {
	t.Helper()
	var instances []framework.Instance
	deadline := time.Now().Add(timeout)
	for {
		instances = c.PoolInstances(t, noRollNamespace, noRollPool)
		mp := c.GetIn(t, framework.MachinePoolGVK, noRollNamespace, noRollPool)
		ids, _, _ := unstructured.NestedStringSlice(mp.Object, "spec", "providerIDList")
		settled := len(instances) == noRollReplicas && len(ids) == noRollReplicas
		for _, i := range instances {
			settled = settled && !i.Deleting && i.Ready && i.NodeRef == i.Name
		}
		if settled {
			return instances
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s/%s not settled (%d instances, each Ready on its Node) after %s: %+v, providerIDList %v (logs: %s)",
				noRollNamespace, noRollPool, noRollReplicas, timeout, instances, ids, c.CAPILog)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkNoRollAdmitted: no write of CAPI's or CABPK's refused since the time, none warned.
func (c *testCluster) checkNoRollAdmitted(t *testing.T, since time.Time) {
	t.Helper()
	c.CheckControllersAdmitted(t, since)
	c.CheckNoWarningsTo(t, c.CABPKLog)
	c.CheckNoWarningsTo(t, c.CAPILog)
}

var rotatedName = regexp.MustCompile(`configRef\.name ([a-z0-9.-]+) -> ([a-z0-9.-]+)\n`)

// noRollRotateTo: the person's in-place edit of the pool's config (its sysctl set to value)
// is refused naming the field; `capi-rollout-check rotate` does the rotation and reports what
// the infrastructure does next. It returns the new data Secret.
func (c *testCluster) noRollRotateTo(t *testing.T, value string) string {
	t.Helper()
	mp := c.GetIn(t, framework.MachinePoolGVK, noRollNamespace, noRollPool)
	current, _, _ := unstructured.NestedString(mp.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	manifest := string(framework.ReadFile(t, c.Artifacts.Path(current+".yaml")))
	sysctl := regexp.MustCompile(`vm\.max_map_count = [0-9]+`)
	edited := current + "-edited.yaml"
	framework.Must(t, os.WriteFile(c.Artifacts.Path(edited), []byte(sysctl.ReplaceAllString(manifest, "vm.max_map_count = "+value)), 0o644))
	if r := c.Person.Run(t, "apply", "-f", edited); r.Err == nil || !strings.Contains(r.Stderr, "spec.files[0].content") {
		t.Fatalf("the person's in-place edit of %s: %v, want refused naming spec.files[0].content:\n%s", current, r.Err, r.Stderr)
	}
	r := c.rolloutCheckIn(t, noRollNamespace, c.Person.Kubeconfig, nil, "machinepool/"+noRollPool, "-f", edited, "--timeout", "3m")
	if r.code != 0 {
		t.Fatalf("capi-rollout-check rotate exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	m := rotatedName.FindStringSubmatch(r.stdout)
	if m == nil || m[1] != current {
		t.Fatalf("capi-rollout-check rotate printed no configRef.name %s -> ...:\n%s", current, r.stdout)
	}
	name := m[2]
	config := c.WaitForIn(t, framework.KubeadmConfigGVK, noRollNamespace, name, time.Minute, "given its data Secret", func(u *unstructured.Unstructured) bool {
		s, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return s != ""
	})
	secret, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName")
	for _, want := range []string{
		fmt.Sprintf("MachinePool %s/%s: CAPI copied dataSecretName %s into the pool\n", noRollNamespace, noRollPool, secret),
		fmt.Sprintf("DockerMachinePool %s/%s (CAPD) replaces no existing instance on a rotation: %d existing instances keep the old bootstrap data; new instances take the new data\n",
			noRollNamespace, noRollPool, noRollReplicas),
		fmt.Sprintf("replace them: capi-rollout-check roll machinepool/%s -n %s\n", noRollPool, noRollNamespace),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("capi-rollout-check rotate's output lacks %q:\n%s", want, r.stdout)
		}
	}
	// The person's checkout, as the command leaves it to them.
	framework.Must(t, os.WriteFile(c.Artifacts.Path(name+".yaml"),
		[]byte(strings.Replace(sysctl.ReplaceAllString(manifest, "vm.max_map_count = "+value), "name: "+current, "name: "+name, 1)), 0o644))
	return secret
}

// noRollRotation: after the rotation CAPI moved the pool to the new data Secret, and the
// infrastructure replaced no instance: each keeps the Secret it was launched with.
func (c *testCluster) noRollRotation(t *testing.T) {
	since := time.Now()
	before := c.PoolInstances(t, noRollNamespace, noRollPool)
	secret := c.noRollRotateTo(t, "524288")
	c.noRollInfrastructure().Synced(t)
	after := c.waitSettled(t, time.Minute)
	if names(after) != names(before) {
		t.Errorf("the instances changed on the rotation: %s, were %s", names(after), names(before))
	}
	for _, i := range after {
		if i.LaunchedWith == secret {
			t.Errorf("instance %s runs the new data Secret %s: the no-roll infrastructure replaced it", i.Name, secret)
		}
	}
	c.checkNoRollAdmitted(t, since)
}

func names(instances []framework.Instance) string {
	var out []string
	for _, i := range instances {
		out = append(out, i.Name)
	}
	return strings.Join(out, " ")
}

// rollProcess is `capi-rollout-check roll` running as the person runs it, its stdout read as it
// comes.
type rollProcess struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout strings.Builder
	stderr strings.Builder
	lines  chan string
	done   chan struct{}
}

func (c *testCluster) startRoll(t *testing.T, args ...string) *rollProcess {
	t.Helper()
	all := append([]string{"roll", "machinepool/" + noRollPool, "-n", noRollNamespace}, args...)
	all = append(all, "--kubeconfig", c.Person.Kubeconfig, "--kubectl", c.Person.Bin)
	p := &rollProcess{lines: make(chan string, 100), done: make(chan struct{})}
	p.cmd = exec.Command(framework.RolloutCheckBinary(t), all...)
	p.cmd.Dir = c.Artifacts.Dir
	p.cmd.Env = append(os.Environ(), framework.KubectlCacheEnv(c.Person.Kubeconfig))
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, b: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	framework.Must(t, err)
	framework.Must(t, p.cmd.Start())
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	go func() {
		defer close(p.done)
		defer close(p.lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(s.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- s.Text():
			default:
			}
		}
	}()
	t.Logf("started capi-rollout-check %s", strings.Join(all, " "))
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// wait: the process's exit code and output, once it exited.
func (p *rollProcess) wait(t *testing.T) rolloutCheckResult {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("capi-rollout-check roll: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("capi-rollout-check roll -> %d\n  stdout: %s\n  stderr: %s", code, strings.TrimSpace(p.stdout.String()), strings.TrimSpace(p.stderr.String()))
	return rolloutCheckResult{stdout: p.stdout.String(), stderr: p.stderr.String(), code: code}
}

// readySampler counts the pool's Ready Machines every 100 ms until stopped: the fewest seen.
type readySampler struct {
	stop   chan struct{}
	done   chan struct{}
	fewest int
	counts []int
	errs   []error
}

func (c *testCluster) sampleReady() *readySampler {
	s := &readySampler{stop: make(chan struct{}), done: make(chan struct{}), fewest: noRollReplicas + 1}
	go func() {
		defer close(s.done)
		for {
			n, err := c.ReadyMachines(context.Background(), noRollNamespace, noRollPool)
			if err != nil {
				s.errs = append(s.errs, err)
			} else {
				s.fewest = min(s.fewest, n)
				if len(s.counts) == 0 || s.counts[len(s.counts)-1] != n {
					s.counts = append(s.counts, n)
				}
			}
			select {
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *readySampler) end(t *testing.T, floor int) {
	t.Helper()
	close(s.stop)
	<-s.done
	t.Logf("Ready Machines while roll ran (each change): %v", s.counts)
	if len(s.errs) > 0 {
		t.Errorf("counting Ready Machines: %v", s.errs[0])
	}
	if s.fewest < floor {
		t.Errorf("the pool went down to %d Ready Machines, below replicas-maxUnavailable = %d (seen: %v)", s.fewest, floor, s.counts)
	}
}

// machineChurn: the person's deletes and CAPI's creates of the pool's Machines since the time,
// in the audit log's order; and a check that no two deletes came without a create between them
// (maxUnavailable 1: one Machine replaced at a time).
func (c *testCluster) machineChurn(t *testing.T, since time.Time) (deletes int) {
	t.Helper()
	var churn []string
	for _, e := range c.EventsSince(t, since) {
		if e.ObjectRef == nil || e.Resource() != "machines" || e.ObjectRef.Namespace != noRollNamespace || e.Code() >= 300 {
			continue
		}
		switch {
		case e.Verb == "delete" && e.User.Username == c.PersonName:
			churn = append(churn, "delete "+e.ObjectRef.Name)
		case (e.Verb == "create" || e.Verb == "patch") && e.Code() == 201 && e.User.Username == c.CAPIManager && e.ObjectRef.Subresource == "":
			// CAPI's MachinePool controller makes a Machine with a server-side apply: a patch, 201.
			churn = append(churn, "create "+e.ObjectRef.Name)
		}
	}
	t.Logf("the pool's Machines, deleted by the person and made by CAPI, in order:\n%s", strings.Join(churn, "\n"))
	last := ""
	for _, step := range churn {
		if strings.HasPrefix(step, "delete ") {
			deletes++
			if strings.HasPrefix(last, "delete ") {
				t.Errorf("two deletes without a new Machine between them: %s, then %s", last, step)
			}
		}
		last = step
	}
	return deletes
}

// noRollRoll: `roll --dry-run` plans and deletes nothing; `roll` replaces every instance, one at
// a time, never below 2 Ready Machines, each new one launched with the new data Secret.
func (c *testCluster) noRollRoll(t *testing.T) {
	since := time.Now()
	mp := c.GetIn(t, framework.MachinePoolGVK, noRollNamespace, noRollPool)
	secret, _, _ := unstructured.NestedString(mp.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
	before := c.waitSettled(t, time.Minute)

	dry := c.startRoll(t, "--dry-run").wait(t)
	if dry.code != 0 {
		t.Fatalf("roll --dry-run exited %d:\n%s%s", dry.code, dry.stdout, dry.stderr)
	}
	c.checkRollPlan(t, dry.stdout, secret, noRollReplicas)
	if !strings.Contains(dry.stdout, "(dry run) nothing was deleted\n") {
		t.Errorf("roll --dry-run's output lacks its last line:\n%s", dry.stdout)
	}
	if d := c.machineChurn(t, since); d != 0 {
		t.Errorf("roll --dry-run deleted %d Machines", d)
	}
	if after := c.PoolInstances(t, noRollNamespace, noRollPool); names(after) != names(before) {
		t.Errorf("roll --dry-run changed the instances: %s, were %s", names(after), names(before))
	}

	started := time.Now()
	sampler := c.sampleReady()
	r := c.startRoll(t, "--timeout", "3m").wait(t)
	sampler.end(t, noRollReplicas-1)
	if r.code != 0 {
		t.Fatalf("roll exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.checkRollPlan(t, r.stdout, secret, noRollReplicas)
	for _, want := range []string{
		fmt.Sprintf("step %d: deleted Machine %s/", noRollReplicas, noRollNamespace),
		fmt.Sprintf("MachinePool %s/%s: done: %d Machines replaced; every Machine was launched after data Secret %s\n", noRollNamespace, noRollPool, noRollReplicas, secret),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("roll's output lacks %q:\n%s", want, r.stdout)
		}
	}
	c.checkAllReplaced(t, before, secret, started)
	if d := c.machineChurn(t, started); d != noRollReplicas {
		t.Errorf("the person deleted %d Machines, want %d", d, noRollReplicas)
	}
	c.checkNoRollAdmitted(t, since)
}

// checkRollPlan: roll's plan lines, every instance stale.
func (c *testCluster) checkRollPlan(t *testing.T, stdout, secret string, stale int) {
	t.Helper()
	for _, want := range []string{
		fmt.Sprintf("MachinePool %s/%s: infrastructure DockerMachinePool %s/%s (CAPD); data Secret %s, created ", noRollNamespace, noRollPool, noRollNamespace, noRollPool, secret),
		fmt.Sprintf("MachinePool %s/%s: %d replicas, maxUnavailable 1: deletes up to 1 Machine at a time, never below %d Ready\n", noRollNamespace, noRollPool, noRollReplicas, noRollReplicas-1),
		fmt.Sprintf("MachinePool %s/%s: %d of %d Machines were launched before data Secret %s; in this order:\n", noRollNamespace, noRollPool, stale, noRollReplicas, secret),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("roll's plan lacks %q:\n%s", want, stdout)
		}
	}
}

// checkAllReplaced: the pool settled, none of the instances before is left, each launched after
// the time with the data Secret.
func (c *testCluster) checkAllReplaced(t *testing.T, before []framework.Instance, secret string, after time.Time) {
	t.Helper()
	now := c.waitSettled(t, 2*time.Minute)
	for _, i := range now {
		if slices.ContainsFunc(before, func(b framework.Instance) bool { return b.Name == i.Name }) {
			t.Errorf("instance %s, launched before the roll, is still there", i.Name)
		}
		if i.LaunchedWith != secret || i.Launched.Before(after.Truncate(time.Second)) {
			t.Errorf("instance %s was launched at %s with data Secret %q, want after %s with %q", i.Name, i.Launched, i.LaunchedWith, after, secret)
		}
	}
}

// noRollInterrupted: a second rotation, then a roll stopped with SIGINT after its first delete:
// it says so (exit 130), the pool is consistent (its instances settle, one on the new data, two
// on the old), and the same command re-run replaces the two left and ends.
func (c *testCluster) noRollInterrupted(t *testing.T) {
	since := time.Now()
	secret := c.noRollRotateTo(t, "1048576")
	c.waitSettled(t, time.Minute)

	sampler := c.sampleReady()
	p := c.startRoll(t, "--timeout", "3m")
	for line := range p.lines {
		if strings.HasPrefix(line, "step 1: deleted Machine ") {
			framework.Must(t, p.cmd.Process.Signal(syscall.SIGINT))
			break
		}
	}
	r := p.wait(t)
	if want := fmt.Sprintf("capi-rollout-check roll: interrupted: 1 Machine deleted so far; roll kept at least %d Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/%s -n %s",
		noRollReplicas-1, noRollPool, noRollNamespace); r.code != 130 || !strings.Contains(r.stderr, want) {
		t.Errorf("the interrupted roll: exit %d, stderr %q; want 130 and %q", r.code, r.stderr, want)
	}
	settled := c.waitSettled(t, 2*time.Minute)
	sampler.end(t, noRollReplicas-1)
	var fresh []string
	for _, i := range settled {
		if i.LaunchedWith == secret {
			fresh = append(fresh, i.Name)
		}
	}
	if len(fresh) != 1 {
		t.Errorf("after the interrupted roll %d instances run the new data Secret (%v), want the 1 replaced", len(fresh), fresh)
	}

	started := time.Now()
	sampler = c.sampleReady()
	r = c.startRoll(t, "--timeout", "3m").wait(t)
	sampler.end(t, noRollReplicas-1)
	if r.code != 0 {
		t.Fatalf("the re-run roll exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.checkRollPlan(t, r.stdout, secret, noRollReplicas-1)
	if want := fmt.Sprintf("MachinePool %s/%s: done: %d Machines replaced; every Machine was launched after data Secret %s\n", noRollNamespace, noRollPool, noRollReplicas-1, secret); !strings.Contains(r.stdout, want) {
		t.Errorf("the re-run roll's output lacks %q:\n%s", want, r.stdout)
	}
	for _, i := range c.waitSettled(t, 2*time.Minute) {
		if i.LaunchedWith != secret {
			t.Errorf("instance %s runs data Secret %q after the re-run, want %q", i.Name, i.LaunchedWith, secret)
		}
	}
	if d := c.machineChurn(t, started); d != noRollReplicas-1 {
		t.Errorf("the re-run deleted %d Machines, want %d", d, noRollReplicas-1)
	}
	c.checkNoRollAdmitted(t, since)
}
