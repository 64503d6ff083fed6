package framework

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// AuditEvent is what the test reads of the API server's audit log (audit.k8s.io/v1 Event).
type AuditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	// RequestURI is the request's path and query (a server-side apply's fieldManager).
	RequestURI string `json:"requestURI"`
	User       struct {
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

// Took is how long the API server took to answer the request.
func (e AuditEvent) Took() time.Duration { return e.StageTimestamp.Sub(e.RequestReceivedTimestamp) }

func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return r
}

// FieldManager is the request's fieldManager (`capi-topology` for the topology controller's
// server-side applies), empty when the client named none.
func (e AuditEvent) FieldManager() string {
	u, err := url.Parse(e.RequestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// DryRun: the request was a dry run (`dryRun=All`: kubectl's --dry-run=server, or the
// topology controller's server-side apply computing what would change), which goes through
// admission and changes nothing.
func (e AuditEvent) DryRun() bool {
	u, err := url.Parse(e.RequestURI)
	return err == nil && u.Query().Get("dryRun") != ""
}

func (e AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

func (e AuditEvent) String() string {
	name := ""
	if e.ObjectRef != nil {
		name = e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
	}
	message := ""
	if e.ResponseStatus != nil {
		message = e.ResponseStatus.Message
	}
	return fmt.Sprintf("%s %s %s %s -> %d %s", e.User.Username, e.Verb, e.Resource(), name, e.Code(), message)
}

// Refused: the write was answered with a refusal (an admission webhook's, RBAC's, the API
// server's validation). A 409 conflict of optimistic concurrency, a controller's write racing
// another writer of the object, is none: the controller reads the object again and retries.
func (e AuditEvent) Refused() bool {
	if e.Code() < 300 {
		return false
	}
	return e.Code() != http.StatusConflict || strings.Contains(e.ResponseStatus.Message, "denied the request")
}

// IsWrite: the verbs an admission webhook sees.
func (e AuditEvent) IsWrite() bool {
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
	Must(t, err)
	sort.Strings(rotated) // audit-<UTC time>.log
	return append(rotated, path)
}

// readAudit reads the completed requests of one audit log file, oldest first. A last line
// without its newline is an event kube-apiserver is still writing: the next read has it whole.
func readAudit(t *testing.T, path string) []AuditEvent {
	t.Helper()
	f, err := os.Open(path)
	Must(t, err)
	defer f.Close()
	var events []AuditEvent
	reader := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := reader.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return events
		}
		Must(t, err)
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("audit log %s: %v", path, err)
		}
		if e.Stage == "ResponseComplete" {
			events = append(events, e)
		}
	}
}

// DeniedBy: the events the webhook named refused (the API server's message for a webhook's
// refusal starts `admission webhook "<name>" denied the request`).
func DeniedBy(events []AuditEvent, webhook string) []AuditEvent {
	var denied []AuditEvent
	for _, e := range events {
		if e.ResponseStatus != nil && strings.Contains(e.ResponseStatus.Message, fmt.Sprintf("admission webhook %q denied the request", webhook)) {
			denied = append(denied, e)
		}
	}
	return denied
}

// FailedOpen: the events the API server admitted without the webhook's answer
// (failurePolicy Ignore): it annotates them failed-open.validating.webhook.admission.k8s.io/*.
func FailedOpen(events []AuditEvent, webhook string) []AuditEvent {
	var out []AuditEvent
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

// Summarize prints the writes by user, verb and resource, with how many succeeded.
func Summarize(t *testing.T, title string, events []AuditEvent) {
	t.Helper()
	type key struct{ user, verb, resource string }
	type count struct{ all, ok int }
	counts := map[key]*count{}
	for _, e := range events {
		if !e.IsWrite() {
			continue
		}
		k := key{e.User.Username, e.Verb, e.Resource()}
		if counts[k] == nil {
			counts[k] = &count{}
		}
		counts[k].all++
		if e.Code() < 300 {
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

// Verdict is one line `policy-host serve` logs per request it judged.
type Verdict struct {
	User, Kind, Operation string
	Allowed               bool
	Warnings              int
}

// ReadVerdicts reads the validation lines of policy-host serve's logs (the real
// policy-server logs in its own format: then there are none, and ok is false).
func ReadVerdicts(t *testing.T, logs []string) (verdicts []Verdict, ok bool) {
	t.Helper()
	for _, log := range logs {
		data, err := os.ReadFile(log)
		Must(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			_, fields, found := strings.Cut(line, "policy-host serve: validation ")
			if !found {
				continue
			}
			ok = true
			fields, _, _ = strings.Cut(fields, " message=")
			v := Verdict{}
			for _, field := range strings.Fields(fields) {
				key, value, _ := strings.Cut(field, "=")
				switch key {
				case "user":
					v.User = value
				case "kind":
					v.Kind = value
				case "operation":
					v.Operation = value
				case "allowed":
					v.Allowed = value == "true"
				case "warnings":
					fmt.Sscan(value, &v.Warnings)
				}
			}
			verdicts = append(verdicts, v)
		}
	}
	return verdicts, ok
}

// summarizeVerdicts prints what the policy server judged, by user, kind and operation.
func summarizeVerdicts(t *testing.T, verdicts []Verdict) {
	t.Helper()
	type key struct{ user, kind, operation string }
	type count struct{ all, allowed, warned int }
	counts := map[key]*count{}
	var keys []key
	for _, v := range verdicts {
		k := key{v.User, v.Kind, v.Operation}
		if counts[k] == nil {
			counts[k] = &count{}
			keys = append(keys, k)
		}
		counts[k].all++
		if v.Allowed {
			counts[k].allowed++
		}
		if v.Warnings > 0 {
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

func (m *ManagementCluster) WebhookName() string {
	return m.Policy.PolicyID() + ".kubewarden.admission"
}

// CheckControllersAdmitted: no write of a controller identity since the time was refused by
// the policy; the writes are printed by user, verb and resource.
func (m *ManagementCluster) CheckControllersAdmitted(t *testing.T, since time.Time) {
	t.Helper()
	events := m.EventsSince(t, since)
	Summarize(t, t.Name(), events)
	for _, e := range DeniedBy(events, m.WebhookName()) {
		if e.User.Username == m.CAPIManager || e.User.Username == m.CABPK {
			t.Errorf("the policy refused CAPI's own write: %s", e)
		}
	}
}

// CheckControllersJudged: the policy server saw the controllers' requests, allowed every one
// and warned none (from policy-host serve's log; the real policy-server's log is not read).
func (m *ManagementCluster) CheckControllersJudged(t *testing.T, wantSeen bool) {
	t.Helper()
	verdicts, ok := ReadVerdicts(t, m.PolicyServerLogs(t))
	if !ok {
		t.Log("the policy server's log is not policy-host's: what it judged is read from the audit log only")
		return
	}
	summarizeVerdicts(t, verdicts)
	seen := 0
	for _, v := range verdicts {
		if v.User != m.CAPIManager && v.User != m.CABPK {
			continue
		}
		seen++
		if !v.Allowed || v.Warnings > 0 {
			t.Errorf("the policy judged a controller's %s of a %s: allowed=%t, %d warnings", v.Operation, v.Kind, v.Allowed, v.Warnings)
		}
	}
	if wantSeen && seen == 0 {
		t.Error("the policy server saw no request of CAPI's controllers")
	}
}

// CheckPersonAdmittedExceptEdits: the person's writes since the time were admitted, but for
// those the policy refused on purpose (their message names the in-place edit).
func (m *ManagementCluster) CheckPersonAdmittedExceptEdits(t *testing.T, since time.Time) {
	t.Helper()
	for _, e := range m.personRefusals(t, since) {
		if !strings.Contains(e.ResponseStatus.Message, "Forbidden: changed") {
			t.Errorf("the person's write was refused: %s", e)
		}
	}
}

func (m *ManagementCluster) CheckPersonAdmitted(t *testing.T, since time.Time) {
	t.Helper()
	for _, e := range m.personRefusals(t, since) {
		t.Errorf("the person's write was refused: %s", e)
	}
}

// personRefusals: the person's writes since the time that were not admitted. A 409 is no
// verdict: kube-apiserver's optimistic concurrency (a controller wrote the object between
// kubectl's read and its patch), which kubectl retries; whether the command then succeeded is
// the caller's check of its exit.
func (m *ManagementCluster) personRefusals(t *testing.T, since time.Time) []AuditEvent {
	t.Helper()
	var refused []AuditEvent
	for _, e := range m.EventsSince(t, since) {
		if e.User.Username == m.PersonName && e.IsWrite() && e.Code() >= 300 && e.Code() != http.StatusConflict {
			refused = append(refused, e)
		}
	}
	return refused
}

// CheckNoWarningsTo: controller-runtime logs every warning the API server returns to a
// manager (KubeAPIWarningLogger); none may come from the policy.
func (m *ManagementCluster) CheckNoWarningsTo(t *testing.T, log string) {
	t.Helper()
	data := ReadFile(t, log)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "KubeAPIWarningLogger") && (strings.Contains(line, "configRef") || strings.Contains(line, "in place") || strings.Contains(line, "rotated out")) {
			t.Errorf("the manager got a warning from the policy: %s", line)
		}
	}
}

func (m *ManagementCluster) EventsSince(t *testing.T, since time.Time) []AuditEvent {
	t.Helper()
	var out []AuditEvent
	for _, file := range auditFiles(t, m.CP.auditLog) {
		for _, e := range readAudit(t, file) {
			if !e.RequestReceivedTimestamp.Before(since) {
				out = append(out, e)
			}
		}
	}
	return out
}

// AdmittedWithoutWarning runs a person's kubectl command that must be admitted with no
// warning of the policy (the API server's own deprecation warnings aside).
func (m *ManagementCluster) AdmittedWithoutWarning(t *testing.T, args ...string) {
	t.Helper()
	r := m.Person.Run(t, args...)
	// A 409 of the API server's optimistic concurrency (a controller wrote the object between
	// kubectl's read and its write) is no answer of the policy: run again, as a person or a
	// GitOps tool does.
	for attempt := 1; r.Err != nil && attempt < 3 && strings.Contains(r.Stderr, objectModified); attempt++ {
		t.Logf("kubectl %s: a write conflict, not the policy (%s): run again", strings.Join(args, " "), strings.TrimSpace(r.Stderr))
		r = m.Person.Run(t, args...)
	}
	if r.Err != nil {
		t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), r.Err, r.Stderr)
	}
	if w := PolicyWarnings(r.Stderr); len(w) > 0 {
		t.Errorf("kubectl %s printed a warning of the policy: %q", strings.Join(args, " "), w)
	}
}

// objectModified is the API server's answer to a write based on a stale resourceVersion.
const objectModified = "the object has been modified; please apply your changes to the latest version and try again"

func (m *ManagementCluster) PolicyServerLogs(t *testing.T) []string {
	t.Helper()
	logs, err := filepath.Glob(m.Artifacts.Path("policy-server-*.log"))
	Must(t, err)
	return logs
}

// verdictsOn: the lines of policy-host serve's log about the object named.
func (m *ManagementCluster) verdictsOn(t *testing.T, name string) string {
	t.Helper()
	var lines []string
	for _, log := range m.PolicyServerLogs(t) {
		for _, line := range strings.Split(string(ReadFile(t, log)), "\n") {
			if strings.Contains(line, " name="+name+" ") {
				lines = append(lines, line)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// CheckNotAnEdit: every write of the object since the time was admitted, and the policy found
// no in-place edit in a controller's (its audit annotation controller-write names what it
// would have refused a person).
func (m *ManagementCluster) CheckNotAnEdit(t *testing.T, since time.Time, resource, name string) []AuditEvent {
	t.Helper()
	var writes []AuditEvent
	for _, e := range m.EventsSince(t, since) {
		if e.Resource() != resource && e.Resource() != resource+"/status" || e.ObjectRef.Name != name || !e.IsWrite() {
			continue
		}
		writes = append(writes, e)
		if e.Refused() {
			t.Errorf("refused: %s (auditID %s in %s)", e, e.AuditID, m.CP.auditLog)
		}
		if v, ok := e.Annotations[m.WebhookName()+"/controller-write"]; ok {
			t.Errorf("POLICY: a write of %s that only the provider's defaulter changed was judged an in-place edit: %s\n  %s\n  (auditID %s in %s)",
				name, v, e, e.AuditID, m.CP.auditLog)
		}
	}
	return writes
}
