package clustertest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// stack is the management cluster with Kubewarden installed in front of CAPI. Its steps are
// its own methods and, shared with TestCluster, testCluster's (promoted: s.reapply is
// TestCluster's reapply, the policy's contextAware switched through Kubewarden).
type stack struct {
	*testCluster
	*framework.Kubewarden
	// moduleFile is the annotated module the person built (ANNOTATED_POLICY), pushed by kwctl.
	moduleFile string
}

// TestKubewardenStack: Kubewarden installed as its charts install it, in front of CAPI, the
// policy applied from policy.yaml and served from the module the real kwctl pushed to an OCI
// registry; then the README's path, as a person follows it.
func TestKubewardenStack(t *testing.T) {
	tools := framework.FindKubewardenTools(t)
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.ArtifactsForTest(t)
	ca := framework.NewCA(t)
	started := time.Now()
	m := framework.StartCAPI(t, a, bin, ca)
	s := &stack{testCluster: &testCluster{ManagementCluster: m, bin: bin, ca: ca}, Kubewarden: &framework.Kubewarden{Cluster: m, Tools: tools, Root: t}}
	s.setContextAware = s.PatchContextAware
	s.Policy = framework.ReadPolicy(t)
	s.AddPerson(t, bin)
	binaries := map[string]string{"kubewarden-controller": tools.Controller, "policy-server": tools.PolicyServer}
	if tools.AuditScanner != "" {
		binaries["audit-scanner"] = tools.AuditScanner
	}
	s.Node = framework.StartNode(t, a, s.CP, framework.KubewardenNamespace, binaries)
	t.Logf("control plane and CAPI up in %s", time.Since(started).Round(time.Second))
	for _, name := range []string{"pool-1.yaml", "pool-1-a.yaml", "pool-2.v1beta1.yaml", "pool-2-a.v1beta1.yaml", "workers-md-0.v1beta1.yaml", "workers-md-0.yaml"} {
		framework.Must(t, os.WriteFile(a.Path(name), framework.ReadFile(t, filepath.Join("testdata", "fleet", name)), 0o644))
	}

	// Each step names the earlier steps it builds on (Needs): one run alone, with
	// `go test -run '^TestKubewardenStack$/^<its ID>:'`, runs them first. The shared ones
	// (reapply, personEdits, tokenRotations, rotation, v1beta1Clients, replaceForce,
	// rotateCommand, clusterctlMove) are TestCluster's, run through Kubewarden; clusterctlMove
	// moves to a second management cluster built as TestCluster's are.
	framework.RunSteps(t, []framework.Step{
		{ID: "installCharts", Name: "the charts installed: the controller and the default PolicyServer run from their Deployments", Run: s.installCharts},
		{ID: "applyPolicy", Name: "the module pushed with kwctl and policy.yaml applied: the policy is active", Needs: []string{"installCharts"}, Run: s.applyPolicy},
		{ID: "compareWebhook", Name: "the controller's ValidatingWebhookConfiguration against the one the test builds by hand", Needs: []string{"applyPolicy"}, Run: s.compareWebhook},
		{ID: "bringUpPool", Name: "CAPI brings a pool up behind Kubewarden, every controller write admitted", Needs: []string{"applyPolicy"}, Run: s.bringUpPool},
		{ID: "reapply", Name: "re-applying unchanged manifests is admitted without a warning", Needs: []string{"bringUpPool"}, Run: s.reapply},
		{ID: "monitorEdit", Name: "monitor: a person's in-place edit of the config in use is admitted, the refusal it would be only in policy-server's log", Needs: []string{"bringUpPool"}, Run: s.monitorEdit},
		{ID: "protect", Name: "mode: protect in the person's policy.yaml, applied: the policy-server rolls out, CABPK's writes admitted, then the same edit is refused with the paths", Needs: []string{"monitorEdit"}, Run: s.protect},
		{ID: "protectToMonitor", Name: "protect -> monitor (a file still saying monitor, applied) is refused by the controller", Needs: []string{"protect"}, Run: s.protectToMonitor},
		{ID: "newModuleTag", Name: "the person's policy.yaml (mode: protect) applied with a new module tag: admitted, the policy active again, the edit still refused", Needs: []string{"protect"}, Run: s.newModuleTag},
		{ID: "settingsMistake", Name: "a second policy with a misspelt settings key, then a third with a bad value, applied in protect while CABPK rotates: kubectl admits both, the new policy-server Pod exits naming the key, the old Pod keeps judging until it is deleted; the bad policies deleted, all back", Needs: []string{"protect"}, Run: s.settingsMistake},
		{ID: "personEdits", Name: "a person's in-place edit is refused with the field paths and the rotation to do", Needs: []string{"protect"}, Run: s.personEdits},
		{ID: "tokenRotations", Name: "CABPK rotates the pool's token three times, each admitted without a warning", Needs: []string{"protect"}, Run: s.tokenRotations},
		{ID: "rotation", Name: "rotating configRef as the README says is admitted and CAPI moves the pool to the new config's data Secret", Needs: []string{"protect"}, Run: s.rotation},
		{ID: "auditScanChartRBAC", Name: "the audit scanner run as its CronJob runs it, with the chart's RBAC only: nothing of CAPI's kinds reported", Needs: []string{"bringUpPool"}, Run: s.auditScanChartRBAC},
		{ID: "contextAware", Name: "the README's lookup RBAC bound to the chart's ServiceAccounts: contextAware warns the rotated-out edit, refuses the referenced DELETE", Needs: []string{"rotation"}, Run: s.contextAware},
		{ID: "replicaDeleted", Name: "two policy-server replicas, one Pod deleted while CABPK rotates: nothing refused, the Deployment back at two", Needs: []string{"protect"}, Run: s.replicaDeleted},
		{ID: "machinePoolDeletion", Name: "kubectl delete machinepool completes in every cascade, with and without contextAware, CAPI's and the garbage collector's deletes admitted", Needs: []string{"protect"}, Run: s.machinePoolDeletion},
		{ID: "replaceForce", Name: "kubectl replace --force of the config in use: refused with contextAware, admitted with a warning by default", Needs: []string{"protect"}, Run: s.replaceForce},
		{ID: "v1beta1Clients", Name: "v1beta1 clients through CAPI's conversion: re-applies admitted, edits refused by their v1beta1 path", Needs: []string{"protect"}, Run: s.v1beta1Clients},
		{ID: "outage", Name: "the PolicyServer scaled to zero: CABPK's rotations pass unjudged, and verdicts return with it", Needs: []string{"protect"}, Run: s.outage},
		{ID: "auditScan", Name: "the audit scanner, bound the lookup role by the README's RBAC: the MachinePool passed; a contract-breaking pool cannot be stored", Needs: []string{"contextAware"}, Run: s.auditScan},
		{ID: "auditVersions", Name: "the bootstrap rules with their versions named, in two more policies: the audit scanner reports the configs when every version named is served, and skips the whole policy, its MachinePools too, as errored when one is not", Needs: []string{"auditScan"}, Run: s.auditVersions},
		{ID: "driftReports", Name: "capi-rollout-check drift -A -o report --apply as the ServiceAccount of deploy/drift-reports.yaml: its RBAC enough, the OpenReports CRD of Kubewarden's charts stores each Report as printed, one result per object with the table's verdict; the audit scanner's Reports untouched", Needs: []string{"bringUpPool"}, Run: s.driftReports},
		{ID: "rotateCommand", Name: "capi-rollout-check rotate does the rotation a refusal asks for, CAPI takes it up; its bad inputs change nothing", Needs: []string{"protect"}, Run: s.rotateCommand},
		{ID: "clusterctlMove", Name: "clusterctl move to a second management cluster completes, nothing refused, the pool reconciles there", Needs: []string{"rotation", "v1beta1Clients"}, Run: s.clusterctlMove},
		{ID: "noneRefused", Name: "no write of CAPI's controllers or of Kubewarden's components was refused in the whole run; the controller wrote the webhook, kube-controller-manager made the Pods", Needs: []string{"applyPolicy"}, Run: s.noneRefused},
	})
	t.Logf("TestKubewardenStack took %s", time.Since(started).Round(time.Second))
}

// editConfig is the person's edit of the config in use: the sysctl changed in pool-1-a.yaml
// and applied, as in TestCluster's personEdits.
func (s *stack) editConfig(t *testing.T, from, to string, flags ...string) framework.KubectlResult {
	t.Helper()
	original := string(framework.ReadFile(t, s.Artifacts.Path("pool-1-a.yaml")))
	edited := strings.Replace(original, from, to, 1)
	if edited == original {
		t.Fatalf("pool-1-a.yaml has no %q", from)
	}
	framework.Must(t, os.WriteFile(s.Artifacts.Path("pool-1-a-edited.yaml"), []byte(edited), 0o644))
	return s.Person.Run(t, append(append([]string{"apply"}, flags...), "-f", "pool-1-a-edited.yaml")...)
}

// changePolicyFile is the person's change of a field of spec in their copy of policy.yaml
// (file, in the artifacts): the line `  <field>: ...` set to value.
func (s *stack) changePolicyFile(t *testing.T, file, field, value string) {
	t.Helper()
	path := s.Artifacts.Path(file)
	text := string(framework.ReadFile(t, path))
	line := regexp.MustCompile(`(?m)^(  ` + regexp.QuoteMeta(field) + `: ).*$`)
	if n := len(line.FindAllString(text, -1)); n != 1 {
		t.Fatalf("%s has %d lines `  %s: ...`, want 1", file, n, field)
	}
	framework.Must(t, os.WriteFile(path, []byte(line.ReplaceAllLiteralString(text, "  "+field+": "+value)), 0o644))
}

func compactJSON(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// exitCode is a command's exit code (0: it succeeded, -1: it did not run).
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
}
