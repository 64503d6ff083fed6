package clustertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// auditEvent is what the test reads of the API server's audit log (audit.k8s.io/v1 Event).
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	Annotations              map[string]string `json:"annotations"`
	RequestReceivedTimestamp time.Time         `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time         `json:"stageTimestamp"`
}

// took is how long the API server took to answer the request.
func (e auditEvent) took() time.Duration { return e.StageTimestamp.Sub(e.RequestReceivedTimestamp) }

func (e auditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return r
}

func (e auditEvent) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

func (e auditEvent) String() string {
	name := ""
	if e.ObjectRef != nil {
		name = e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
	}
	message := ""
	if e.ResponseStatus != nil {
		message = e.ResponseStatus.Message
	}
	return fmt.Sprintf("%s %s %s %s -> %d %s", e.User.Username, e.Verb, e.resource(), name, e.code(), message)
}

// isWrite: the verbs an admission webhook sees.
func (e auditEvent) isWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// auditFiles is the audit log and, before it, the files kube-apiserver rotated it into, oldest
// first: its log writer (lumberjack) rotates at 100 MB, a soak's every half hour.
func auditFiles(t *testing.T, path string) []string {
	t.Helper()
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ".log") + "-*.log")
	must(t, err)
	sort.Strings(rotated) // audit-<UTC time>.log
	return append(rotated, path)
}

// readAudit reads the completed requests of one audit log file, oldest first.
func readAudit(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	var events []auditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("audit log %s: %v", path, err)
		}
		if e.Stage == "ResponseComplete" {
			events = append(events, e)
		}
	}
	must(t, scanner.Err())
	return events
}

// deniedBy: the events the webhook named refused (the API server's message for a webhook's
// refusal starts `admission webhook "<name>" denied the request`).
func deniedBy(events []auditEvent, webhook string) []auditEvent {
	var denied []auditEvent
	for _, e := range events {
		if e.ResponseStatus != nil && strings.Contains(e.ResponseStatus.Message, fmt.Sprintf("admission webhook %q denied the request", webhook)) {
			denied = append(denied, e)
		}
	}
	return denied
}

// failedOpen: the events the API server admitted without the webhook's answer
// (failurePolicy Ignore): it annotates them failed-open.validating.webhook.admission.k8s.io/*.
func failedOpen(events []auditEvent, webhook string) []auditEvent {
	var out []auditEvent
	for _, e := range events {
		for k, v := range e.Annotations {
			if strings.HasPrefix(k, "failed-open.validating.webhook.admission.k8s.io/") && v == webhook {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// summarize prints the writes by user, verb and resource, with how many succeeded.
func summarize(t *testing.T, title string, events []auditEvent) {
	t.Helper()
	type key struct{ user, verb, resource string }
	type count struct{ all, ok int }
	counts := map[key]*count{}
	for _, e := range events {
		if !e.isWrite() {
			continue
		}
		k := key{e.User.Username, e.Verb, e.resource()}
		if counts[k] == nil {
			counts[k] = &count{}
		}
		counts[k].all++
		if e.code() < 300 {
			counts[k].ok++
		}
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.user != b.user {
			return a.user < b.user
		}
		if a.resource != b.resource {
			return a.resource < b.resource
		}
		return a.verb < b.verb
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s (writes to CAPI's groups, from the audit log):\n", title)
	fmt.Fprintf(&b, "  %-85s %-7s %-28s %5s %5s\n", "user", "verb", "resource", "sent", "2xx")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-85s %-7s %-28s %5d %5d\n", k.user, k.verb, k.resource, counts[k].all, counts[k].ok)
	}
	t.Log(b.String())
}

// verdict is one line `policy-host serve` logs per request it judged.
type verdict struct {
	user, kind, operation string
	allowed               bool
	warnings              int
}

// readVerdicts reads the validation lines of policy-host serve's logs (the real
// policy-server logs in its own format: then there are none, and ok is false).
func readVerdicts(t *testing.T, logs []string) (verdicts []verdict, ok bool) {
	t.Helper()
	for _, log := range logs {
		data, err := os.ReadFile(log)
		must(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			_, fields, found := strings.Cut(line, "policy-host serve: validation ")
			if !found {
				continue
			}
			ok = true
			fields, _, _ = strings.Cut(fields, " message=")
			v := verdict{}
			for _, field := range strings.Fields(fields) {
				key, value, _ := strings.Cut(field, "=")
				switch key {
				case "user":
					v.user = value
				case "kind":
					v.kind = value
				case "operation":
					v.operation = value
				case "allowed":
					v.allowed = value == "true"
				case "warnings":
					fmt.Sscan(value, &v.warnings)
				}
			}
			verdicts = append(verdicts, v)
		}
	}
	return verdicts, ok
}

// summarizeVerdicts prints what the policy server judged, by user, kind and operation.
func summarizeVerdicts(t *testing.T, verdicts []verdict) {
	t.Helper()
	type key struct{ user, kind, operation string }
	type count struct{ all, allowed, warned int }
	counts := map[key]*count{}
	var keys []key
	for _, v := range verdicts {
		k := key{v.user, v.kind, v.operation}
		if counts[k] == nil {
			counts[k] = &count{}
			keys = append(keys, k)
		}
		counts[k].all++
		if v.allowed {
			counts[k].allowed++
		}
		if v.warnings > 0 {
			counts[k].warned++
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j])
	})
	var b strings.Builder
	b.WriteString("what the policy judged (policy server's log):\n")
	fmt.Fprintf(&b, "  %-85s %-14s %-9s %5s %7s %6s\n", "user", "kind", "operation", "seen", "allowed", "warned")
	for _, k := range keys {
		c := counts[k]
		fmt.Fprintf(&b, "  %-85s %-14s %-9s %5d %7d %6d\n", k.user, k.kind, k.operation, c.all, c.allowed, c.warned)
	}
	t.Log(b.String())
}

func (m *managementCluster) webhookName() string {
	return m.policy.policyID() + ".kubewarden.admission"
}

// checkControllersAdmitted: no write of a controller identity since the time was refused by
// the policy; the writes are printed by user, verb and resource.
func (m *managementCluster) checkControllersAdmitted(t *testing.T, since time.Time) {
	t.Helper()
	events := m.eventsSince(t, since)
	summarize(t, t.Name(), events)
	for _, e := range deniedBy(events, m.webhookName()) {
		if e.User.Username == m.capiManager || e.User.Username == m.cabpk {
			t.Errorf("the policy refused CAPI's own write: %s", e)
		}
	}
}

// checkControllersJudged: the policy server saw the controllers' requests, allowed every one
// and warned none (from policy-host serve's log; the real policy-server's log is not read).
func (m *managementCluster) checkControllersJudged(t *testing.T, wantSeen bool) {
	t.Helper()
	verdicts, ok := readVerdicts(t, m.policyServerLogs(t))
	if !ok {
		t.Log("the policy server's log is not policy-host's: what it judged is read from the audit log only")
		return
	}
	summarizeVerdicts(t, verdicts)
	seen := 0
	for _, v := range verdicts {
		if v.user != m.capiManager && v.user != m.cabpk {
			continue
		}
		seen++
		if !v.allowed || v.warnings > 0 {
			t.Errorf("the policy judged a controller's %s of a %s: allowed=%t, %d warnings", v.operation, v.kind, v.allowed, v.warnings)
		}
	}
	if wantSeen && seen == 0 {
		t.Error("the policy server saw no request of CAPI's controllers")
	}
}

// checkPersonAdmittedExceptEdits: the person's writes since the time were admitted, but for
// those the policy refused on purpose (their message names the in-place edit).
func (m *managementCluster) checkPersonAdmittedExceptEdits(t *testing.T, since time.Time) {
	t.Helper()
	for _, e := range m.personRefusals(t, since) {
		if !strings.Contains(e.ResponseStatus.Message, "Forbidden: changed") {
			t.Errorf("the person's write was refused: %s", e)
		}
	}
}

func (m *managementCluster) checkPersonAdmitted(t *testing.T, since time.Time) {
	t.Helper()
	for _, e := range m.personRefusals(t, since) {
		t.Errorf("the person's write was refused: %s", e)
	}
}

// personRefusals: the person's writes since the time that were not admitted.
func (m *managementCluster) personRefusals(t *testing.T, since time.Time) []auditEvent {
	t.Helper()
	var refused []auditEvent
	for _, e := range m.eventsSince(t, since) {
		if e.User.Username == m.personName && e.isWrite() && e.code() >= 300 {
			refused = append(refused, e)
		}
	}
	return refused
}

// checkNoWarningsTo: controller-runtime logs every warning the API server returns to a
// manager (KubeAPIWarningLogger); none may come from the policy.
func (m *managementCluster) checkNoWarningsTo(t *testing.T, log string) {
	t.Helper()
	data := readFile(t, log)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "KubeAPIWarningLogger") && (strings.Contains(line, "configRef") || strings.Contains(line, "in place") || strings.Contains(line, "rotated out")) {
			t.Errorf("the manager got a warning from the policy: %s", line)
		}
	}
}

func (m *managementCluster) eventsSince(t *testing.T, since time.Time) []auditEvent {
	t.Helper()
	var out []auditEvent
	for _, file := range auditFiles(t, m.cp.auditLog) {
		for _, e := range readAudit(t, file) {
			if !e.RequestReceivedTimestamp.Before(since) {
				out = append(out, e)
			}
		}
	}
	return out
}

// admittedWithoutWarning runs a person's kubectl command that must be admitted with no
// warning of the policy (the API server's own deprecation warnings aside).
func (m *managementCluster) admittedWithoutWarning(t *testing.T, args ...string) {
	t.Helper()
	r := m.person.run(t, args...)
	if r.err != nil {
		t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
	}
	if w := policyWarnings(r.stderr); len(w) > 0 {
		t.Errorf("kubectl %s printed a warning of the policy: %q", strings.Join(args, " "), w)
	}
}

func (m *managementCluster) policyServerLogs(t *testing.T) []string {
	t.Helper()
	logs, err := filepath.Glob(m.a.path("policy-server-*.log"))
	must(t, err)
	return logs
}

// verdictsOn: the lines of policy-host serve's log about the object named.
func (m *managementCluster) verdictsOn(t *testing.T, name string) string {
	t.Helper()
	var lines []string
	for _, log := range m.policyServerLogs(t) {
		for _, line := range strings.Split(string(readFile(t, log)), "\n") {
			if strings.Contains(line, " name="+name+" ") {
				lines = append(lines, line)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// checkNotAnEdit: every write of the object since the time was admitted, and the policy found
// no in-place edit in a controller's (its audit annotation controller-write names what it
// would have refused a person).
func (m *managementCluster) checkNotAnEdit(t *testing.T, since time.Time, resource, name string) []auditEvent {
	t.Helper()
	var writes []auditEvent
	for _, e := range m.eventsSince(t, since) {
		if e.resource() != resource && e.resource() != resource+"/status" || e.ObjectRef.Name != name || !e.isWrite() {
			continue
		}
		writes = append(writes, e)
		if e.code() >= 300 {
			t.Errorf("refused: %s (auditID %s in %s)", e, e.AuditID, m.cp.auditLog)
		}
		if v, ok := e.Annotations[m.webhookName()+"/controller-write"]; ok {
			t.Errorf("POLICY: a write of %s that only the provider's defaulter changed was judged an in-place edit: %s\n  %s\n  (auditID %s in %s)",
				name, v, e, e.AuditID, m.cp.auditLog)
		}
	}
	return writes
}
