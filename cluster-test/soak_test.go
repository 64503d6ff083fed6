package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestSoak is `make cluster-soak` (not part of `make test`): SOAK_POOLS MachinePools (50) with
// their KubeadmConfigs on one management cluster of this module's CAPI release, CABPK rotating
// every pool's token about every 20 s, the policy in protect, for SOAK_DURATION (15m). It
// reports what the webhook saw and how long it took (kube-apiserver's /metrics), refusals by
// identity and token rotations (the audit log), and the policy server's RSS over time; then, in
// the same cluster under the same load, the latency of a person's config update (SOAK_APPLIES,
// 200) with no admission, with a CEL ValidatingAdmissionPolicy of the project's own, and with
// the policy. The report is soak-report.md in the artifacts folder; docs/performance.md
// records a run. TestSoakProviders is the same soak on CAPI v1.10.10 with RKE2 and k3s pools.
func TestSoak(t *testing.T) {
	pools := envInt(t, "SOAK_POOLS", 50)
	framework.UseTokenTTL(t, framework.SoakTokenTTL)
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.NewArtifacts(t)
	m := framework.StartManagementCluster(t, a, bin, framework.NewCA(t), nil)
	m.CreateCluster(t)

	// The pools, as pool-1 and its config, renamed.
	f := &soakFleet{m: m, kubeadm: framework.KubeadmConfigGVK, controllers: []string{m.CAPIManager, m.CABPK}}
	names := make([]string, pools)
	var docs []string
	for i := range names {
		names[i] = fmt.Sprintf("soak-%02d", i)
		text := string(framework.ReadFile(t, "testdata/fleet/pool-1-a.yaml")) + "\n---\n" + string(framework.ReadFile(t, "testdata/fleet/pool-1.yaml"))
		docs = append(docs, strings.ReplaceAll(text, "pool-1", names[i]))
		f.configs = append(f.configs, names[i]+"-a")
	}
	framework.Must(t, os.WriteFile(a.Path("soak-fleet.yaml"), []byte(strings.Join(docs, "\n---\n")), 0o644))
	f.apply(t, "soak-fleet.yaml")
	for _, name := range names {
		m.ProvisionInfrastructure(t, name)
	}
	for _, name := range f.configs {
		m.WaitFor(t, framework.KubeadmConfigGVK, name, 5*time.Minute, "filled by CABPK", func(u *unstructured.Unstructured) bool {
			secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
			return secret == name // CABPK names the Secret as the config
		})
	}
	t.Logf("%d pools up", pools)
	f.soak(t, a)
}

// TestSoakProviders is TestSoak on a CAPI v1.10.10 management cluster (capi/v1.10, v1beta1
// stored) with, beside the SOAK_POOLS KubeadmConfig pools, SOAK_PROVIDER_POOLS (3) pools of
// each other bootstrap provider that release's module pins: RKE2 v0.21.0 and k3s v0.3.1, their
// managers running as their ServiceAccounts with their defaulting webhooks. Every write of
// every controller must be admitted; the report counts each provider's writes.
func TestSoakProviders(t *testing.T) {
	pools := envInt(t, "SOAK_POOLS", 50)
	providerPools := envInt(t, "SOAK_PROVIDER_POOLS", 3)
	framework.UseTokenTTL(t, framework.SoakTokenTTL)
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.ArtifactsForTest(t)
	var providers []bootstrapProvider
	for _, bp := range bootstrapProviders {
		if bp.folder == "v1.10" {
			providers = append(providers, bp)
		}
	}
	// One Cluster for every pool: RKE2's worker join reads its RKE2ControlPlane; k3s' and
	// CABPK's read the Cluster's status and the join token and CA Secrets only.
	rke2 := providers[slices.IndexFunc(providers, func(bp bootstrapProvider) bool { return strings.HasPrefix(bp.name, "rke2") })]
	m, controlPlane, cpStatus := rke2.startCluster(t, a, bin)
	f := &soakFleet{m: m, kubeadm: kubeadmConfigV1beta1GVK, controllers: []string{m.CAPIManager, m.CABPK}}

	for i := range pools {
		f.configs = append(f.configs, fmt.Sprintf("soak-%02d", i))
	}
	f.apply(t, m.WriteConfigs(t, "soak-kubeadmconfigs.yaml", filepath.Join("testdata", "v1beta1", "kubeadmconfig.yaml"), f.configs),
		m.Pools(t, "bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfig", f.configs...))
	for _, bp := range providers {
		sp := soakProvider{name: bp.name, gvk: bp.config, resource: bp.resource, identity: bp.install(t, a, m)}
		for i := range providerPools {
			sp.configs = append(sp.configs, fmt.Sprintf("soak-%s-%d", strings.ToLower(bp.config.Kind), i))
		}
		f.apply(t, m.WriteConfigs(t, "soak-"+bp.resource+".yaml", filepath.Join("testdata", "providers", bp.manifest), sp.configs),
			m.Pools(t, bp.config.GroupVersion().String(), bp.config.Kind, sp.configs...))
		f.controllers = append(f.controllers, sp.identity)
		f.providers = append(f.providers, sp)
	}
	var all []string // the pools, each named as its config
	for _, gvkNames := range f.everyConfig() {
		all = append(all, gvkNames.names...)
	}
	m.MarkV1beta1Ready(t, controlPlane, cpStatus, all...)
	for _, gvkNames := range f.everyConfig() {
		for _, name := range gvkNames.names {
			m.WaitFor(t, gvkNames.gvk, name, 5*time.Minute, "given its bootstrap data", func(u *unstructured.Unstructured) bool {
				secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
				return secret != ""
			})
		}
	}
	t.Logf("%d KubeadmConfig pools and %d of each of %d other providers up", pools, providerPools, len(providers))
	f.soak(t, a)
}

// soakFleet is what a soak runs on: the management cluster, its KubeadmConfigs in use (a
// person's updates are timed on them), the other providers' pools, and the controllers whose
// every write must be admitted.
type soakFleet struct {
	m           *framework.ManagementCluster
	kubeadm     schema.GroupVersionKind
	configs     []string
	providers   []soakProvider
	controllers []string
	manifests   []string // what a person applied, in the artifacts folder
}

// soakProvider: another bootstrap provider's pools in the soak, and what its manager runs as.
type soakProvider struct {
	name, resource, identity string
	gvk                      schema.GroupVersionKind
	configs                  []string
}

type gvkNames struct {
	gvk   schema.GroupVersionKind
	names []string
}

func (f soakFleet) everyConfig() []gvkNames {
	out := []gvkNames{{f.kubeadm, f.configs}}
	for _, p := range f.providers {
		out = append(out, gvkNames{p.gvk, p.configs})
	}
	return out
}

// gitOpsApply is how the soak's GitOps tool applies a manifest, as Flux does: server-side, with
// a field manager of its own. (Argo CD's default, kubectl's client-side apply, sends nothing
// when the live object already matches: TestProviderWebhooks re-applies that way.)
var gitOpsApply = []string{"apply", "--server-side", "--field-manager=gitops", "-f"}

// apply: the GitOps tool's first apply of each file (as the person), which it re-applies.
func (f *soakFleet) apply(t *testing.T, files ...string) {
	t.Helper()
	f.manifests = append(f.manifests, files...)
	for _, file := range files {
		if r := f.m.Person.Run(t, append(gitOpsApply, file)...); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
}

// soak: CAPI's own traffic for SOAK_DURATION, then the side-by-side updates, then the report.
func (f soakFleet) soak(t *testing.T, a *framework.Artifacts) {
	duration := envDuration(t, "SOAK_DURATION", 15*time.Minute)
	applies := envInt(t, "SOAK_APPLIES", 200)
	m := f.m
	ctx := context.Background()
	before := webhookMetrics(t, m)
	start := time.Now()
	rss := sampleRSS(m.Server.Process, 10*time.Second)
	reapply := envDuration(t, "SOAK_REAPPLY", time.Minute)
	gitops := f.startGitOps(reapply)
	for elapsed := time.Duration(0); elapsed < duration; elapsed = time.Since(start) {
		time.Sleep(min(time.Minute, duration-elapsed))
		t.Logf("soak: %s of %s", time.Since(start).Round(time.Second), duration)
	}
	end := time.Now()
	rss.stop()
	samples := rss.samples
	gitops.stop()
	for _, problem := range gitops.problems {
		t.Errorf("GitOps re-apply: %s", problem)
	}
	after := webhookMetrics(t, m)
	// Refusals and the providers' writes since the cluster started; rotations in the soak.
	events := m.EventsSince(t, time.Time{})
	writes := map[string]int{}
	rotations := 0
	for _, e := range events {
		if e.IsWrite() && e.Code() < 300 && !e.StageTimestamp.After(end) {
			writes[e.User.Username+" "+e.Resource()]++
			if e.User.Username == m.CABPK && e.Resource() == "kubeadmconfigs" && !e.StageTimestamp.Before(start) {
				rotations++
			}
		}
	}
	refused := map[string]int{}
	for _, e := range framework.DeniedBy(events, m.WebhookName()) {
		refused[e.User.Username]++
	}
	for _, identity := range f.controllers {
		if refused[identity] > 0 {
			t.Errorf("the policy refused %d writes of %s", refused[identity], identity)
		}
	}
	if open := framework.FailedOpen(events, m.WebhookName()); len(open) > 0 {
		t.Errorf("%d requests failed open during the soak: first %s", len(open), open[0])
	}
	if rotations == 0 {
		t.Error("CABPK rotated no token during the soak")
	}
	var providerWrites []providerWrite
	for _, p := range f.providers {
		providerWrites = append(providerWrites, providerWrite{p.name, len(p.configs),
			writes[p.identity+" "+p.resource] + writes[p.identity+" "+p.resource+"/status"]})
	}

	// Side by side, under the same load: a person's config update, admitted by every variant.
	person := m.PersonClient(t)
	latencies := []latencyRow{{name: "no admission"}}
	framework.Must(t, m.CP.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.Policy.PolicyID()}}))
	latencies[0].durations = f.measureUpdates(t, person, applies)

	vap, binding := celPolicy(m, f.kubeadm.Version)
	framework.Must(t, m.CP.Client.Create(ctx, vap))
	framework.Must(t, m.CP.Client.Create(ctx, binding))
	f.waitRefused(t, person, "ValidatingAdmissionPolicy")
	latencies = append(latencies, latencyRow{name: "CEL ValidatingAdmissionPolicy (" + vap.Name + ")", durations: f.measureUpdates(t, person, applies)})
	framework.Must(t, m.CP.Client.Delete(ctx, binding))
	framework.Must(t, m.CP.Client.Delete(ctx, vap))

	servers := []*framework.PolicyServer{m.Server}
	if os.Getenv("POLICY_SERVER") != "" { // the real policy-server, and policy-host beside it
		hostArtifacts := a.Sub(t, "policy-host")
		host := framework.NewPolicyServer(t, hostArtifacts, m.CA, m.Policy, m.Server.Kubeconfig)
		host.Bin, host.Args = framework.PolicyHostBinary(t), []string{"serve"}
		host.Start(hostArtifacts, nil)
		servers = append(servers, host)
	}
	for _, s := range servers {
		framework.RegisterWebhook(t, m.CP, m.Policy, s, m.CA.CAPEM)
		f.waitRefused(t, person, "denied the request")
		latencies = append(latencies, latencyRow{name: "this policy, " + filepath.Base(s.Bin), durations: f.measureUpdates(t, person, applies)})
		framework.Must(t, m.CP.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.Policy.PolicyID()}}))
	}

	report := soakReport{
		pools: len(f.configs), duration: end.Sub(start), server: filepath.Base(m.Server.Bin), rotations: rotations,
		providers: providerWrites, gitops: gitops, reapply: reapply, refused: refused, webhook: after.minus(before), rss: samples, latencies: latencies,
	}
	text := report.String()
	framework.Must(t, os.WriteFile(a.Path("soak-report.md"), []byte(text), 0o644))
	t.Logf("soak report (%s):\n%s", a.Path("soak-report.md"), text)
}

type providerWrite struct {
	name          string
	pools, writes int
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// --- a GitOps tool's re-applies ---

// gitOps re-applies the fleet's manifests unchanged every interval, as Flux does on its sync
// interval: each apply must be admitted without a warning of the policy, the defaulters
// rewriting the specs on every one.
type gitOps struct {
	*periodic
	manifests int
	applies   int
	objects   int
	problems  []string
}

func (f soakFleet) startGitOps(interval time.Duration) *gitOps {
	g := &gitOps{manifests: len(f.manifests)}
	objects := map[string]int{} // the objects of each file: a request each, every apply
	for _, file := range f.manifests {
		if data, err := os.ReadFile(f.m.Artifacts.Path(file)); err == nil {
			objects[file] = strings.Count("\n"+string(data), "\nkind: ")
		}
	}
	k := f.m.Person
	g.periodic = every(interval, false, func() {
		for _, file := range f.manifests {
			args := append([]string{"--kubeconfig", k.Kubeconfig}, append(gitOpsApply, file)...)
			cmd := exec.Command(k.Bin, args...)
			cmd.Dir = k.Dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			g.applies++
			g.objects += objects[file]
			if warnings := framework.PolicyWarnings(stderr.String()); err != nil || len(warnings) > 0 {
				g.problems = append(g.problems, fmt.Sprintf("kubectl %s: %v %q", strings.Join(args[2:], " "), err, stderr.String()))
			}
		}
	})
	return g
}

// periodic runs a function every interval (and at once, when asked) until stop.
type periodic struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func every(interval time.Duration, now bool, fn func()) *periodic {
	p := &periodic{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		if now {
			fn()
		}
		for {
			select {
			case <-p.done:
				return
			case <-ticker.C:
				fn()
			}
		}
	}()
	return p
}

// stop returns once the function no longer runs.
func (p *periodic) stop() {
	close(p.done)
	p.wg.Wait()
}

// --- the webhook's side, from kube-apiserver's /metrics ---

// histogram is apiserver_admission_webhook_admission_duration_seconds of one webhook, every
// operation summed: cumulative counts by upper bound. rejections is
// apiserver_admission_webhook_rejection_count of the webhook.
type histogram struct {
	buckets    map[float64]float64
	count      float64
	rejections float64
}

func webhookMetrics(t *testing.T, m *framework.ManagementCluster) histogram {
	t.Helper()
	raw, err := m.CP.Clientset.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	framework.Must(t, err)
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	framework.Must(t, err)
	h := histogram{buckets: map[float64]float64{}}
	ours := func(metric *dto.Metric) bool {
		for _, l := range metric.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == m.WebhookName() {
				return true
			}
		}
		return false
	}
	if f := families["apiserver_admission_webhook_admission_duration_seconds"]; f != nil {
		for _, metric := range f.GetMetric() {
			if !ours(metric) {
				continue
			}
			h.count += float64(metric.GetHistogram().GetSampleCount())
			for _, b := range metric.GetHistogram().GetBucket() {
				h.buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
	}
	if f := families["apiserver_admission_webhook_rejection_count"]; f != nil {
		for _, metric := range f.GetMetric() {
			if ours(metric) {
				h.rejections += metric.GetCounter().GetValue()
			}
		}
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{buckets: map[float64]float64{}, count: h.count - o.count, rejections: h.rejections - o.rejections}
	for bound, n := range h.buckets {
		out.buckets[bound] = n - o.buckets[bound]
	}
	return out
}

// quantile as Prometheus' histogram_quantile: linear within the bucket the rank falls in.
func (h histogram) quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	bounds := make([]float64, 0, len(h.buckets))
	for b := range h.buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	rank := q * h.count
	lower, below := 0.0, 0.0
	for _, upper := range bounds {
		n := h.buckets[upper]
		if n >= rank {
			if math.IsInf(upper, 1) {
				upper = lower
			}
			fraction := 0.0
			if n > below {
				fraction = (rank - below) / (n - below)
			}
			return time.Duration((lower + (upper-lower)*fraction) * float64(time.Second))
		}
		lower, below = upper, n
	}
	return time.Duration(lower * float64(time.Second))
}

// --- the policy server's RSS ---

type rssSample struct {
	at  time.Duration
	kib int
}

type rssSampler struct {
	*periodic
	samples []rssSample
}

// sampleRSS reads VmRSS of the process every interval until stop.
func sampleRSS(p *framework.Process, interval time.Duration) *rssSampler {
	s := &rssSampler{}
	start := time.Now()
	s.periodic = every(interval, true, func() {
		if kib, ok := vmRSS(p.Cmd.Process.Pid); ok {
			s.samples = append(s.samples, rssSample{at: time.Since(start), kib: kib})
		}
	})
	return s
}

func vmRSS(pid int) (int, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int
			if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kib); err == nil {
				return kib, true
			}
		}
	}
	return 0, false
}

// --- a person's config update, timed ---

// measureUpdates times n merge patches of a label of the pools' in-use configs (what
// `kubectl apply` of a manifest whose labels changed sends), round robin, after 10 not timed.
// Every one must be admitted.
func (f soakFleet) measureUpdates(t *testing.T, c client.Client, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := -10; i < n; i++ {
		config := f.config(f.configs[(i+10)%len(f.configs)])
		patch := fmt.Sprintf(`{"metadata":{"labels":{"soak.cluster-test.rollout-policy.dev/update":"%d"}}}`, i+10)
		start := time.Now()
		if err := c.Patch(context.Background(), config, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatalf("the person's label update of %s was not admitted: %v", config.GetName(), err)
		}
		if i >= 0 {
			out = append(out, time.Since(start))
		}
	}
	return out
}

// waitRefused waits until a spec edit of the first config (dry run) is refused with a message
// containing want: the admission variant is in force.
func (f soakFleet) waitRefused(t *testing.T, c client.Client, want string) {
	t.Helper()
	config := f.config(f.configs[0])
	patch := []byte(`{"spec":{"files":[{"path":"/etc/sysctl.d/90-fleet.conf","content":"vm.max_map_count = 1\n"}]}}`)
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Patch(context.Background(), config, client.RawPatch(types.MergePatchType, patch), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a spec edit of %s is not refused by %q after a minute: %v", config.GetName(), want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// config is the KubeadmConfig of that name, for a patch.
func (f soakFleet) config(name string) *unstructured.Unstructured {
	config := &unstructured.Unstructured{}
	config.SetGroupVersionKind(f.kubeadm)
	config.SetNamespace(framework.Namespace)
	config.SetName(name)
	return config
}

// --- the native peer: a CEL ValidatingAdmissionPolicy approximating rule 2 ---

// celComparedPaths: every KubeadmConfig spec field of that API version a person may not change
// on a config in use, but the one CABPK rotates (joinConfiguration.discovery.bootstrapToken.token).
// CEL's type check refuses a field the version's schema lacks, hence a list per version.
func celComparedPaths(version string) []string {
	paths := []string{
		"clusterConfiguration", "initConfiguration", "files", "diskSetup", "mounts", "bootCommands",
		"preKubeadmCommands", "postKubeadmCommands", "users", "ntp", "format", "verbosity", "ignition",
		"joinConfiguration.nodeRegistration", "joinConfiguration.caCertPath", "joinConfiguration.controlPlane",
		"joinConfiguration.skipPhases", "joinConfiguration.patches",
		"joinConfiguration.discovery.file", "joinConfiguration.discovery.tlsBootstrapToken",
		"joinConfiguration.discovery.bootstrapToken.apiServerEndpoint",
		"joinConfiguration.discovery.bootstrapToken.caCertHashes",
		"joinConfiguration.discovery.bootstrapToken.unsafeSkipCAVerification",
	}
	if version == "v1beta1" {
		return append(paths, "useExperimentalRetryJoin", "joinConfiguration.discovery.timeout")
	}
	return append(paths, "joinConfiguration.timeouts")
}

// celPolicy is the best a CEL policy does natively: a MachinePool-owned KubeadmConfig's spec is
// immutable for everyone but CAPI's controllers, the token aside. It cannot name the changed
// paths (one static message), tell a rotated-out config from one in use (no lookups: the
// stored ownerReference is all it has), suggest the rotation's name, nor know other
// providers' kinds without a policy of their own.
func celPolicy(m *framework.ManagementCluster, version string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	var same []string
	for _, path := range celComparedPaths(version) {
		same = append(same, fmt.Sprintf("object.spec.?%s == oldObject.spec.?%s", strings.ReplaceAll(path, ".", ".?"), strings.ReplaceAll(path, ".", ".?")))
	}
	controllers := fmt.Sprintf("['%s', '%s']", m.CAPIManager, m.CABPK)
	fail := admissionregistrationv1.Fail
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadmconfig-in-use-immutable"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{
						APIGroups: []string{"bootstrap.cluster.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"kubeadmconfigs"},
					},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "not-capi", Expression: "!(request.userInfo.username in " + controllers + ")"},
				{Name: "in-use", Expression: "has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, r.kind == 'MachinePool' && r.apiVersion.startsWith('cluster.x-k8s.io/') && has(r.controller) && r.controller)"},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: strings.Join(same, " && "),
				Message:    "the spec of a KubeadmConfig in use by a MachinePool is immutable: create a new config and point the pool's configRef at it",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return vap, binding
}

// --- the report ---

type latencyRow struct {
	name      string
	durations []time.Duration
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

type soakReport struct {
	pools     int
	duration  time.Duration
	server    string
	rotations int
	providers []providerWrite
	gitops    *gitOps
	reapply   time.Duration
	refused   map[string]int
	webhook   histogram
	rss       []rssSample
	latencies []latencyRow
}

func (r soakReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d MachinePools with KubeadmConfigs", r.pools)
	for _, p := range r.providers {
		fmt.Fprintf(&b, ", %d with %s's", p.pools, p.name)
	}
	fmt.Fprintf(&b, "; %s, the policy in protect behind %s\n\n", r.duration.Round(time.Second), r.server)
	fmt.Fprintf(&b, "| what | value |\n|---|--:|\n")
	fmt.Fprintf(&b, "| requests the webhook saw (kube-apiserver) | %.0f |\n", r.webhook.count)
	fmt.Fprintf(&b, "| webhook p50 / p99 (histogram_quantile) | %s / %s |\n", r.webhook.quantile(0.5).Round(100*time.Microsecond), r.webhook.quantile(0.99).Round(100*time.Microsecond))
	fmt.Fprintf(&b, "| rejections (apiserver_admission_webhook_rejection_count) | %.0f |\n", r.webhook.rejections)
	fmt.Fprintf(&b, "| token rotations by CABPK (audit log) | %d |\n", r.rotations)
	for _, p := range r.providers {
		fmt.Fprintf(&b, "| writes of its %d configs by %s's manager since the cluster started (audit log) | %d |\n", p.pools, p.name, p.writes)
	}
	fmt.Fprintf(&b, "| GitOps re-applies (server-side) of the %d manifests every %s: applies (objects) / refused or warned | %d (%d) / %d |\n",
		r.gitops.manifests, r.reapply, r.gitops.applies, r.gitops.objects, len(r.gitops.problems))
	users := make([]string, 0, len(r.refused))
	for u := range r.refused {
		users = append(users, u)
	}
	sort.Strings(users)
	if len(users) == 0 {
		fmt.Fprintf(&b, "| refused by the policy | none |\n")
	}
	for _, u := range users {
		fmt.Fprintf(&b, "| refused by the policy: %s | %d |\n", u, r.refused[u])
	}
	if len(r.rss) > 0 {
		lo, hi := r.rss[0].kib, r.rss[0].kib
		for _, s := range r.rss {
			lo, hi = min(lo, s.kib), max(hi, s.kib)
		}
		fmt.Fprintf(&b, "| policy server RSS first / min / max / last (MiB) | %.1f / %.1f / %.1f / %.1f |\n",
			mib(r.rss[0].kib), mib(lo), mib(hi), mib(r.rss[len(r.rss)-1].kib))
		fmt.Fprintf(&b, "\nRSS over time (MiB): ")
		step := max(1, len(r.rss)/12)
		var points []string
		for i := 0; i < len(r.rss); i += step {
			points = append(points, fmt.Sprintf("%s %.1f", r.rss[i].at.Round(time.Second), mib(r.rss[i].kib)))
		}
		b.WriteString(strings.Join(points, ", ") + "\n")
	}
	fmt.Fprintf(&b, "\nA person's config update (merge patch of a label of an in-use KubeadmConfig), under the same load:\n\n")
	fmt.Fprintf(&b, "| admission | updates | p50 | p99 |\n|---|--:|--:|--:|\n")
	for _, row := range r.latencies {
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", row.name, len(row.durations),
			percentile(row.durations, 0.5).Round(10*time.Microsecond), percentile(row.durations, 0.99).Round(10*time.Microsecond))
	}
	return b.String()
}

func mib(kib int) float64 { return float64(kib) / 1024 }
