package clustertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The kinds `clusterctl move` takes from the fleet's namespace here, and checks moved.
var movedKinds = []schema.GroupVersionKind{
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
	framework.MachinePoolGVK,
	machineDeploymentGVK,
	machineSetGVK,
	framework.KubeadmConfigGVK,
	kubeadmConfigTemplateGVK,
	{Group: "infrastructure.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestMachinePool"},
	{Group: "infrastructure.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestMachineTemplate"},
	testControlPlaneGVK,
	{Version: "v1", Kind: "Secret"},
}

var (
	kubeadmConfigTemplateGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"}
	machineDeploymentGVK     = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	machineSetGVK            = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"}
	testControlPlaneGVK      = schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"}
)

// clusterctlMove: the real `clusterctl move` of the fleet's namespace (Cluster c1, both pools
// and their configs, a MachineDeployment and its KubeadmConfigTemplate) to a second management
// cluster built as the first, the policy in protect with contextAware: true on both.
// clusterctl pauses the Cluster, creates every object in the target owners first (each config
// with its pool's ownerReference), then, in the reverse order, annotates each one
// delete-for-move and deletes it from the source: a config while its pool still references it.
func (c *testCluster) clusterctlMove(t *testing.T) {
	// The MachineDeployment on the template, from the fleet repository.
	if r := c.Person.Run(t, "apply", "-f", "workers-md-0.yaml"); r.Err != nil {
		t.Fatalf("kubectl apply -f workers-md-0.yaml: %v\n%s", r.Err, r.Stderr)
	}
	c.WaitFor(t, machineDeploymentGVK, "workers-md-0", 2*time.Minute, "reconciled by CAPI (its MachineSet made)", func(u *unstructured.Unstructured) bool {
		generation, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return generation >= 1 && len(c.Names(t, machineSetGVK)) == 1
	})

	c.useContextAware(t, true)
	defer c.useContextAware(t, false)
	target := framework.StartManagementCluster(t, c.Artifacts.Sub(t, "target"), c.bin, c.ca, map[string]any{"contextAware": true})

	before := map[schema.GroupVersionKind][]string{}
	for _, gvk := range movedKinds {
		before[gvk] = c.Names(t, gvk)
	}
	since := time.Now()
	move := exec.Command(filepath.Join(c.bin, "clusterctl"), "move", "--namespace", framework.Namespace, "-v", "4",
		"--kubeconfig", c.Person.Kubeconfig, "--to-kubeconfig", target.Person.Kubeconfig)
	// clusterctl's own configuration and its version check stay out of the way.
	move.Env = append(os.Environ(), "HOME="+c.Artifacts.Path("clusterctl-home"), "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	out, err := move.CombinedOutput()
	framework.Must(t, os.WriteFile(c.Artifacts.Path("clusterctl-move.log"), out, 0o644))
	if err != nil {
		t.Fatalf("clusterctl move: %v (log: %s)\n%s", err, c.Artifacts.Path("clusterctl-move.log"), framework.LastLines(string(out), 30))
	}
	t.Logf("clusterctl move:\n%s", framework.LastLines(string(out), 15))

	// No request was refused on either side, and the policy answered every one.
	for _, m := range []*framework.ManagementCluster{c.ManagementCluster, target} {
		events := m.EventsSince(t, since)
		framework.Summarize(t, "the move in "+m.Artifacts.Dir, events)
		for _, e := range framework.DeniedBy(events, m.WebhookName()) {
			t.Errorf("refused during the move: %s", e)
		}
		if open := framework.FailedOpen(events, m.WebhookName()); len(open) > 0 {
			t.Errorf("%d requests were admitted without the policy's answer: first %s", len(open), open[0])
		}
	}
	// In the source, the configs and the template were deleted while still referenced: the
	// policy let each through by its annotation, and said so in the audit log.
	var deletes []string
	for _, e := range c.EventsSince(t, since) {
		if e.User.Username != c.PersonName || e.Verb != "delete" || (e.Resource() != "kubeadmconfigs" && e.Resource() != "kubeadmconfigtemplates") {
			continue
		}
		deletes = append(deletes, e.ObjectRef.Name)
		key := c.WebhookName() + "/delete-for-move"
		if !strings.Contains(e.Annotations[key], "clusterctl move") {
			t.Errorf("the DELETE of %s %s carries no audit annotation %s (annotations: %v)", e.Resource(), e.ObjectRef.Name, key, e.Annotations)
		}
	}
	slices.Sort(deletes)
	if want := append(slices.Clone(before[framework.KubeadmConfigGVK]), before[kubeadmConfigTemplateGVK]...); !slices.Equal(deletes, framework.Sorted(want)) {
		t.Errorf("clusterctl deleted %v from the source, want every config and the template %v", deletes, framework.Sorted(want))
	}
	// The target's policy judged clusterctl's CREATEs of the moved configs: none warned (a moved
	// config is not a new one on a consumed data secret name).
	if verdicts, ok := framework.ReadVerdicts(t, target.PolicyServerLogs(t)); ok {
		for _, v := range verdicts {
			if v.User == c.PersonName && v.Warnings > 0 {
				t.Errorf("the target's policy warned clusterctl's %s of a %s", v.Operation, v.Kind)
			}
		}
	}

	// Everything moved.
	for _, gvk := range movedKinds {
		if left := c.Names(t, gvk); len(left) > 0 {
			t.Errorf("%s left in the source: %v", gvk.Kind, left)
		}
		if got := target.Names(t, gvk); !slices.Equal(got, before[gvk]) {
			t.Errorf("%s in the target: %v, want %v", gvk.Kind, got, before[gvk])
		}
	}

	// The pool reconciles in the target. A move does not copy status: the control plane and
	// the infrastructure providers there set theirs again, as they would.
	controlPlane := target.Get(t, testControlPlaneGVK, framework.ClusterName)
	target.MarkStatus(t, controlPlane, map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}})
	for _, pool := range []string{framework.PoolName, "pool-2"} {
		target.ProvisionInfrastructure(t, pool)
	}
	tokens := target.WaitForTokens(t, 2, 3*time.Minute)
	t.Logf("tokens the target's CABPK wrote into pool-1's config: %v", tokens)
	target.CheckControllersAdmitted(t, since)
	target.CheckControllersJudged(t, true)
	c.CheckControllersAdmitted(t, since)
}
