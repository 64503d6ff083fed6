package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kube-apiserver appends to the audit log while the test reads it: a read can end inside an
// event's line, which has no newline yet.
func TestReadAuditSkipsTheLineBeingWritten(t *testing.T) {
	complete := `{"auditID":"a","stage":"ResponseComplete","verb":"update"}` + "\n" +
		`{"auditID":"b","stage":"RequestReceived","verb":"update"}` + "\n"
	for _, tc := range []struct {
		name, tail string
		want       []string
	}{
		{"whole lines only", "", []string{"a"}},
		{"an event cut after its first byte", `{`, []string{"a"}},
		{"an event cut inside a value", `{"auditID":"c","stage":"ResponseComp`, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			Must(t, os.WriteFile(path, []byte(complete+tc.tail), 0o644))
			var got []string
			for _, e := range readAudit(t, path) {
				got = append(got, e.AuditID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("completed requests %v, want %v", got, tc.want)
			}
		})
	}
}
