package storagefacts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type leaf struct{ v string }

func (l *leaf) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &l.v) }

type marshalOnly struct {
	Name string `json:"name,omitempty"`
}

func (m *marshalOnly) MarshalJSON() ([]byte, error) { return json.Marshal(m.Name) }

type Inline struct {
	Kind string `json:"kind,omitempty"`
}

type oldSpec struct {
	Inline  `json:",inline"`
	Flag    bool              `json:"flag,omitempty"`
	Kept    *bool             `json:"kept,omitempty"`
	Plain   string            `json:"plain"`
	Skipped string            `json:"-"`
	Args    map[string]string `json:"args,omitempty"`
	Gone    struct {
		A string `json:"a,omitempty"`
	} `json:"gone"`
	Items []struct {
		N int32 `json:"n,omitempty"`
	} `json:"items,omitempty"`
	Token  *leaf       `json:"token,omitempty"`
	Reg    marshalOnly `json:"reg"`
	hidden string
}

type newSpec struct {
	Flag  *bool  `json:"flag,omitempty"`
	Kept  *bool  `json:"kept,omitempty"`
	Plain string `json:"plain,omitzero"`
	Args  []struct {
		Name string `json:"name"`
	} `json:"args,omitempty"`
	Items []struct {
		N int64 `json:"n,omitempty"`
	} `json:"items,omitempty"`
	Token leaf        `json:"token"`
	Reg   marshalOnly `json:"reg"`
}

type oldObject struct {
	Spec oldSpec `json:"spec"`
	Meta struct {
		Ignored bool `json:"ignored,omitempty"`
	} `json:"metadata"`
}

type newObject struct {
	Spec newSpec `json:"spec"`
}

func TestFacts(t *testing.T) {
	k := Kind{
		Module: "m@v1", Group: "g", Kind: "K", Root: "spec",
		Storage: Version{Name: "v2", Object: newObject{}},
		Older:   []Version{{Name: "v1", Object: oldObject{}}},
		Mapped:  map[string]string{"args": "a list"},
	}
	facts, err := Facts(k)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range facts {
		got = append(got, f.GroupVersion+" "+f.Class+" "+f.Path)
	}
	want := []string{
		"g/v1 dropped spec.gone",
		"g/v1 dropped spec.kind",
		"g/v1 zero-is-absent spec.flag",
		"g/v1 zero-is-absent spec.gone.a",
		"g/v1 zero-is-absent spec.items[*].n",
		"g/v1 zero-is-absent spec.kind",
		"g/v1 zero-is-absent spec.reg.name",
		"g/v2 zero-is-absent spec.items[*].n",
		"g/v2 zero-is-absent spec.plain",
		"g/v2 zero-is-absent spec.reg.name",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	k.Mapped = map[string]string{"args": "a list", "flag": "not missing"}
	if _, err := Facts(k); err == nil || !strings.Contains(err.Error(), "flag") {
		t.Errorf("an entry of Mapped that matches nothing: %v, want an error naming it", err)
	}
}
