package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestSoak is `make cluster-soak` (not part of `make test`): SOAK_POOLS MachinePools (50) with
// their KubeadmConfigs on one management cluster, CABPK rotating every pool's token about every
// 20 s, the policy in protect, for SOAK_DURATION (15m). It reports what the webhook saw and how
// long it took (kube-apiserver's /metrics), refusals by identity and token rotations (the audit
// log), and the policy server's RSS over time; then, in the same cluster under the same load,
// the latency of a person's config update (SOAK_APPLIES, 200) with no admission, with a CEL
// ValidatingAdmissionPolicy of the project's own, and with the policy. The report is
// soak-report.md in the artifacts folder; docs/performance.md records a run.
func TestSoak(t *testing.T) {
	duration := envDuration(t, "SOAK_DURATION", 15*time.Minute)
	pools := envInt(t, "SOAK_POOLS", 50)
	applies := envInt(t, "SOAK_APPLIES", 200)
	ctrllog.SetLogger(logr.Discard())
	bin := clusterBinaries(t)
	a := newArtifacts(t)
	m := startManagementCluster(t, a, bin, newCA(t), nil)
	m.createCluster(t)
	ctx := context.Background()

	// The pools, as pool-1 and its config, renamed.
	names := make([]string, pools)
	for i := range names {
		names[i] = fmt.Sprintf("soak-%02d", i)
		text := string(readFile(t, "testdata/fleet/pool-1-a.yaml")) + "\n---\n" + string(readFile(t, "testdata/fleet/pool-1.yaml"))
		m.cp.createAll(t, readObjects(t, []byte(strings.ReplaceAll(text, "pool-1", names[i]))))
	}
	for _, name := range names {
		m.provisionInfrastructure(t, name)
	}
	for _, name := range names {
		m.waitFor(t, kubeadmConfigGVK, name+"-a", 5*time.Minute, "filled by CABPK", func(u *unstructured.Unstructured) bool {
			secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
			return secret == name+"-a"
		})
	}
	t.Logf("%d pools up", pools)

	// The soak: CAPI's own traffic only.
	before := webhookMetrics(t, m)
	start := time.Now()
	rss := sampleRSS(m.server.process, 10*time.Second)
	for elapsed := time.Duration(0); elapsed < duration; elapsed = time.Since(start) {
		time.Sleep(min(time.Minute, duration-elapsed))
		t.Logf("soak: %s of %s", time.Since(start).Round(time.Second), duration)
	}
	end := time.Now()
	samples := rss.stop()
	after := webhookMetrics(t, m)
	events := m.eventsSince(t, start)
	rotations := 0
	for _, e := range events {
		if e.User.Username == m.cabpk && e.resource() == "kubeadmconfigs" && e.isWrite() && e.code() < 300 && !e.StageTimestamp.After(end) {
			rotations++
		}
	}
	refused := map[string]int{}
	for _, e := range deniedBy(events, m.webhookName()) {
		refused[e.User.Username]++
	}
	for _, identity := range []string{m.capiManager, m.cabpk} {
		if refused[identity] > 0 {
			t.Errorf("the policy refused %d writes of %s", refused[identity], identity)
		}
	}
	if open := failedOpen(events, m.webhookName()); len(open) > 0 {
		t.Errorf("%d requests failed open during the soak: first %s", len(open), open[0])
	}
	if rotations == 0 {
		t.Error("CABPK rotated no token during the soak")
	}

	// Side by side, under the same load: a person's config update, admitted by every variant.
	person := personClient(t, m)
	latencies := []latencyRow{{name: "no admission"}}
	must(t, m.cp.client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.policy.policyID()}}))
	latencies[0].durations = measureUpdates(t, person, names, applies)

	vap, binding := celPolicy(m)
	must(t, m.cp.client.Create(ctx, vap))
	must(t, m.cp.client.Create(ctx, binding))
	waitRefused(t, person, names[0], "ValidatingAdmissionPolicy")
	latencies = append(latencies, latencyRow{name: "CEL ValidatingAdmissionPolicy (" + vap.Name + ")", durations: measureUpdates(t, person, names, applies)})
	must(t, m.cp.client.Delete(ctx, binding))
	must(t, m.cp.client.Delete(ctx, vap))

	servers := []*policyServer{m.server}
	if os.Getenv("POLICY_SERVER") != "" { // the real policy-server, and policy-host beside it
		hostArtifacts := a.sub(t, "policy-host")
		host := newPolicyServer(t, hostArtifacts, m.ca, m.policy, m.server.kubeconfig)
		host.bin, host.args = policyHostBinary(t), []string{"serve"}
		host.start(hostArtifacts, nil)
		servers = append(servers, host)
	}
	for _, s := range servers {
		registerWebhook(t, m.cp, m.policy, s, m.ca.caPEM)
		waitRefused(t, person, names[0], "denied the request")
		latencies = append(latencies, latencyRow{name: "this policy, " + filepath.Base(s.bin), durations: measureUpdates(t, person, names, applies)})
		must(t, m.cp.client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.policy.policyID()}}))
	}

	report := soakReport{
		pools: pools, duration: end.Sub(start), server: filepath.Base(m.server.bin), rotations: rotations,
		refused: refused, webhook: after.minus(before), rss: samples, latencies: latencies,
	}
	text := report.String()
	must(t, os.WriteFile(a.path("soak-report.md"), []byte(text), 0o644))
	t.Logf("soak report (%s):\n%s", a.path("soak-report.md"), text)
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

// --- the webhook's side, from kube-apiserver's /metrics ---

// histogram is apiserver_admission_webhook_admission_duration_seconds of one webhook, every
// operation summed: cumulative counts by upper bound. rejections is
// apiserver_admission_webhook_rejection_count of the webhook.
type histogram struct {
	buckets    map[float64]float64
	count      float64
	rejections float64
}

func webhookMetrics(t *testing.T, m *managementCluster) histogram {
	t.Helper()
	raw, err := m.cp.clientset.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(t, err)
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	must(t, err)
	h := histogram{buckets: map[float64]float64{}}
	ours := func(metric *dto.Metric) bool {
		for _, l := range metric.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == m.webhookName() {
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
	done    chan struct{}
	wg      sync.WaitGroup
	samples []rssSample
}

// sampleRSS reads VmRSS of the process every interval until stop.
func sampleRSS(p *process, interval time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	start := time.Now()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			if kib, ok := vmRSS(p.cmd.Process.Pid); ok {
				s.samples = append(s.samples, rssSample{at: time.Since(start), kib: kib})
			}
			select {
			case <-s.done:
				return
			case <-ticker.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() []rssSample {
	close(s.done)
	s.wg.Wait()
	return s.samples
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

func personClient(t *testing.T, m *managementCluster) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", m.person.kubeconfig)
	must(t, err)
	cfg.QPS, cfg.Burst = 1000, 1000 // the client's own rate limit is not what is measured
	c, err := client.New(cfg, client.Options{})
	must(t, err)
	return c
}

// measureUpdates times n merge patches of a label of the pools' in-use configs (what
// `kubectl apply` of a manifest whose labels changed sends), round robin, after 10 not timed.
// Every one must be admitted.
func measureUpdates(t *testing.T, c client.Client, pools []string, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := -10; i < n; i++ {
		config := &unstructured.Unstructured{}
		config.SetGroupVersionKind(kubeadmConfigGVK)
		config.SetNamespace(namespace)
		config.SetName(pools[(i+10)%len(pools)] + "-a")
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

// waitRefused waits until a spec edit of the pool's config (dry run) is refused with a message
// containing want: the admission variant is in force.
func waitRefused(t *testing.T, c client.Client, pool, want string) {
	t.Helper()
	config := &unstructured.Unstructured{}
	config.SetGroupVersionKind(kubeadmConfigGVK)
	config.SetNamespace(namespace)
	config.SetName(pool + "-a")
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

// --- the native peer: a CEL ValidatingAdmissionPolicy approximating rule 2 ---

// celComparedPaths: every KubeadmConfig v1beta2 spec field a person may not change on a config
// in use, but the one CABPK rotates (joinConfiguration.discovery.bootstrapToken.token).
var celComparedPaths = []string{
	"clusterConfiguration", "initConfiguration", "files", "diskSetup", "mounts", "bootCommands",
	"preKubeadmCommands", "postKubeadmCommands", "users", "ntp", "format", "verbosity", "ignition",
	"joinConfiguration.nodeRegistration", "joinConfiguration.caCertPath", "joinConfiguration.controlPlane",
	"joinConfiguration.skipPhases", "joinConfiguration.patches", "joinConfiguration.timeouts",
	"joinConfiguration.discovery.file", "joinConfiguration.discovery.tlsBootstrapToken",
	"joinConfiguration.discovery.bootstrapToken.apiServerEndpoint",
	"joinConfiguration.discovery.bootstrapToken.caCertHashes",
	"joinConfiguration.discovery.bootstrapToken.unsafeSkipCAVerification",
}

// celPolicy is the best a CEL policy does natively: a MachinePool-owned KubeadmConfig's spec is
// immutable for everyone but CAPI's controllers, the token aside. It cannot name the changed
// paths (one static message), tell a rotated-out config from one in use (no lookups: the
// stored ownerReference is all it has), suggest the rotation's name, nor know other
// providers' kinds without a policy of their own.
func celPolicy(m *managementCluster) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	var same []string
	for _, path := range celComparedPaths {
		same = append(same, fmt.Sprintf("object.spec.?%s == oldObject.spec.?%s", strings.ReplaceAll(path, ".", ".?"), strings.ReplaceAll(path, ".", ".?")))
	}
	controllers := fmt.Sprintf("['%s', '%s']", m.capiManager, m.cabpk)
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
	refused   map[string]int
	webhook   histogram
	rss       []rssSample
	latencies []latencyRow
}

func (r soakReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d MachinePools, %s, the policy in protect behind %s\n\n", r.pools, r.duration.Round(time.Second), r.server)
	fmt.Fprintf(&b, "| what | value |\n|---|--:|\n")
	fmt.Fprintf(&b, "| requests the webhook saw (kube-apiserver) | %.0f |\n", r.webhook.count)
	fmt.Fprintf(&b, "| webhook p50 / p99 (histogram_quantile) | %s / %s |\n", r.webhook.quantile(0.5).Round(100*time.Microsecond), r.webhook.quantile(0.99).Round(100*time.Microsecond))
	fmt.Fprintf(&b, "| rejections (apiserver_admission_webhook_rejection_count) | %.0f |\n", r.webhook.rejections)
	fmt.Fprintf(&b, "| token rotations by CABPK (audit log) | %d |\n", r.rotations)
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
