// Package clustertest puts the policy in front of a real control plane: etcd, kube-apiserver
// and CAPI's core manager and kubeadm bootstrap provider (CABPK), built from the modules
// go.mod pins, CAPI installed as clusterctl installs it, the policy behind a
// ValidatingWebhookConfiguration made from policy.yaml as kubewarden-controller makes it.
// Every request the policy judges here is one CAPI, kube-apiserver or kubectl really sent.
//
// Run it with `make cluster-test` (which builds the binaries, the policy and policy-host);
// POLICY_SERVER=/path/to/policy-server runs it against Kubewarden's real policy-server.
package clustertest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// testCluster is everything the steps share: the management cluster the fleet starts on, and
// what the move step needs to start a second one.
type testCluster struct {
	*framework.ManagementCluster
	bin string
	ca  *framework.Certificates
	// drift: the drift steps' stand-in and what they share (drift_test.go).
	drift driftFixture
	// md: the MachineDeployment drift steps' stand-in (drift_deployments_test.go).
	md mdFixture
	// setContextAware, when set, switches the policy's contextAware as the cluster runs the
	// policy (the stack: the ClusterAdmissionPolicy's settings patched); without it the
	// test's own policy server is restarted with it.
	setContextAware func(t *testing.T, on bool)
	// root is TestCluster's own t: what a step starts for the steps after it lives until it ends
	// (the no-roll infrastructure stand-in, infrastructure_test.go).
	root       *testing.T
	noRollOnce sync.Once
	noRoll     *framework.NoRollInfrastructure
}

// useContextAware sets the policy's contextAware for the steps that follow.
func (c *testCluster) useContextAware(t *testing.T, on bool) {
	t.Helper()
	if c.setContextAware != nil {
		c.setContextAware(t, on)
		return
	}
	c.Server.Stop()
	if on {
		c.Server.Start(c.Artifacts, map[string]any{"contextAware": true})
	} else {
		c.Server.Start(c.Artifacts, nil)
	}
}

func TestCluster(t *testing.T) {
	// envtest logs through controller-runtime's logger; the processes' own logs are the artifacts.
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.NewArtifacts(t)
	ca := framework.NewCA(t)
	// Set-up runs in the test itself: what it starts lives until the whole test ends.
	c := &testCluster{ManagementCluster: framework.StartManagementCluster(t, a, bin, ca, nil), bin: bin, ca: ca, root: t}
	// The person's Git checkout: the manifests of testdata/fleet.
	for _, name := range []string{"pool-1.yaml", "pool-1-a.yaml", "pool-2.v1beta1.yaml", "pool-2-a.v1beta1.yaml", "workers-md-0.v1beta1.yaml", "workers-md-0.yaml"} {
		framework.Must(t, os.WriteFile(a.Path(name), framework.ReadFile(t, filepath.Join("testdata", "fleet", name)), 0o644))
	}

	// Each step names the earlier steps it builds on (Needs): one run alone, with
	// `go test -run '^TestCluster$/^<its ID>:'`, runs them first.
	framework.RunSteps(t, []framework.Step{
		{ID: "bringUp", Name: "CAPI brings a pool up and every controller write is admitted", Run: c.bringUp},
		{ID: "reapply", Name: "re-applying unchanged manifests is admitted without a warning", Needs: []string{"bringUp"}, Run: c.reapply},
		{ID: "tokenRotations", Name: "CABPK rotates the pool's token three times, each admitted without a warning", Needs: []string{"bringUp"}, Run: c.tokenRotations},
		{ID: "personEdits", Name: "a person's in-place edit is refused with the field paths and the rotation to do", Needs: []string{"bringUp"}, Run: c.personEdits},
		{ID: "rotation", Name: "rotating configRef as the README says is admitted and CAPI moves the pool to the new config's data Secret", Needs: []string{"bringUp"}, Run: c.rotation},
		{ID: "contextAware", Name: "context-aware: an edit of the rotated-out config is admitted with the warning", Needs: []string{"rotation"}, Run: c.contextAware},
		{ID: "machinePoolDeletion", Name: "kubectl delete machinepool completes in every cascade, CAPI's and the garbage collector's deletes of its configs admitted", Needs: []string{"bringUp"}, Run: c.machinePoolDeletion},
		{ID: "replaceForce", Name: "kubectl replace --force of the config in use: refused with contextAware, admitted with a warning by default", Needs: []string{"bringUp"}, Run: c.replaceForce},
		{ID: "v1beta1Clients", Name: "v1beta1 clients through CAPI's conversion: re-applies admitted, edits refused by their v1beta1 path", Needs: []string{"bringUp"}, Run: c.v1beta1Clients},
		{ID: "outage", Name: "with the policy server down or hanging CAPI's writes pass, and verdicts return with it", Needs: []string{"rotation"}, Run: c.outage},
		{ID: "topologyBringUp", Name: "a ClusterClass's Cluster comes up through CAPI's topology controller, every write admitted, none warned", Run: c.topologyBringUp},
		{ID: "topologyClassChange", Name: "a ClusterClass's new bootstrap template: the topology controller's in-place patch of the pool's config and its template rotation admitted, the pool rolls nothing out", Needs: []string{"topologyBringUp"}, Run: c.topologyClassChange},
		{ID: "driftClassChange", Name: "capi-rollout-check drift after the class change: the topology controller's patch named as the pool's cause, the class's way as the fix, unknown without instances", Needs: []string{"topologyClassChange"}, Run: c.driftClassChange},
		{ID: "topologyPersonEdits", Name: "a person's edits of a topology-owned config and template are refused, of the class's template warned", Needs: []string{"topologyBringUp"}, Run: c.topologyPersonEdits},
		{ID: "topologyPoolRotation", Name: "a person's rotation of a topology pool's configRef is admitted and the pool's dataSecretName moves to it, and stops the topology controller until it is undone", Needs: []string{"topologyBringUp"}, Run: c.topologyPoolRotation},
		{ID: "topologyPoolReplacement", Name: "a second MachinePool topology takes the class's bootstrap as it is now; removing the first deletes it, every write admitted", Needs: []string{"topologyBringUp"}, Run: c.topologyPoolReplacement},
		{ID: "driftClassReplaced", Name: "capi-rollout-check drift after the class's fix (a new pool topology, the old removed): the Cluster's pool current", Needs: []string{"topologyPoolReplacement"}, Run: c.driftClassReplaced},
		{ID: "rotateCommand", Name: "capi-rollout-check rotate does the rotation a refusal asks for, CAPI takes it up; its bad inputs change nothing", Needs: []string{"bringUp"}, Run: c.rotateCommand},
		{ID: "rotateTopologyPool", Name: "capi-rollout-check rotate refuses the pool of a ClusterClass's Cluster, sending the person to the class; nothing written", Needs: []string{"topologyBringUp"}, Run: c.rotateTopologyPool},
		{ID: "noRollBringUp", Name: "a pool of 3 on a no-roll infrastructure (CAPD's DockerMachinePool, stand-in): a Ready MachinePool Machine and Node per instance, every controller write admitted", Run: c.noRollBringUp},
		{ID: "noRollRotation", Name: "a rotation on the no-roll infrastructure: the edit refused, capi-rollout-check rotate says the 3 instances keep the old data and names roll; none is replaced", Needs: []string{"noRollBringUp"}, Run: c.noRollRotation},
		{ID: "noRollRoll", Name: "capi-rollout-check roll: --dry-run deletes nothing; roll replaces every instance with one on the new data, one at a time, never below 2 Ready", Needs: []string{"noRollRotation"}, Run: c.noRollRoll},
		{ID: "noRollInterrupted", Name: "a roll interrupted after its first delete leaves the pool consistent; re-run, it replaces the rest and ends", Needs: []string{"noRollRoll"}, Run: c.noRollInterrupted},
		{ID: "rollTwoAtOnce", Name: "two rolls of one pool started together: the second refused at once naming the first (exit 4), every stale Machine deleted exactly once, never below the floor", Needs: []string{"noRollInterrupted"}, Run: c.rollTwoAtOnce},
		{ID: "rollScaledUnderIt", Name: "a roll while kubectl scale takes the pool to 4 and back to 3: the floor follows replicas, no timeout waited out", Needs: []string{"noRollInterrupted"}, Run: c.rollScaledUnderIt},
		{ID: "rollRacedByHand", Name: "a Ready Machine deleted by someone else the moment roll decides: roll decides again on its read before the delete, never deletes below the floor, none twice", Needs: []string{"noRollInterrupted"}, Run: c.rollRacedByHand},
		{ID: "rotateRefreshFromBefore", Name: "rotate of a pool whose AWSMachinePool (a stand-in) carries a refresh failure from before the rotation: no failure and no refresh reported as this rotation's", Needs: []string{"noRollBringUp"}, Run: c.rotateRefreshFromBefore},
		{ID: "rollNeverReady", Name: "a replacement held not Ready: roll stops after its timeout naming it, nothing more deleted, Lease released; the command it prints finishes once it is Ready", Needs: []string{"noRollInterrupted"}, Run: c.rollNeverReady},
		{ID: "clusterctlMove", Name: "clusterctl move to a second management cluster completes, nothing refused, the pool reconciles there", Needs: []string{"rotation", "v1beta1Clients"}, Run: c.clusterctlMove},
		{ID: "driftBringUp", Name: "three pools of 2 on the no-roll infrastructure: capi-rollout-check drift finds each current, exactly", Run: c.driftBringUp},
		{ID: "driftStale", Name: "drift after an exempt identity's in-place edit and a rotation not rolled out: each pool's verdict, instances, cause and fix, exit 1", Needs: []string{"driftBringUp"}, Run: c.driftStale},
		{ID: "driftFix", Name: "the fixes drift prints (reissue, roll) replace every stale instance; drift then finds every pool current", Needs: []string{"driftStale"}, Run: c.driftFix},
		{ID: "driftDeploymentsBringUp", Name: "two MachineDeployments and a bare MachineSet, each Machine with its own KubeadmConfig: drift finds each current, every Machine's config compared", Run: c.driftDeploymentsBringUp},
		{ID: "driftDeploymentStale", Name: "a MachineDeployment's template edited in place by an exempt identity, then scaled up: drift names exactly the older Machines stale, the changed path, the edit, the fix", Needs: []string{"driftDeploymentsBringUp"}, Run: c.driftDeploymentStale},
		{ID: "driftDeploymentFixed", Name: "the fix drift printed (rotate --reissue --wait): CAPI rolls the MachineDeployment out, every Machine on the edit; drift finds it current", Needs: []string{"driftDeploymentStale"}, Run: c.driftDeploymentFixed},
		// Last but one: kube-apiserver restarted under a roll; the other steps need it up.
		{ID: "rollAPIServerRestarted", Name: "kube-apiserver stopped after roll's first delete, down 5 s, started again: roll retries, goes on, finishes, each Machine deleted once, Lease released", Needs: []string{"noRollInterrupted"}, Run: c.rollAPIServerRestarted},
		// Stands alone: it reads the audit log of whatever ran before it.
		{ID: "noControllerRefused", Name: "no controller write was refused by the policy in the whole run", Run: c.noControllerRefused},
	})
}

// step runs a subtest and stops the test when it fails: a chain of steps each building on the
// ones before (a provider's, a template's; the cases' own steps are framework.RunSteps').
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.Fatalf("step %q failed; later steps need it", name)
	}
}

// --- the steps ---

func (c *testCluster) bringUp(t *testing.T) {
	c.CreateCluster(t)

	// The person applies the pool and its config, as from a Git repository.
	for _, file := range []string{"pool-1-a.yaml", "pool-1.yaml"} {
		r := c.Person.Run(t, "apply", "-f", file)
		if r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	c.ProvisionInfrastructure(t, framework.PoolName)

	// CAPI's MachinePool controller adopts the config, CABPK fills the join data.
	config := c.WaitFor(t, framework.KubeadmConfigGVK, "pool-1-a", 3*time.Minute, "adopted by the pool, token, discovery and data secret filled", func(u *unstructured.Unstructured) bool {
		token, _, _ := unstructured.NestedString(u.Object, framework.TokenPath...)
		endpoint, _, _ := unstructured.NestedString(u.Object, "spec", "joinConfiguration", "discovery", "bootstrapToken", "apiServerEndpoint")
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, framework.PoolName) && u.GetLabels()["cluster.x-k8s.io/cluster-name"] == framework.ClusterName &&
			token != "" && endpoint != "" && secret == "pool-1-a"
	})
	t.Logf("KubeadmConfig pool-1-a as CAPI left it:\n%s", framework.ToYAML(t, []*unstructured.Unstructured{config}))
	c.WaitFor(t, framework.MachinePoolGVK, framework.PoolName, 2*time.Minute, "dataSecretName copied from the config", func(u *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
		return name == "pool-1-a"
	})
	c.CheckControllersAdmitted(t, time.Time{})
}

func (c *testCluster) reapply(t *testing.T) {
	since := time.Now()
	for _, args := range [][]string{
		{"apply", "-f", "pool-1-a.yaml", "-f", "pool-1.yaml"},
		{"apply", "--server-side", "-f", "pool-1-a.yaml", "-f", "pool-1.yaml"},
	} {
		c.AdmittedWithoutWarning(t, args...)
	}
	c.CheckPersonAdmitted(t, since)
}

func (c *testCluster) tokenRotations(t *testing.T) {
	since := time.Now()
	tokens := c.WaitForTokens(t, 4, 4*time.Minute)
	t.Logf("tokens CABPK wrote into pool-1-a: %v", tokens)
	events := c.EventsSince(t, since)
	var rotations []framework.AuditEvent
	for _, e := range events {
		if e.User.Username == c.CABPK && e.Resource() == "kubeadmconfigs" && e.IsWrite() {
			rotations = append(rotations, e)
		}
	}
	if len(rotations) < 3 {
		t.Fatalf("the audit log shows %d CABPK writes of kubeadmconfigs, want at least 3", len(rotations))
	}
	for _, e := range rotations {
		if e.Code() >= 300 {
			t.Errorf("CABPK's write was not admitted: %s", e)
		}
	}
	if open := framework.FailedOpen(events, c.WebhookName()); len(open) > 0 {
		t.Errorf("%d requests were admitted without the policy's answer (policy server up): first %s", len(open), open[0])
	}
	c.CheckNoWarningsTo(t, c.CABPKLog)
	c.CheckControllersAdmitted(t, since)
	c.CheckControllersJudged(t, true)
}

func (c *testCluster) noControllerRefused(t *testing.T) {
	c.CheckControllersAdmitted(t, time.Time{})
	c.CheckControllersJudged(t, true)
}

// --- checks ---
