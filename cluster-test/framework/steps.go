package framework

import (
	"fmt"
	"testing"
)

// Step is one step of a case, a subtest of its own. ID names it for the steps that need it;
// Needs are the IDs of the earlier steps whose results it builds on (none: it stands alone on
// the case's set-up).
type Step struct {
	ID, Name string
	Needs    []string
	Run      func(t *testing.T)
}

// RunSteps runs the steps in order, each a subtest, and stops the test at the first that fails
// (the later ones may need it). A step that `go test -run` left out does not run; a step that
// runs first runs the steps it needs that did not (theirs before them), inside its own
// subtest, so `go test -run '^TestCluster$/^<step ID>:'` runs one step with what it builds on.
func RunSteps(t *testing.T, steps []Step) {
	t.Helper()
	byID := map[string]Step{}
	done := map[string]bool{}
	for _, s := range steps {
		if _, dup := byID[s.ID]; dup || s.ID == "" {
			t.Fatalf("step ID %q is empty or not unique", s.ID)
		}
		for _, need := range s.Needs {
			if _, ok := byID[need]; !ok {
				t.Fatalf("step %q needs %q, which is not a step before it", s.ID, need)
			}
		}
		byID[s.ID] = s
	}
	var prepare func(t *testing.T, s Step)
	prepare = func(t *testing.T, s Step) {
		t.Helper()
		for _, need := range s.Needs {
			if done[need] {
				continue
			}
			n := byID[need]
			prepare(t, n)
			t.Logf("step %q needs %q, which did not run: running it first (%s)", s.ID, need, n.Name)
			n.Run(t)
			if t.Failed() {
				t.Fatalf("step %q failed; step %q needs it", need, s.ID)
			}
			done[need] = true
		}
	}
	for _, s := range steps {
		ran := false
		ok := t.Run(s.ID+": "+s.Name, func(t *testing.T) {
			ran = true
			prepare(t, s)
			s.Run(t)
		})
		if !ran {
			continue // left out by -run
		}
		if !ok {
			t.Fatalf("step %q failed; later steps need it", s.Name)
		}
		done[s.ID] = true
	}
}

// String is the step's ID and name, for logs.
func (s Step) String() string { return fmt.Sprintf("%s (%s)", s.ID, s.Name) }
