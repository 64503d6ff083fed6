package clustertest

import (
	"context"
	"fmt"
	"os"
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

// `capi-rollout-check drift` on MachineDeployments and MachineSets, against CAPI's
// MachineDeployment and MachineSet controllers and CABPK: each Machine gets a KubeadmConfig of
// its own, made from the template when CAPI makes the Machine; an in-place edit of the
// template reaches only the Machines made after it, and CAPI shows every Machine up to date.
// The Machines' TestMachines are booted by the no-roll stand-in (framework.NoRollInfrastructure).

const (
	mdNamespace = "fleet-drift-md"
	mdCluster   = "c5"
	// mdEdited: the MachineDeployment whose template the exempt identity edits in place;
	// mdClean: one nobody edits; msBare: a MachineSet no MachineDeployment owns.
	mdEdited = "md-edited"
	mdClean  = "md-clean"
	msBare   = "ms-bare"
	// mdExempt: the break-glass identity of these steps, in exemptUsers while it edits.
	mdExempt = "break-glass-md@example.com"
	// mdRollSurge: the MachineDeployments' maxSurge, as many as md-edited's replicas.
	mdRollSurge = 3
	// mdChangedPath: what the edit changes, as the policy's refusal names it.
	mdChangedPath = "spec.template.spec.files[0].content"
)

// mdFixture: the stand-in of the namespace, living until TestCluster ends.
type mdFixture struct {
	once  sync.Once
	infra *framework.NoRollInfrastructure
}

func (c *testCluster) mdInfrastructure() *framework.NoRollInfrastructure {
	c.md.once.Do(func() { c.md.infra = c.StartNoRollInfrastructure(c.root, mdNamespace) })
	return c.md.infra
}

// mdWorkersManifest: a KubeadmConfigTemplate and TestMachineTemplate named name, and a
// MachineDeployment (maxSurge mdRollSurge) or, with kind MachineSet, a MachineSet of its own
// selector, of replicas on them. CAPI's MachineSet preflight checks read a control plane's
// version and conditions, which the test's TestControlPlane does not have: they are skipped,
// as the annotation lets a person skip them.
func mdWorkersManifest(kind, name string, replicas int) string {
	spec := ""
	labels := ""
	if kind == "MachineDeployment" {
		// Every replacement at once: the roll-out is CAPI's to do, not the test's to wait for
		// one Machine at a time.
		spec = fmt.Sprintf("\n  rollout:\n    strategy:\n      type: RollingUpdate\n      rollingUpdate: {maxSurge: %d, maxUnavailable: 0}", mdRollSurge)
	}
	if kind == "MachineSet" {
		spec = fmt.Sprintf("\n  selector:\n    matchLabels: {cluster-test.rollout-policy.dev/set: %s}", name)
		labels = fmt.Sprintf("\n    metadata:\n      labels: {cluster-test.rollout-policy.dev/set: %s}", name)
	}
	return fmt.Sprintf(`apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: %[2]s-t, namespace: %[4]s}
spec:
  template:
    spec:
      files:
        - path: /etc/sysctl.d/90-fleet.conf
          content: |
            %[6]s
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs:
            - {name: max-pods, value: "110"}
---
apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1
kind: TestMachineTemplate
metadata: {name: %[2]s, namespace: %[4]s}
spec:
  template:
    spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: %[1]s
metadata:
  name: %[2]s
  namespace: %[4]s
  annotations: {machineset.cluster.x-k8s.io/skip-preflight-checks: All}
spec:
  clusterName: %[5]s
  replicas: %[3]d%[7]s
  template:%[8]s
    spec:
      clusterName: %[5]s
      version: v1.34.3
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: %[2]s-t}
      infrastructureRef: {apiGroup: infrastructure.cluster-test.rollout-policy.dev, kind: TestMachineTemplate, name: %[2]s}
`, kind, name, replicas, mdNamespace, mdCluster, driftSysctl, spec, labels)
}

// mdAllMachines: every Machine of the namespace, those being deleted too.
func (c *testCluster) mdAllMachines(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(framework.MachineGVK.GroupVersion().WithKind("MachineList"))
	framework.Must(t, c.CP.Client.List(context.Background(), list, client.InNamespace(mdNamespace)))
	return list.Items
}

// mdMachines: the Machines of the MachineDeployment (by its label) or of the bare MachineSet
// (by its owner), not being deleted, oldest first.
func (c *testCluster) mdMachines(t *testing.T, owner string) []unstructured.Unstructured {
	t.Helper()
	var out []unstructured.Unstructured
	for _, m := range c.mdAllMachines(t) {
		ours := m.GetLabels()["cluster.x-k8s.io/deployment-name"] == owner
		for _, ref := range m.GetOwnerReferences() {
			ours = ours || (ref.Kind == "MachineSet" && ref.Name == owner)
		}
		if ours && m.GetDeletionTimestamp() == nil {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int {
		return a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time)
	})
	return out
}

// mdSettled waits until the owner has exactly want Machines, each Ready on its Node, and none
// being deleted anywhere in the namespace for it; it returns their names.
func (c *testCluster) mdSettled(t *testing.T, owner string, want int, timeout time.Duration) []string {
	t.Helper()
	var names []string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		names = nil
		ready := 0
		for _, m := range c.mdMachines(t, owner) {
			names = append(names, m.GetName())
			if framework.MachineReady(&m) {
				ready++
			}
		}
		deleting := 0
		for _, m := range c.mdAllMachines(t) {
			if m.GetDeletionTimestamp() != nil {
				deleting++
			}
		}
		return len(names) == want && ready == want && deleting == 0, nil
	})
	if err != nil {
		t.Fatalf("%s: not %d Ready Machines after %s: %v (logs: %s, %s)", owner, want, timeout, names, c.CAPILog, c.CABPKLog)
	}
	return names
}

// configContent: the file content of the KubeadmConfig a Machine names.
func (c *testCluster) configContent(t *testing.T, machine string) string {
	t.Helper()
	m := c.GetIn(t, framework.MachineGVK, mdNamespace, machine)
	name, _, _ := unstructured.NestedString(m.Object, "spec", "bootstrap", "configRef", "name")
	config := c.GetIn(t, framework.KubeadmConfigGVK, mdNamespace, name)
	return firstFile(config)
}

// mdItem: the report's object, failing the test when it is not listed.
func mdItem(t *testing.T, report framework.DriftReport, kind, name string) framework.DriftPool {
	t.Helper()
	p := report.Object(kind, mdNamespace, name)
	if p == nil {
		t.Fatalf("drift does not list %s %s/%s: %+v", kind, mdNamespace, name, report.Items)
	}
	return *p
}

// checkMDCurrent: the object is current, exactly, every Machine compared.
func checkMDCurrent(t *testing.T, p framework.DriftPool, machines int) {
	t.Helper()
	want := fmt.Sprintf("each Machine's KubeadmConfig compared with KubeadmConfigTemplate %s's spec (%d Machine", p.Bootstrap.Name, machines)
	if p.Verdict != "current" || p.Confidence.Level != "exact" || len(p.Confidence.Reasons) == 0 || !strings.HasPrefix(p.Confidence.Reasons[0], want) ||
		p.Instances.StaleCount != 0 || len(p.Fix) != 0 || p.Instances.Total == nil || *p.Instances.Total != machines {
		t.Errorf("drift: %s %s is %s (%s: %v), %d stale of %v, fix %q; want current, exact (%q), %d Machines",
			p.Kind, p.Name, p.Verdict, p.Confidence.Level, p.Confidence.Reasons, p.Instances.StaleCount, p.Instances.Total, p.Fix, want, machines)
	}
	if p.Bootstrap.Kind != "KubeadmConfigTemplate" || framework.Str(p.Bootstrap.Provider) != "kubeadm" {
		t.Errorf("drift: %s %s's bootstrap %s %s (provider %s), want a KubeadmConfigTemplate of kubeadm", p.Kind, p.Name, p.Bootstrap.Kind, p.Bootstrap.Name, framework.Str(p.Bootstrap.Provider))
	}
}

// driftDeploymentsBringUp: a person applies MachineDeployments md-edited (2 replicas) and
// md-clean (1) and the bare MachineSet ms-bare (1); CAPI makes their Machines, each with its
// own KubeadmConfig from the template, CABPK fills them, the stand-in boots them. drift finds
// all three current, exactly, every Machine's config compared with its template.
func (c *testCluster) driftDeploymentsBringUp(t *testing.T) {
	since := time.Now()
	c.mdInfrastructure()
	c.CreateClusterIn(t, mdNamespace, mdCluster)
	for _, w := range []struct {
		kind, name string
		replicas   int
	}{{"MachineDeployment", mdEdited, 2}, {"MachineDeployment", mdClean, 1}, {"MachineSet", msBare, 1}} {
		file := "drift-" + w.name + ".yaml"
		framework.Must(t, os.WriteFile(c.Artifacts.Path(file), []byte(mdWorkersManifest(w.kind, w.name, w.replicas)), 0o644))
		if r := c.Person.Run(t, "apply", "-f", file); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	c.mdSettled(t, mdEdited, 2, 3*time.Minute)
	c.mdSettled(t, mdClean, 1, 2*time.Minute)
	c.mdSettled(t, msBare, 1, 2*time.Minute)
	// CABPK filled each Machine's config: what drift sets aside.
	for _, m := range c.mdMachines(t, mdEdited) {
		name, _, _ := unstructured.NestedString(m.Object, "spec", "bootstrap", "configRef", "name")
		config := c.GetIn(t, framework.KubeadmConfigGVK, mdNamespace, name)
		if token, _, _ := unstructured.NestedString(config.Object, framework.TokenPath...); token == "" {
			t.Errorf("CABPK left Machine %s's KubeadmConfig %s without a token: the comparison sets nothing aside", m.GetName(), name)
		}
	}

	report := c.driftJSON(t, mdNamespace, 0, 3, 0, 0)
	checkMDCurrent(t, mdItem(t, report, "MachineDeployment", mdEdited), 2)
	checkMDCurrent(t, mdItem(t, report, "MachineDeployment", mdClean), 1)
	checkMDCurrent(t, mdItem(t, report, "MachineSet", msBare), 1)
	if got := report.Summary.Kinds; got["MachineDeployment"] != 2 || got["MachineSet"] != 1 || got["MachinePool"] != 0 {
		t.Errorf("drift's summary counts by kind %v, want 2 MachineDeployments and 1 MachineSet", got)
	}
	c.CheckControllersAdmitted(t, since)
	c.CheckNoWarningsTo(t, c.CABPKLog)
}

// driftDeploymentStale: the break-glass identity (exemptUsers) edits md-edited's template in
// place, then the person scales md-edited to 3: the new Machine's config holds the edit, the
// two older ones' do not, and CAPI makes no roll-out of it. drift (exit 1) names exactly the
// two older Machines stale, with the changed path, the edit as the cause, and the fix.
func (c *testCluster) driftDeploymentStale(t *testing.T) {
	before := c.mdSettled(t, mdEdited, 2, time.Minute)
	exempt := c.UserWithRole(t, mdExempt, "cluster-admin")
	c.Server.Stop()
	c.Server.Start(c.Artifacts, map[string]any{"exemptUsers": []any{mdExempt}})
	r := exempt.Run(t, "patch", "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io", mdEdited+"-t", "-n", mdNamespace, "--type", "json",
		"-p", fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/files/0/content","value":"%s\n"}]`, driftEdited))
	c.Server.Stop()
	c.Server.Start(c.Artifacts, nil)
	if r.Err != nil {
		t.Fatalf("the exempt identity's kubectl patch of KubeadmConfigTemplate %s-t: %v\n%s", mdEdited, r.Err, r.Stderr)
	}
	if r := c.Person.Run(t, "scale", "machinedeployments.cluster.x-k8s.io", mdEdited, "-n", mdNamespace, "--replicas", "3"); r.Err != nil {
		t.Fatalf("kubectl scale machinedeployment %s: %v\n%s", mdEdited, r.Err, r.Stderr)
	}
	after := c.mdSettled(t, mdEdited, 3, 3*time.Minute)
	if !slices.Equal(after[:2], before) {
		t.Fatalf("the scale-up replaced Machines: %v, then %v", before, after)
	}
	added := after[2]
	// What CAPI did: the new Machine's config has the edit, the older ones' do not.
	if got := c.configContent(t, added); !strings.Contains(got, driftEdited) {
		t.Errorf("the Machine made after the edit, %s, has %q in its config, want the edit %q", added, got, driftEdited)
	}
	for _, m := range before {
		if got := c.configContent(t, m); !strings.Contains(got, driftSysctl) {
			t.Errorf("Machine %s made before the edit has %q in its config, want %q", m, got, driftSysctl)
		}
	}

	report := c.driftJSON(t, mdNamespace, 1, 2, 1, 0)
	p := mdItem(t, report, "MachineDeployment", mdEdited)
	if p.Verdict != "stale" || p.Confidence.Level != "exact" || p.Instances.StaleCount != 2 || p.Instances.Total == nil || *p.Instances.Total != 3 {
		t.Errorf("drift: %s is %s (%s: %v), %d stale of %v; want stale, exact, 2 of 3", p.Name, p.Verdict, p.Confidence.Level, p.Confidence.Reasons, p.Instances.StaleCount, p.Instances.Total)
	}
	var stale []string
	for _, s := range p.Instances.Stale {
		stale = append(stale, s.Name)
		if s.Because != "config-differs-from-template" || !s.Certain || !slices.Equal(s.Paths, []string{mdChangedPath}) {
			t.Errorf("drift: stale Machine %s because %s (certain %t), paths %v; want config-differs-from-template, certain, [%s]", s.Name, s.Because, s.Certain, s.Paths, mdChangedPath)
		}
	}
	if !slices.Equal(stale, before) {
		t.Errorf("drift names %v stale, want exactly the Machines made before the edit %v (not %s)", stale, before, added)
	}
	if len(p.Causes) != 1 {
		t.Fatalf("drift: %s's causes %+v, want the in-place edit", p.Name, p.Causes)
	}
	cause := p.Causes[0]
	if cause.Kind != "in-place-edit" || framework.Str(cause.Manager) != "kubectl-patch" || framework.Str(cause.Operation) != "Update" || cause.Time == nil ||
		cause.PathsAre != "different" || !slices.Equal(cause.Paths, []string{mdChangedPath}) {
		t.Errorf("drift: %s's cause %+v (manager %s, operation %s); want in-place-edit by kubectl-patch, Update, paths [%s] that differ",
			p.Name, cause, framework.Str(cause.Manager), framework.Str(cause.Operation), mdChangedPath)
	}
	flags := " --kubeconfig " + c.Person.Kubeconfig
	want := []string{
		fmt.Sprintf("capi-rollout-check rotate machinedeployment/%s -n %s --reissue%s", mdEdited, mdNamespace, flags),
		fmt.Sprintf("# CAPI then rolls MachineDeployment %s out (RollingUpdate, maxSurge %d, maxUnavailable 0): a new MachineSet on the new template replaces every Machine; add --wait to follow it to the end, or watch:", mdEdited, mdRollSurge),
		fmt.Sprintf("kubectl get machinedeployments.cluster.x-k8s.io %s -n %s%s -w", mdEdited, mdNamespace, flags),
	}
	if !slices.Equal(p.Fix, want) {
		t.Errorf("drift: %s's fix\n%q\nwant\n%q", p.Name, p.Fix, want)
	}
	checkMDCurrent(t, mdItem(t, report, "MachineDeployment", mdClean), 1)
	checkMDCurrent(t, mdItem(t, report, "MachineSet", msBare), 1)
}

// driftDeploymentFixed: the fix drift printed, run with --wait: the template reissued under a
// fresh name, CAPI rolls md-edited out (a new MachineSet, every Machine replaced by one whose
// config holds the edit); drift then finds it current, exactly.
func (c *testCluster) driftDeploymentFixed(t *testing.T) {
	since := time.Now()
	old := c.mdSettled(t, mdEdited, 3, time.Minute)
	run := framework.RunRolloutCheck(t, c.Artifacts.Dir, c.Person, "rotate", "machinedeployment/"+mdEdited, "-n", mdNamespace, "--reissue", "--wait", "--timeout", "5m")
	if run.Code != 0 || !strings.Contains(run.Stdout, fmt.Sprintf("rolls the MachineDeployment out (RollingUpdate, maxSurge %d, maxUnavailable 0)", mdRollSurge)) ||
		!strings.Contains(run.Stdout, ": rolled out: every Machine is on ") {
		t.Fatalf("capi-rollout-check rotate machinedeployment/%s --reissue --wait exited %d:\n%s%s", mdEdited, run.Code, run.Stdout, run.Stderr)
	}
	t.Logf("rotate --reissue --wait of %s: %s wall time", mdEdited, run.Took.Round(time.Second))
	now := c.mdSettled(t, mdEdited, 3, 3*time.Minute)
	for _, m := range now {
		if slices.Contains(old, m) {
			t.Errorf("Machine %s outlived the roll-out", m)
		}
		if got := c.configContent(t, m); !strings.Contains(got, driftEdited) {
			t.Errorf("Machine %s, made by the roll-out, has %q in its config, want %q", m, got, driftEdited)
		}
	}
	md := c.GetIn(t, framework.MachineDeploymentGVK, mdNamespace, mdEdited)
	template, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	if template == mdEdited+"-t" {
		t.Errorf("MachineDeployment %s still names template %s after the reissue", mdEdited, template)
	}
	for _, set := range c.ListIn(t, framework.MachineSetGVK, mdNamespace, client.MatchingLabels{"cluster.x-k8s.io/deployment-name": mdEdited}) {
		name, _, _ := unstructured.NestedString(set.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
		replicas, _, _ := unstructured.NestedInt64(set.Object, "spec", "replicas")
		if name != template && replicas != 0 {
			t.Errorf("MachineSet %s on %s keeps %d replicas after the roll-out", set.GetName(), name, replicas)
		}
	}
	report := c.driftJSON(t, mdNamespace, 0, 3, 0, 0)
	checkMDCurrent(t, mdItem(t, report, "MachineDeployment", mdEdited), 3)
	c.CheckControllersAdmitted(t, since)
}
