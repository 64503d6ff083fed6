// Package storagefacts reads, from a bootstrap kind's real Go types, what a client of an older
// served API version can send that the API server does not give back, and checks
// ../testdata/storage-facts.txt against it (UPDATE_STORAGE_FACTS=1 rewrites the file).
//
// A custom resource whose storage version (the conversion hub) differs from the request's
// version goes through the provider's conversion webhook, which decodes the object into the
// Go type of one version and encodes the Go type of the other. Two things are lost on the way:
//
//   - dropped: a field of the older version that the storage version has no place for (no
//     field at the same JSON path with the same shape) and that the conversion does not map
//     elsewhere or restore. Found here by reflection; what the conversion maps by hand is
//     named by the caller (Kind.Mapped, each entry with the conversion's file and line) and
//     must match a found path, so that the list cannot rot.
//   - zero-is-absent: a non-pointer bool, string (or string-typed) or number field tagged
//     omitempty (or omitzero): its zero value and its absence decode to the same Go value and
//     encode to absence. Listed for the older version and for the storage version.
//
// Paths start at the object's top (spec.…, spec.template.spec.…): dots between JSON keys,
// `[*]` for any element of a list, `.*` for any key of a Go map.
package storagefacts

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The classes of storage-facts.txt.
const (
	Dropped      = "dropped"
	ZeroIsAbsent = "zero-is-absent"
)

// Fact is one line of storage-facts.txt.
type Fact struct {
	Module       string // the release, <module path>@<version>
	Kind         string
	GroupVersion string
	Class        string
	Path         string
}

func (f Fact) String() string {
	return strings.Join([]string{f.Module, f.Kind, f.GroupVersion, f.Class, f.Path}, " ")
}

func (f Fact) less(g Fact) bool {
	a := []string{f.Module, f.Kind, f.GroupVersion, f.Class, f.Path}
	b := []string{g.Module, g.Kind, g.GroupVersion, g.Class, g.Path}
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Version is one served API version of a kind.
type Version struct {
	Name   string // e.g. "v1beta1"
	Object any    // a value of the object's Go type, e.g. v1beta1.KubeadmConfig{}
}

// Kind is one kind of one release: its storage version and its other served versions.
type Kind struct {
	Module  string // the release the facts are keyed by, <module path>@<version>
	Group   string
	Kind    string
	Root    string // the part of the object compared: "spec", or "spec.template.spec" for a template
	Storage Version
	Older   []Version
	// CRD: the kind's CustomResourceDefinition in the release's module (e.g.
	// "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml"): its
	// served versions must be Storage and Older, its storage version Storage.
	CRD string
	// Mapped: paths below Root that an older version has and the storage version has no
	// same-shaped place for, but which the conversion maps to another field or restores.
	// Value: what it does, and where. Every entry must be found by the reflection.
	Mapped map[string]string
}

// Facts is what the kind's Go types say, sorted.
func Facts(k Kind) ([]Fact, error) {
	storage, err := paths(reflect.TypeOf(k.Storage.Object), k.Root)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", k.Kind, k.Group, k.Storage.Name, err)
	}
	var facts []Fact
	add := func(version, class, path string) {
		facts = append(facts, Fact{k.Module, k.Kind, k.Group + "/" + version, class, path})
	}
	for p, n := range storage {
		if n.zeroIsAbsent() {
			add(k.Storage.Name, ZeroIsAbsent, p)
		}
	}
	used := map[string]bool{}
	for _, v := range k.Older {
		older, err := paths(reflect.TypeOf(v.Object), k.Root)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", k.Kind, k.Group, v.Name, err)
		}
		missing := map[string]bool{}
		for p, n := range older {
			if n.zeroIsAbsent() {
				add(v.Name, ZeroIsAbsent, p)
			}
			if s, ok := storage[p]; !ok || s.shape != n.shape {
				missing[p] = true
			}
		}
		for p := range missing {
			if hasAncestor(p, missing) {
				continue // the topmost path that has no place covers everything below it
			}
			rel := strings.TrimPrefix(p, k.Root+".")
			if _, ok := k.Mapped[rel]; ok {
				used[rel] = true
				continue
			}
			add(v.Name, Dropped, p)
		}
	}
	var unused []string
	for rel := range k.Mapped {
		if !used[rel] {
			unused = append(unused, rel)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("%s %s: Mapped lists %s, but no older version has such a path without a same-shaped place in the storage version: remove it",
			k.Module, k.Kind, strings.Join(unused, ", "))
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].less(facts[j]) })
	return facts, nil
}

// parent is the path one step up: a.b.c -> a.b, a.b[*] -> a.b, a.b.* -> a.b.
func parent(p string) string {
	if strings.HasSuffix(p, "[*]") {
		return strings.TrimSuffix(p, "[*]")
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

func hasAncestor(p string, set map[string]bool) bool {
	for q := parent(p); q != ""; q = parent(q) {
		if set[q] {
			return true
		}
	}
	return false
}

// node is what a JSON path holds in a Go type.
type node struct {
	// object, list, map, bool, string, number, bytes, or custom (a type with its own
	// MarshalJSON/MarshalText, or an interface)
	shape   string
	pointer bool // the field is a pointer (nil and zero differ)
	omit    bool // tagged omitempty or omitzero
	field   bool // a struct field (not a list element or map value)
}

func (n node) zeroIsAbsent() bool {
	return n.field && !n.pointer && n.omit && (n.shape == "bool" || n.shape == "string" || n.shape == "number")
}

var (
	jsonMarshaler   = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler   = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// custom: a value of t is a leaf whose JSON t's own methods decide. What a version keeps is
// what its decoding keeps, so a struct with its own MarshalJSON but no UnmarshalJSON (CAPI
// v1beta1's NodeRegistrationOptions, which marshals a copy of its fields to keep `taints: []`)
// is walked field by field.
func custom(t reflect.Type) bool {
	implements := func(ifaces ...reflect.Type) bool {
		for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
			for _, i := range ifaces {
				if u.Implements(i) {
					return true
				}
			}
		}
		return false
	}
	if implements(jsonUnmarshaler, textUnmarshaler) {
		return true
	}
	return t.Kind() != reflect.Struct && implements(jsonMarshaler, textMarshaler)
}

// paths is every JSON path of t below root (not root itself), as encoding/json names them.
func paths(t reflect.Type, root string) (map[string]node, error) {
	w := walker{root: root, out: map[string]node{}, active: map[reflect.Type]bool{}}
	if err := w.value(t, "", node{}); err != nil {
		return nil, err
	}
	if len(w.out) == 0 {
		return nil, fmt.Errorf("%s has nothing at %s", t, root)
	}
	return w.out, nil
}

type walker struct {
	root   string
	out    map[string]node
	active map[reflect.Type]bool // structs being walked: a recursive type would not end
}

// inScope: path is root, below it, or on the way to it.
func (w *walker) inScope(path string) bool {
	return path == "" || path == w.root || strings.HasPrefix(path, w.root+".") || strings.HasPrefix(path, w.root+"[") ||
		strings.HasPrefix(w.root, path+".")
}

func (w *walker) below(path string) bool {
	return strings.HasPrefix(path, w.root+".") || strings.HasPrefix(path, w.root+"[")
}

// value walks a value of type t found at path; n says how it was reached.
func (w *walker) value(t reflect.Type, path string, n node) error {
	if !w.inScope(path) {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		n.pointer = true
		t = t.Elem()
	}
	record := func(shape string) error {
		if !w.below(path) {
			return nil
		}
		if _, dup := w.out[path]; dup {
			return fmt.Errorf("two fields at %s", path)
		}
		n.shape = shape
		w.out[path] = n
		return nil
	}
	if custom(t) {
		return record("custom")
	}
	switch t.Kind() {
	case reflect.Struct:
		if err := record("object"); err != nil {
			return err
		}
		if w.active[t] {
			return fmt.Errorf("%s contains itself at %s", t, path)
		}
		w.active[t] = true
		defer delete(w.active, t)
		return w.fields(t, path)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return record("bytes")
		}
		if err := record("list"); err != nil {
			return err
		}
		return w.value(t.Elem(), path+"[*]", node{})
	case reflect.Map:
		if err := record("map"); err != nil {
			return err
		}
		return w.value(t.Elem(), join(path, "*"), node{})
	case reflect.Bool:
		return record("bool")
	case reflect.String:
		return record("string")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return record("number")
	case reflect.Interface:
		return record("custom")
	default:
		return fmt.Errorf("%s at %s: no JSON shape known for kind %s", t, path, t.Kind())
	}
}

// fields walks the fields of struct t at path, promoting embedded structs without a JSON name
// as encoding/json does.
func (w *walker) fields(t reflect.Type, path string) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		omit := false
		for _, o := range strings.Split(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				omit = true
			}
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !custom(ft) {
				if err := w.fields(ft, path); err != nil {
					return err
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			name = ft.Name()
		}
		if name == "" {
			name = f.Name
		}
		if err := w.value(f.Type, join(path, name), node{omit: omit, field: true}); err != nil {
			return err
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Release is <path>@<version> of a module in the build list of the module in the current folder
// (a test's: its package's folder), after replace directives. (A test binary's
// debug.ReadBuildInfo lists no modules.)
func Release(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", path).Output()
	if err != nil {
		var stderr []byte
		if e, ok := err.(*exec.ExitError); ok {
			stderr = e.Stderr
		}
		t.Fatalf("go list -m %s: %v %s", path, err, stderr)
	}
	version := strings.TrimSpace(string(out))
	if version == "" {
		t.Fatalf("go list -m %s: no version", path)
	}
	return path + "@" + version
}

// Check compares the lines of txt that belong to the kinds' releases with what their types
// say, failing with each differing line; with UPDATE_STORAGE_FACTS=1 it rewrites those lines
// instead (keeping the file's leading comment and the other releases' lines). It first checks
// each kind's versions against its CRD (yamlToJSON: sigs.k8s.io/yaml.YAMLToJSON).
func Check(t *testing.T, txt string, yamlToJSON func([]byte) ([]byte, error), kinds ...Kind) {
	t.Helper()
	owned := map[string]bool{}
	var want []Fact
	for _, k := range kinds {
		checkCRD(t, k, yamlToJSON)
		owned[k.Module] = true
		facts, err := Facts(k)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, facts...)
	}
	data, err := os.ReadFile(txt)
	if err != nil && !(os.IsNotExist(err) && os.Getenv("UPDATE_STORAGE_FACTS") == "1") {
		t.Fatal(err)
	}
	var header []string
	type line struct {
		no   int
		fact Fact
	}
	var lines []line
	inHeader := true
	for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if inHeader && len(data) > 0 {
				header = append(header, l)
			}
			continue
		}
		inHeader = false
		cols := strings.Fields(trimmed)
		if len(cols) != 5 || (cols[3] != Dropped && cols[3] != ZeroIsAbsent) {
			t.Errorf("%s:%d: %q: want <module>@<version> <Kind> <group/version> dropped|zero-is-absent <path>", txt, i+1, l)
			continue
		}
		lines = append(lines, line{i + 1, Fact{cols[0], cols[1], cols[2], cols[3], cols[4]}})
	}

	if os.Getenv("UPDATE_STORAGE_FACTS") == "1" {
		all := append([]Fact(nil), want...)
		for _, l := range lines {
			if !owned[l.fact.Module] {
				all = append(all, l.fact)
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].less(all[j]) })
		var b bytes.Buffer
		for _, h := range header {
			b.WriteString(h + "\n")
		}
		for i, f := range all {
			if i > 0 && f == all[i-1] {
				continue
			}
			b.WriteString(f.String() + "\n")
		}
		if err := os.WriteFile(txt, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: wrote %d lines of %d releases", txt, len(want), len(owned))
		return
	}

	wanted := map[Fact]bool{}
	for _, f := range want {
		wanted[f] = true
	}
	seen := map[Fact]int{}
	for i, l := range lines {
		if i > 0 && !lines[i-1].fact.less(l.fact) {
			t.Errorf("%s:%d: %s: not after the line before it (sorted, no duplicates; UPDATE_STORAGE_FACTS=1 rewrites the file)", txt, l.no, l.fact)
		}
		if !owned[l.fact.Module] {
			continue
		}
		seen[l.fact] = l.no
		if !wanted[l.fact] {
			t.Errorf("%s:%d: %s: not what the Go types say (UPDATE_STORAGE_FACTS=1 rewrites the file)", txt, l.no, l.fact)
		}
	}
	for _, f := range want {
		if _, ok := seen[f]; !ok {
			t.Errorf("%s: no line %q, which the Go types say (UPDATE_STORAGE_FACTS=1 rewrites the file)", txt, f)
		}
	}
}

// ModuleDir is the folder of module@version, downloaded first (`go mod download -json`, as
// ../hack/go-modules.sh reads a module's folder).
func ModuleDir(t *testing.T, release string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", release).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", release, err)
	}
	var d struct{ Dir, Error string }
	if err := json.Unmarshal(out, &d); err != nil || d.Dir == "" {
		t.Fatalf("go mod download %s: no folder (%v %s)", release, err, d.Error)
	}
	return d.Dir
}

// checkCRD: the served versions of k's CRD are k.Storage and k.Older, its storage version
// k.Storage, and its kind k.Kind.
func checkCRD(t *testing.T, k Kind, yamlToJSON func([]byte) ([]byte, error)) {
	t.Helper()
	file := filepath.Join(ModuleDir(t, k.Module), k.CRD)
	y, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yamlToJSON(y)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var crd struct {
		Spec struct {
			Group    string
			Names    struct{ Kind string }
			Versions []struct {
				Name            string
				Served, Storage bool
			}
		}
	}
	if err := json.Unmarshal(j, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var served, storage, want []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
		if v.Storage {
			storage = append(storage, v.Name)
		}
	}
	want = append(want, k.Storage.Name)
	for _, v := range k.Older {
		want = append(want, v.Name)
	}
	sort.Strings(served)
	sort.Strings(want)
	if crd.Spec.Group != k.Group || crd.Spec.Names.Kind != k.Kind || !reflect.DeepEqual(served, want) ||
		!reflect.DeepEqual(storage, []string{k.Storage.Name}) {
		t.Errorf("%s@%s: %s.%s serves %v and stores %v; the test says %s.%s, served %v, stored %s",
			k.Module, k.CRD, crd.Spec.Names.Kind, crd.Spec.Group, served, storage, k.Kind, k.Group, want, k.Storage.Name)
	}
}

// Convert sends obj (an object of any served version, with apiVersion and kind) through a
// conversion webhook handler as kube-apiserver does (a ConversionReview, apiextensions.k8s.io/v1)
// and returns the converted object.
func Convert(t *testing.T, handler http.Handler, obj any, desiredAPIVersion string) map[string]any {
	t.Helper()
	review := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "ConversionReview",
		"request": map[string]any{
			"uid":               "00000000-0000-0000-0000-000000000001",
			"desiredAPIVersion": desiredAPIVersion,
			"objects":           []any{obj},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	var resp struct {
		Response struct {
			Result struct {
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"result"`
			ConvertedObjects []map[string]any `json:"convertedObjects"`
		} `json:"response"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("conversion to %s: HTTP %d, %v: %s", desiredAPIVersion, rec.Code, err, rec.Body.String())
	}
	if resp.Response.Result.Status != "Success" || len(resp.Response.ConvertedObjects) != 1 {
		t.Fatalf("conversion to %s: %s %s", desiredAPIVersion, resp.Response.Result.Status, resp.Response.Result.Message)
	}
	return resp.Response.ConvertedObjects[0]
}

// ConversionDataAnnotation is CAPI's utilconversion.DataAnnotation.
const ConversionDataAnnotation = "cluster.x-k8s.io/conversion-data"

// CheckConversionData converts hub (an object of the storage version) to the older version
// olderAPIVersion through handler, as a read through the older version does, and checks
// what CAPI's utilconversion leaves: the annotation holds the hub object's JSON with its
// apiVersion and kind, without metadata. It then converts the result back (a write through
// the older version that kept the annotation) and checks that the hub object does not
// carry it.
func CheckConversionData(t *testing.T, handler http.Handler, hub any, olderAPIVersion string) {
	t.Helper()
	hubJSON, err := json.Marshal(hub)
	if err != nil {
		t.Fatal(err)
	}
	var hubMap map[string]any
	if err := json.Unmarshal(hubJSON, &hubMap); err != nil {
		t.Fatal(err)
	}
	older := Convert(t, handler, hubMap, olderAPIVersion)
	annotations, _ := older["metadata"].(map[string]any)["annotations"].(map[string]any)
	data, ok := annotations[ConversionDataAnnotation].(string)
	if !ok {
		t.Fatalf("%s %s read as %s: no %s annotation: %v", hubMap["kind"], hubMap["apiVersion"], olderAPIVersion, ConversionDataAnnotation, older["metadata"])
	}
	var held map[string]any
	if err := json.Unmarshal([]byte(data), &held); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", ConversionDataAnnotation, err, data)
	}
	if held["apiVersion"] != hubMap["apiVersion"] || held["kind"] != hubMap["kind"] {
		t.Errorf("%s holds apiVersion %v, kind %v; want %v, %v", ConversionDataAnnotation, held["apiVersion"], held["kind"], hubMap["apiVersion"], hubMap["kind"])
	}
	if _, ok := held["metadata"]; ok {
		t.Errorf("%s holds metadata: %s", ConversionDataAnnotation, data)
	}
	if !reflect.DeepEqual(held["spec"], hubMap["spec"]) {
		t.Errorf("%s holds spec %v, want the hub's %v", ConversionDataAnnotation, held["spec"], hubMap["spec"])
	}
	t.Logf("%s read as %s carries %s: %s", hubMap["kind"], olderAPIVersion, ConversionDataAnnotation, data)

	back := Convert(t, handler, older, hubMap["apiVersion"].(string))
	if a, _ := back["metadata"].(map[string]any)["annotations"].(map[string]any); a != nil {
		if _, ok := a[ConversionDataAnnotation]; ok {
			t.Errorf("%s written back as %s still carries %s", hubMap["kind"], hubMap["apiVersion"], ConversionDataAnnotation)
		}
	}
}
