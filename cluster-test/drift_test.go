package clustertest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// `capi-rollout-check drift` against what CAPI, CABPK and the no-roll infrastructure stand-in
// (CAPD's DockerMachinePool, framework/infrastructure.go) really record: Cluster c4 in a
// namespace of its own with three pools of two instances each: one left alone, one whose config
// an identity the policy exempts edits in place, one rotated and not rolled out.
const (
	driftNamespace = "fleet-drift"
	driftCluster   = "c4"
	driftReplicas  = 2
	// driftExempt: the break-glass identity, in exemptUsers while it edits.
	driftExempt  = "break-glass@example.com"
	driftSchema  = "capi-rollout-check.drift/v2"
	driftSysctl  = "vm.max_map_count = 262144"
	driftEdited  = "vm.max_map_count = 524288"
	driftRotated = "vm.max_map_count = 1048576"
)

var driftPools = []string{"clean", "edited", "rotated"}

// driftFixture: what the drift steps share, living until TestCluster ends.
type driftFixture struct {
	once  sync.Once
	infra *framework.NoRollInfrastructure
}

func (c *testCluster) driftInfrastructure() *framework.NoRollInfrastructure {
	c.drift.once.Do(func() { c.drift.infra = c.StartNoRollInfrastructure(c.root, driftNamespace) })
	return c.drift.infra
}

// runDrift: `capi-rollout-check drift` as the person runs it, in the namespace given.
func (c *testCluster) runDrift(t *testing.T, namespace string, args ...string) framework.RolloutCheckRun {
	t.Helper()
	return framework.RunRolloutCheck(t, c.Artifacts.Dir, c.Person, append(append([]string{"drift"}, args...), "-n", namespace)...)
}

// driftJSON: drift -o json over the namespace, its exit code and summary asserted.
func (c *testCluster) driftJSON(t *testing.T, namespace string, code, current, stale, unknown int, args ...string) framework.DriftReport {
	t.Helper()
	r := c.runDrift(t, namespace, append(args, "-o", "json")...)
	if r.Code != code {
		t.Errorf("drift -o json exited %d, want %d: %s", r.Code, code, r.Stderr)
	}
	report := framework.ParseDrift(t, r.Stdout)
	if report.Schema != driftSchema {
		t.Errorf("drift's schema is %q, want %q", report.Schema, driftSchema)
	}
	if _, err := time.Parse(time.RFC3339, report.Now); err != nil {
		t.Errorf("drift's now %q is no RFC 3339 time: %v", report.Now, err)
	}
	s := report.Summary
	if s.Objects != current+stale+unknown || s.Current != current || s.Stale != stale || s.Unknown != unknown || len(report.Items) != s.Objects {
		t.Errorf("drift's summary %+v with %d objects listed, want %d current, %d stale, %d unknown", s, len(report.Items), current, stale, unknown)
	}
	t.Logf("drift over namespace %s: %s wall time (%d objects)", namespace, r.Took.Round(time.Millisecond), len(report.Items))
	return report
}

// driftPool: the pool of the report, failing the test when it is not listed.
func driftPool(t *testing.T, report framework.DriftReport, namespace, name string) framework.DriftPool {
	t.Helper()
	p := report.Pool(namespace, name)
	if p == nil {
		t.Fatalf("drift does not list MachinePool %s/%s", namespace, name)
	}
	return *p
}

// checkDriftPool: what every pool of the namespace has, and its verdict, confidence and causes.
func (c *testCluster) checkDriftPool(t *testing.T, p framework.DriftPool, verdict, level string, causes ...string) {
	t.Helper()
	if causes == nil {
		causes = []string{}
	}
	if p.Verdict != verdict || p.Confidence.Level != level || !slices.Equal(p.CauseKinds(), causes) {
		t.Errorf("drift: pool %s is %s (%s: %v), causes %v; want %s (%s), causes %v", p.Name, p.Verdict, p.Confidence.Level, p.Confidence.Reasons, p.CauseKinds(), verdict, level, causes)
	}
	mp := c.GetIn(t, framework.MachinePoolGVK, p.Namespace, p.Name)
	if b := p.Bootstrap; b.Group != "bootstrap.cluster.x-k8s.io" || b.Kind != "KubeadmConfig" || b.Name != bootstrapRef(mp) ||
		framework.Str(b.Provider) != "kubeadm" || framework.Str(b.Rendering) != "AtTokenRotation" {
		t.Errorf("drift: pool %s's bootstrap %s/%s %s (provider %s, rendering %s), want KubeadmConfig %s of kubeadm, AtTokenRotation",
			p.Name, b.Group, b.Kind, b.Name, framework.Str(b.Provider), framework.Str(b.Rendering), bootstrapRef(mp))
	}
	if i := p.Infrastructure; framework.Str(i.Kind) != framework.DockerMachinePoolGVK.Kind || i.ReadsBootstrapData == nil || !*i.ReadsBootstrapData ||
		framework.Str(i.OnRotation) != "NewInstancesOnly" {
		t.Errorf("drift: pool %s's infrastructure %s (reads bootstrap data %v, on rotation %s), want DockerMachinePool, true, NewInstancesOnly",
			p.Name, framework.Str(i.Kind), i.ReadsBootstrapData, framework.Str(i.OnRotation))
	}
	if p.DataSecret == nil || p.DataSecret.Name != dataSecretName(mp) || p.DataSecret.Created == nil {
		t.Errorf("drift: pool %s's data Secret %+v, want %s", p.Name, p.DataSecret, dataSecretName(mp))
	}
	if framework.Str(p.Instances.Source) != "Machine" || p.Instances.Total == nil || *p.Instances.Total != driftReplicas || p.ClusterClass != nil {
		t.Errorf("drift: pool %s's instances from %s, %v of them, cluster class %v; want %d MachinePool Machines, no class",
			p.Name, framework.Str(p.Instances.Source), p.Instances.Total, p.ClusterClass, driftReplicas)
	}
	if verdict == "current" && (len(p.Fix) != 0 || p.Instances.StaleCount != 0 || len(p.Instances.Stale) != 0) {
		t.Errorf("drift: current pool %s lists stale instances %v or a fix %q", p.Name, p.Instances.Stale, p.Fix)
	}
}

// checkStaleInstances: every instance of the pool is listed stale, certainly, for that reason.
func (c *testCluster) checkStaleInstances(t *testing.T, p framework.DriftPool, because string) {
	t.Helper()
	var want, got []string
	for _, i := range c.PoolInstances(t, p.Namespace, p.Name) {
		want = append(want, i.Machine)
	}
	for _, s := range p.Instances.Stale {
		got = append(got, s.Name)
		if s.Because != because || !s.Certain {
			t.Errorf("drift: pool %s's instance %s is stale because %s (certain %t), want %s, certain", p.Name, s.Name, s.Because, s.Certain, because)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) || p.Instances.StaleCount != len(want) || p.Instances.EveryInstanceNowAndFuture {
		t.Errorf("drift: pool %s's stale instances %v (count %d, every instance now and future %t), want its Machines %v",
			p.Name, got, p.Instances.StaleCount, p.Instances.EveryInstanceNowAndFuture, want)
	}
}

// checkDriftTable: drift's table over the namespace: one row per pool as given (verdict, stale,
// confidence, cause), the summary line last.
func (c *testCluster) checkDriftTable(t *testing.T, code int, rows map[string][4]string, summary string) {
	t.Helper()
	r := c.runDrift(t, driftNamespace)
	if r.Code != code {
		t.Errorf("drift (table) exited %d, want %d: %s", r.Code, code, r.Stderr)
	}
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	if header := strings.Fields(lines[0]); !slices.Equal(header, []string{"NAMESPACE", "OBJECT", "CONFIG", "INFRASTRUCTURE", "VERDICT", "STALE", "CONFIDENCE", "CAUSE"}) {
		t.Errorf("drift's table header: %q", lines[0])
	}
	seen := 0
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 8 || f[0] != driftNamespace {
			continue
		}
		pool, isPool := strings.CutPrefix(f[1], "machinepool/")
		want, ok := rows[pool]
		if !ok || !isPool {
			t.Errorf("drift's table has a row for %s: %q", f[1], line)
			continue
		}
		seen++
		mp := c.GetIn(t, framework.MachinePoolGVK, driftNamespace, pool)
		if got := [4]string{f[4], f[5], f[6], f[7]}; got != want || f[2] != "KubeadmConfig/"+bootstrapRef(mp) || f[3] != framework.DockerMachinePoolGVK.Kind {
			t.Errorf("drift's row for pool %s: %q; want config KubeadmConfig/%s, DockerMachinePool, %v", pool, line, bootstrapRef(mp), want)
		}
	}
	if seen != len(rows) || lines[len(lines)-1] != summary {
		t.Errorf("drift's table: %d of %d pools' rows, last line %q, want %q", seen, len(rows), lines[len(lines)-1], summary)
	}
}

// driftSettled waits for the pool's instances to be what the stand-in keeps: driftReplicas,
// none being deleted, each Machine Ready on its Node, launched with the pool's data Secret or
// not; and for the pool's dataSecretName to be its config's.
func (c *testCluster) driftSettled(t *testing.T, pool string, timeout time.Duration) []framework.Instance {
	t.Helper()
	var instances []framework.Instance
	deadline := time.Now().Add(timeout)
	for {
		instances = c.PoolInstances(t, driftNamespace, pool)
		mp := c.GetIn(t, framework.MachinePoolGVK, driftNamespace, pool)
		config := c.GetIn(t, framework.KubeadmConfigGVK, driftNamespace, bootstrapRef(mp))
		secret, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName")
		ids, _, _ := unstructured.NestedStringSlice(mp.Object, "spec", "providerIDList")
		settled := len(instances) == driftReplicas && len(ids) == driftReplicas && secret != "" && dataSecretName(mp) == secret
		for _, i := range instances {
			settled = settled && !i.Deleting && i.Ready && i.NodeRef == i.Name && i.Machine != ""
		}
		if settled {
			return instances
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s/%s not settled after %s: %+v, providerIDList %v, dataSecretName %q of config %s's %q (logs: %s)",
				driftNamespace, pool, timeout, instances, ids, dataSecretName(mp), bootstrapRef(mp), secret, c.CAPILog)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *testCluster) checkDriftAdmitted(t *testing.T, since time.Time) {
	t.Helper()
	c.CheckControllersAdmitted(t, since)
	c.CheckNoWarningsTo(t, c.CABPKLog)
	c.CheckNoWarningsTo(t, c.CAPILog)
}

// driftBringUp: a person applies the three pools, each of two instances on the no-roll
// infrastructure; drift finds every one current (exit 0), exactly.
func (c *testCluster) driftBringUp(t *testing.T) {
	since := time.Now()
	infra := c.driftInfrastructure()
	c.CreateClusterIn(t, driftNamespace, driftCluster)
	for _, pool := range driftPools {
		config := fmt.Sprintf(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {name: %[1]s-a, namespace: %[2]s}
spec:
  files:
    - path: /etc/sysctl.d/90-fleet.conf
      content: |
        %[3]s
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs:
        - {name: max-pods, value: "110"}
`, pool, driftNamespace, driftSysctl)
		manifest := framework.NoRollPoolManifest(pool, driftNamespace, driftCluster, driftReplicas, "bootstrap.cluster.x-k8s.io", "KubeadmConfig", pool+"-a")
		framework.Must(t, os.WriteFile(c.Artifacts.Path("drift-"+pool+"-a.yaml"), []byte(config), 0o644))
		framework.Must(t, os.WriteFile(c.Artifacts.Path("drift-"+pool+".yaml"), []byte(manifest), 0o644))
		for _, file := range []string{"drift-" + pool + "-a.yaml", "drift-" + pool + ".yaml"} {
			if r := c.Person.Run(t, "apply", "-f", file); r.Err != nil {
				t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
			}
		}
	}
	for _, pool := range driftPools {
		c.driftSettled(t, pool, 3*time.Minute)
	}
	infra.Synced(t)

	report := c.driftJSON(t, driftNamespace, 0, 3, 0, 0)
	for _, pool := range driftPools {
		c.checkDriftPool(t, driftPool(t, report, driftNamespace, pool), "current", "exact")
	}
	c.checkDriftTable(t, 0, map[string][4]string{
		"clean": {"current", "0/2", "exact", "-"}, "edited": {"current", "0/2", "exact", "-"}, "rotated": {"current", "0/2", "exact", "-"},
	}, "3 objects (3 MachinePools): 3 current, 0 stale, 0 unknown")
	c.checkDriftAdmitted(t, since)
}

// driftStale: the break-glass identity (exemptUsers) edits pool edited's config in place, and
// CABPK writes the edit into the same data Secret at its next token rotation; pool rotated is
// rotated with `capi-rollout-check rotate` and not rolled out. drift (exit 1): clean current,
// edited stale by the in-place edit (every instance launched before it), rotated stale by the
// rotation (every instance launched before the new data Secret), each exactly, with its fix.
func (c *testCluster) driftStale(t *testing.T) {
	since := time.Now()
	ns := driftNamespace

	// The exempt identity's edit, the policy's settings switched for it and back.
	exempt := c.UserWithRole(t, driftExempt, "cluster-admin")
	c.Server.Stop()
	c.Server.Start(c.Artifacts, map[string]any{"exemptUsers": []any{driftExempt}})
	r := exempt.Run(t, "patch", "kubeadmconfigs.bootstrap.cluster.x-k8s.io", "edited-a", "-n", ns, "--type", "json",
		"-p", fmt.Sprintf(`[{"op":"replace","path":"/spec/files/0/content","value":"%s\n"}]`, driftEdited))
	c.Server.Stop()
	c.Server.Start(c.Artifacts, nil)
	if r.Err != nil {
		t.Fatalf("the exempt identity's kubectl patch of KubeadmConfig edited-a: %v\n%s", r.Err, r.Stderr)
	}
	edited := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(string(c.secretIn(t, ns, "edited-a").Data["value"]), driftEdited), nil
	})
	if err != nil {
		t.Fatalf("CABPK never wrote the edit into data Secret edited-a (log: %s)", c.CABPKLog)
	}
	t.Logf("CABPK wrote the in-place edit into data Secret edited-a %s after it", time.Since(edited).Round(time.Second))

	// The rotation, not rolled out.
	manifest := string(framework.ReadFile(t, c.Artifacts.Path("drift-rotated-a.yaml")))
	framework.Must(t, os.WriteFile(c.Artifacts.Path("drift-rotated-a-edited.yaml"), []byte(strings.Replace(manifest, driftSysctl, driftRotated, 1)), 0o644))
	rot := framework.RunRolloutCheck(t, c.Artifacts.Dir, c.Person, "rotate", "machinepool/rotated", "-n", ns, "-f", "drift-rotated-a-edited.yaml", "--timeout", "3m")
	if rot.Code != 0 {
		t.Fatalf("capi-rollout-check rotate machinepool/rotated exited %d:\n%s%s", rot.Code, rot.Stdout, rot.Stderr)
	}
	before := map[string][]framework.Instance{}
	for _, pool := range driftPools {
		before[pool] = c.driftSettled(t, pool, 2*time.Minute)
	}
	c.driftInfrastructure().Synced(t)
	if mp := c.GetIn(t, framework.MachinePoolGVK, ns, "rotated"); bootstrapRef(mp) == "rotated-a" || dataSecretName(mp) == "rotated-a" {
		t.Fatalf("pool rotated still names config %s, data Secret %s after the rotation", bootstrapRef(mp), dataSecretName(mp))
	}
	for _, i := range before["rotated"] {
		if i.LaunchedWith != "rotated-a" {
			t.Errorf("instance %s runs data Secret %q: the no-roll infrastructure replaced it", i.Name, i.LaunchedWith)
		}
	}

	report := c.driftJSON(t, ns, 1, 1, 2, 0)
	flags := " --kubeconfig " + c.Person.Kubeconfig
	c.checkDriftPool(t, driftPool(t, report, ns, "clean"), "current", "exact")

	p := driftPool(t, report, ns, "edited")
	c.checkDriftPool(t, p, "stale", "exact", "in-place-edit")
	c.checkStaleInstances(t, p, "launched-before-edit")
	if len(p.Causes) == 1 {
		cause := p.Causes[0]
		if framework.Str(cause.Manager) != "kubectl-patch" || framework.Str(cause.Operation) != "Update" || cause.Time == nil ||
			cause.InDataSecret == nil || !*cause.InDataSecret || cause.PathsAre == "applied-set" || cause.ReplacedByProvider ||
			!slices.ContainsFunc(cause.Paths, func(path string) bool { return strings.HasPrefix(path, "spec.files") }) {
			t.Errorf("drift: pool edited's cause %+v (manager %s, operation %s, in data Secret %v); want kubectl-patch, Update, a path of spec.files, in the data Secret",
				cause, framework.Str(cause.Manager), framework.Str(cause.Operation), cause.InDataSecret)
		}
	}
	checkReissueFix(t, p, flags)

	p = driftPool(t, report, ns, "rotated")
	c.checkDriftPool(t, p, "stale", "exact", "rotation-not-rolled")
	c.checkStaleInstances(t, p, "launched-before-data-secret")
	if want := []string{"capi-rollout-check roll machinepool/rotated -n " + ns + flags}; !slices.Equal(p.Fix, want) {
		t.Errorf("drift: pool rotated's fix %q, want %q", p.Fix, want)
	}

	c.checkDriftTable(t, 1, map[string][4]string{
		"clean": {"current", "0/2", "exact", "-"}, "edited": {"stale", "2/2", "exact", "in-place-edit"}, "rotated": {"stale", "2/2", "exact", "rotation-not-rolled"},
	}, "3 objects (3 MachinePools): 1 current, 2 stale, 0 unknown")
	c.checkDriftAdmitted(t, since)
}

// checkReissueFix: the fix of a pool whose config was edited in place on a no-roll
// infrastructure: reissue the config under a new name (rotate --reissue), wait for CAPI's
// copy, roll.
func checkReissueFix(t *testing.T, p framework.DriftPool, flags string) {
	t.Helper()
	ns := p.Namespace
	want := []string{
		fmt.Sprintf("capi-rollout-check rotate machinepool/%s -n %s --reissue%s", p.Name, ns, flags),
		"# once CAPI has copied the new dataSecretName into the pool (DockerMachinePool: existing instances keep their data):",
		fmt.Sprintf("capi-rollout-check roll machinepool/%s -n %s%s", p.Name, ns, flags),
	}
	if !slices.Equal(p.Fix, want) {
		t.Errorf("drift: pool %s's fix:\n%s\nwant:\n%s", p.Name, strings.Join(p.Fix, "\n"), strings.Join(want, "\n"))
	}
}

// runDriftFix runs, line by line, the fix drift printed for a pool as the person pastes it into
// their shell; a `#` line other than the wait for CAPI's copy of the new dataSecretName (done
// by the test) fails the test: it asks for something by hand.
func runDriftFix(t *testing.T, m *framework.ManagementCluster, p framework.DriftPool) {
	t.Helper()
	for _, line := range p.Fix {
		if strings.HasPrefix(line, "# once CAPI has copied the new dataSecretName") {
			m.WaitForIn(t, framework.MachinePoolGVK, p.Namespace, p.Name, 2*time.Minute, "the new config's dataSecretName copied", func(mp *unstructured.Unstructured) bool {
				config := &unstructured.Unstructured{}
				config.SetGroupVersionKind(framework.KubeadmConfigGVK.GroupVersion().WithKind(p.Bootstrap.Kind))
				ref, _, _ := unstructured.NestedString(mp.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
				if err := m.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: ref}, config); err != nil {
					return false
				}
				secret, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName")
				return secret != "" && dataSecretName(mp) == secret
			})
			continue
		}
		if strings.HasPrefix(line, "#") {
			t.Fatalf("drift: pool %s's fix asks for something by hand: %s", p.Name, line)
		}
		if r := framework.FixShell(t, m.Artifacts.Dir, m.Person, line); r.Err != nil {
			t.Fatalf("drift's fix line for pool %s failed: %v\n%s", p.Name, r.Err, r.Stderr)
		}
	}
}

// driftFix: the person runs, line by line, the fix drift printed for each stale pool (the
// reissue and the roll; the `#` line's wait, for CAPI's copy of the new dataSecretName, done by
// the test). Every instance of both is replaced by one on the pool's new data Secret (edited's
// carrying the edit), and drift finds every pool current (exit 0).
func (c *testCluster) driftFix(t *testing.T) {
	since := time.Now()
	ns := driftNamespace
	report := c.driftJSON(t, ns, 1, 1, 2, 0)
	for _, name := range []string{"edited", "rotated"} {
		p := driftPool(t, report, ns, name)
		before := c.PoolInstances(t, ns, name)
		runDriftFix(t, c.ManagementCluster, p)
		mp := c.GetIn(t, framework.MachinePoolGVK, ns, name)
		for _, i := range c.driftSettled(t, name, 2*time.Minute) {
			if i.LaunchedWith != dataSecretName(mp) || slices.ContainsFunc(before, func(b framework.Instance) bool { return b.Name == i.Name }) {
				t.Errorf("pool %s's instance %s runs data Secret %q after the fix, want a new instance on %s", name, i.Name, i.LaunchedWith, dataSecretName(mp))
			}
		}
		if want := map[string]string{"edited": driftEdited, "rotated": driftRotated}[name]; !strings.Contains(string(c.secretIn(t, ns, dataSecretName(mp)).Data["value"]), want) {
			t.Errorf("pool %s's data Secret %s after the fix lacks %q", name, dataSecretName(mp), want)
		}
	}
	c.driftInfrastructure().Synced(t)

	report = c.driftJSON(t, ns, 0, 3, 0, 0)
	for _, pool := range driftPools {
		c.checkDriftPool(t, driftPool(t, report, ns, pool), "current", "exact")
	}
	c.checkDriftTable(t, 0, map[string][4]string{
		"clean": {"current", "0/2", "exact", "-"}, "edited": {"current", "0/2", "exact", "-"}, "rotated": {"current", "0/2", "exact", "-"},
	}, "3 objects (3 MachinePools): 3 current, 0 stale, 0 unknown")
	c.CheckPersonAdmitted(t, since)
	c.checkDriftAdmitted(t, since)
}

// driftClassChange: drift on ClusterClass quick-start's pool after the class change
// (topologyClassChange): the topology controller's patch of the pool's config is its cause
// (capi-topology, an Apply, its applied set, in the data Secret since CABPK's rotation), the
// pool is Cluster c2's, and the fix is the class's way (a new pool topology, docs/clusterclass.md),
// never a rotation. The test's TestMachinePool makes no instances and CAPI v1.12 records no
// status.replicas for it (it reads the infrastructure pool's status.ready, which the topology
// stand-in does not set): drift cannot tell which instances predate the patch, and says so,
// unknown (exit 0).
func (c *testCluster) driftClassChange(t *testing.T) {
	since := time.Now()
	ns := framework.TopologyNamespace
	o := c.topologyObjects(t)
	report := c.driftJSON(t, ns, 0, 0, 0, 1, "machinepool/"+o.pool.GetName())
	p := driftPool(t, report, ns, o.pool.GetName())
	if p.Verdict != "unknown" || p.Confidence.Level != "unknown" || !slices.Equal(p.CauseKinds(), []string{"topology-patch"}) ||
		!slices.ContainsFunc(p.Confidence.Reasons, func(r string) bool { return strings.HasPrefix(r, "no MachinePool Machines and no instance ages") }) {
		t.Errorf("drift: topology pool %s is %s (%s: %v), causes %v; want unknown (unknown: no MachinePool Machines), caused by topology-patch",
			p.Name, p.Verdict, p.Confidence.Level, p.Confidence.Reasons, p.CauseKinds())
	}
	if len(p.Causes) == 1 {
		cause := p.Causes[0]
		if framework.Str(cause.Manager) != framework.TopologyFieldManager || framework.Str(cause.Operation) != "Apply" || cause.PathsAre != "applied-set" ||
			cause.InDataSecret == nil || !*cause.InDataSecret || !slices.Contains(cause.Paths, "spec.files") {
			t.Errorf("drift: the topology pool's cause %+v (manager %s, operation %s); want %s, Apply, its applied set with spec.files, in the data Secret",
				cause, framework.Str(cause.Manager), framework.Str(cause.Operation), framework.TopologyFieldManager)
		}
	}
	if p.ClusterClass == nil || p.ClusterClass.Cluster != framework.TopologyCluster || framework.Str(p.ClusterClass.TopologyName) != o.pool.GetLabels()[framework.TopologyPoolLabel] {
		t.Errorf("drift: the topology pool's clusterClass %+v, want Cluster %s, topology %s", p.ClusterClass, framework.TopologyCluster, o.pool.GetLabels()[framework.TopologyPoolLabel])
	}
	if p.Bootstrap.Name != o.config.GetName() || p.DataSecret == nil || p.DataSecret.Name != dataSecretName(o.pool) || p.Instances.StaleCount != 0 || p.Instances.Source != nil {
		t.Errorf("drift: the topology pool's config %s, data Secret %+v, instances %+v; want %s, %s, none seen", p.Bootstrap.Name, p.DataSecret, p.Instances, o.config.GetName(), dataSecretName(o.pool))
	}
	if len(p.Fix) != 2 || !strings.HasPrefix(p.Fix[0], "# a ClusterClass pool: rotate nothing by hand") || !strings.Contains(p.Fix[0], "(docs/clusterclass.md)") ||
		p.Fix[1] != fmt.Sprintf("kubectl edit clusters.cluster.x-k8s.io %s -n %s --kubeconfig %s", framework.TopologyCluster, ns, c.Person.Kubeconfig) {
		t.Errorf("drift: the topology pool's fix %q; want the class's way (docs/clusterclass.md), then kubectl edit of Cluster %s", p.Fix, framework.TopologyCluster)
	}
	c.checkAdmittedUnwarned(t, since)
}

// driftClassReplaced: after the fix drift names for a ClusterClass pool, a new MachinePool
// topology from the class as it is now and the old one removed (topologyPoolReplacement, as
// docs/clusterclass.md says), drift finds the Cluster's pool current: no edit and no rotation
// since the topology controller made it; its MachineDeployment, whose template the topology
// controller rotates itself, current as well.
func (c *testCluster) driftClassReplaced(t *testing.T) {
	ns := framework.TopologyNamespace
	o := c.topologyObjects(t)
	report := c.driftJSON(t, ns, 0, 2, 0, 0)
	// The Cluster's MachineDeployment topology: current too, exactly, the class's.
	md := report.Object("MachineDeployment", ns, o.deployment.GetName())
	if md == nil || md.Verdict != "current" || md.Confidence.Level != "exact" || md.ClusterClass == nil ||
		md.ClusterClass.Cluster != framework.TopologyCluster || framework.Str(md.ClusterClass.TopologyName) != o.deployment.GetLabels()[framework.TopologyDeploymentLabel] {
		t.Errorf("drift: the topology MachineDeployment %s: %+v; want current (exact), Cluster %s's topology %s",
			o.deployment.GetName(), md, framework.TopologyCluster, o.deployment.GetLabels()[framework.TopologyDeploymentLabel])
	}
	p := driftPool(t, report, ns, o.pool.GetName())
	if p.Verdict != "current" || p.Confidence.Level != "exact" || len(p.Causes) != 0 || len(p.Fix) != 0 || p.ClusterClass == nil ||
		framework.Str(p.ClusterClass.TopologyName) != o.pool.GetLabels()[framework.TopologyPoolLabel] {
		t.Errorf("drift: the new topology pool %s is %s (%s: %v), causes %v, fix %q, class %+v; want current (exact), nothing to fix, topology %s",
			p.Name, p.Verdict, p.Confidence.Level, p.Confidence.Reasons, p.CauseKinds(), p.Fix, p.ClusterClass, o.pool.GetLabels()[framework.TopologyPoolLabel])
	}
}

// driftRenderOnce: on a bootstrap provider that renders its data Secret once (k3s), a pool of
// two instances on the no-roll infrastructure stand-in, its config edited in place by the
// break-glass identity (exemptUsers): drift finds every instance, now and future, stale
// (nothing will write the edit into the data Secret), exactly, exit 1; the fix it prints
// (the reissue, the roll), run, replaces both instances with ones on the reissued config's
// data, and drift then finds the pool current.
func driftRenderOnce(t *testing.T, m *framework.ManagementCluster, bp bootstrapProvider) {
	since := time.Now()
	ns, pool, config := framework.Namespace, "drift-once", "drift-once-a"
	infra := m.StartNoRollInfrastructure(t, ns)
	manifest := strings.ReplaceAll(string(framework.ReadFile(t, "testdata/providers/"+bp.manifest)), "NAME", config)
	pools := framework.NoRollPoolManifest(pool, ns, framework.ClusterName, driftReplicas, bp.config.Group, bp.config.Kind, config)
	framework.Must(t, os.WriteFile(m.Artifacts.Path(config+".yaml"), []byte(manifest), 0o644))
	framework.Must(t, os.WriteFile(m.Artifacts.Path(pool+".yaml"), []byte(pools), 0o644))
	edited := strings.Replace(manifest, bp.edit[0], bp.edit[1], 1)
	framework.Must(t, os.WriteFile(m.Artifacts.Path(config+"-edited.yaml"), []byte(edited), 0o644))
	for _, file := range []string{config + ".yaml", pool + ".yaml"} {
		if r := m.Person.Run(t, "apply", "-f", file); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	settled := func(timeout time.Duration) []framework.Instance {
		t.Helper()
		var instances []framework.Instance
		err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			instances = m.PoolInstances(t, ns, pool)
			ok := len(instances) == driftReplicas
			for _, i := range instances {
				ok = ok && !i.Deleting && i.Ready && i.NodeRef == i.Name
			}
			return ok, nil
		})
		if err != nil {
			t.Fatalf("pool %s/%s not settled (%d instances, each Ready on its Node) after %s: %+v (logs: %s)", ns, pool, driftReplicas, timeout, instances, m.CAPILog)
		}
		return instances
	}
	before := settled(3 * time.Minute)
	infra.Synced(t)

	exempt := m.UserWithRole(t, driftExempt, "cluster-admin")
	m.Server.Stop()
	m.Server.Start(m.Artifacts, map[string]any{"exemptUsers": []any{driftExempt}})
	r := exempt.Run(t, "apply", "-f", config+"-edited.yaml")
	m.Server.Stop()
	m.Server.Start(m.Artifacts, nil)
	if r.Err != nil {
		t.Fatalf("the exempt identity's kubectl apply -f %s-edited.yaml: %v\n%s", config, r.Err, r.Stderr)
	}

	run := framework.RunRolloutCheck(t, m.Artifacts.Dir, m.Person, "drift", "machinepool/"+pool, "-n", ns, "-o", "json")
	report := framework.ParseDrift(t, run.Stdout)
	t.Logf("drift of the %s pool: %s wall time", bp.config.Kind, run.Took.Round(time.Millisecond))
	if s := report.Summary; run.Code != 1 || s.Objects != 1 || s.Stale != 1 || len(report.Items) != 1 {
		t.Fatalf("drift exited %d, summary %+v; want 1, the pool stale", run.Code, s)
	}
	p := report.Items[0]
	if p.Verdict != "stale" || p.Confidence.Level != "exact" || !slices.Equal(p.CauseKinds(), []string{"in-place-edit"}) ||
		!p.Instances.EveryInstanceNowAndFuture || framework.Str(p.Bootstrap.Rendering) != "Once" || p.Bootstrap.Kind != bp.config.Kind {
		t.Errorf("drift: pool %s is %s (%s: %v), causes %v, every instance now and future %t, bootstrap %s rendering %s; want stale (exact), in-place-edit, true, %s rendering Once",
			p.Name, p.Verdict, p.Confidence.Level, p.Confidence.Reasons, p.CauseKinds(), p.Instances.EveryInstanceNowAndFuture, p.Bootstrap.Kind, framework.Str(p.Bootstrap.Rendering), bp.config.Kind)
	}
	if len(p.Causes) == 1 && (p.Causes[0].InDataSecret == nil || *p.Causes[0].InDataSecret || framework.Str(p.Causes[0].Manager) != "kubectl-client-side-apply") {
		t.Errorf("drift: pool %s's cause %+v (manager %s); want kubectl-client-side-apply, not in the data Secret", p.Name, p.Causes[0], framework.Str(p.Causes[0].Manager))
	}
	var stale, machines []string
	for _, s := range p.Instances.Stale {
		stale = append(stale, s.Name)
	}
	for _, i := range before {
		machines = append(machines, i.Machine)
	}
	slices.Sort(stale)
	slices.Sort(machines)
	if !slices.Equal(stale, machines) || p.Instances.StaleCount != driftReplicas {
		t.Errorf("drift: pool %s's stale instances %v (count %d), want every Machine %v", p.Name, stale, p.Instances.StaleCount, machines)
	}
	checkReissueFix(t, p, " --kubeconfig "+m.Person.Kubeconfig)
	table := framework.RunRolloutCheck(t, m.Artifacts.Dir, m.Person, "drift", "machinepool/"+pool, "-n", ns)
	row := regexp.MustCompile(fmt.Sprintf(`(?m)^%s +machinepool/%s +%s/%s +DockerMachinePool +stale +all %d\+new +exact +in-place-edit *$`, ns, pool, bp.config.Kind, config, driftReplicas))
	if table.Code != 1 || !row.MatchString(table.Stdout) {
		t.Errorf("drift's table (exit %d) has no row %s:\n%s", table.Code, row, table.Stdout)
	}

	runDriftFix(t, m, p)
	mp := m.GetIn(t, framework.MachinePoolGVK, ns, pool)
	for _, i := range settled(2 * time.Minute) {
		if i.LaunchedWith != dataSecretName(mp) || slices.ContainsFunc(before, func(b framework.Instance) bool { return b.Name == i.Name }) {
			t.Errorf("pool %s's instance %s runs data Secret %q after the fix, want a new instance on %s", pool, i.Name, i.LaunchedWith, dataSecretName(mp))
		}
	}
	infra.Synced(t)
	run = framework.RunRolloutCheck(t, m.Artifacts.Dir, m.Person, "drift", "machinepool/"+pool, "-n", ns, "-o", "json")
	report = framework.ParseDrift(t, run.Stdout)
	if run.Code != 0 || len(report.Items) != 1 || report.Items[0].Verdict != "current" || report.Items[0].Confidence.Level != "exact" || len(report.Items[0].Fix) != 0 {
		t.Errorf("drift after the fix exited %d: %+v; want the pool current (exact), no fix", run.Code, report.Items)
	}
	m.CheckControllersAdmitted(t, since)
	m.CheckPersonAdmitted(t, since)
}
