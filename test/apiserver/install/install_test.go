package install

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/config"
)

// The LocalQueue CRD is Kueue's own file, read from the sigs.k8s.io/kueue
// module at the version go.mod requires and with the hash go.sum pins, and
// it defines the kind of Kueue's own API types.
func TestLocalQueueCRDComesFromTheKueueModule(t *testing.T) {
	m, err := DownloadModule(KueueModule)
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(moduleDir(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "\t" + KueueModule + " " + m.Version + "\n"; !strings.Contains(string(goMod), want) {
		t.Errorf("go.mod does not require %s %s", KueueModule, m.Version)
	}
	goSum, err := os.ReadFile(filepath.Join(moduleDir(), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if want := KueueModule + " " + m.Version + " " + m.Sum + "\n"; m.Sum == "" || !strings.Contains(string(goSum), want) {
		t.Errorf("go.sum does not pin %s %s to %q", KueueModule, m.Version, m.Sum)
	}
	crd, err := Read(LocalQueueCRD)
	if err != nil {
		t.Fatal(err)
	}
	lq := kueue.GroupVersion.WithKind("LocalQueue")
	if crd.GetName() != "localqueues."+lq.Group {
		t.Errorf("CRD name %q, want localqueues.%s", crd.GetName(), lq.Group)
	}
	if kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind"); kind != lq.Kind {
		t.Errorf("CRD kind %q, want %s", kind, lq.Kind)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var served []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["served"] == true {
			served = append(served, fmt.Sprint(m["name"]))
		}
	}
	if !slices.Contains(served, lq.Version) {
		t.Errorf("served versions %v lack %s", served, lq.Version)
	}
}

// The ModelDeployment schema's enums are the values docs/operator.md records
// with their citations (its "Schema enums" table), field by field; every
// enum of the schema has its row there; and the suite's own spellings are
// the recorded ones, so the objects it writes are the ones the schema admits.
func TestModelDeploymentEnumsAreTheDocumentedOnes(t *testing.T) {
	documented := documentedEnums(t)
	crd, err := Read(ModelDeploymentCRD)
	if err != nil {
		t.Fatal(err)
	}
	root := "spec.versions.0.schema.openAPIV3Schema"
	inCRD := map[string][]string{}
	collectEnums(mapAt(t, crd, root), "", inCRD)
	for field, want := range documented {
		if got, ok := inCRD[field]; !ok {
			t.Errorf("%s: docs/operator.md records an enum the CRD does not have", field)
		} else if !slices.Equal(got, want) {
			t.Errorf("%s: the CRD admits %v, docs/operator.md records %v", field, got, want)
		}
	}
	for field, got := range inCRD {
		if _, ok := documented[field]; !ok {
			t.Errorf("%s: the CRD has enum %v, which docs/operator.md#schema-enums does not record", field, got)
		}
	}
	for field, suite := range map[string][]string{
		"spec.engine.name": api.Engines, "spec.router.name": api.Routers, "spec.roles[].kind": api.RoleKinds,
	} {
		if !slices.Equal(suite, documented[field]) {
			t.Errorf("%s: the suite's api package spells %v, docs/operator.md records %v", field, suite, documented[field])
		}
	}
	if crd.GetName() != api.Resource+"."+api.Group {
		t.Errorf("CRD name %q, want %s.%s", crd.GetName(), api.Resource, api.Group)
	}
}

// enumRow is a row of docs/operator.md's "Schema enums" table:
// | `field` | `a`, `b` | source |.
var enumRow = regexp.MustCompile("^\\| `([^`]+)` \\| ((?:`[^`]+`(?:, )?)+) \\|")

// documentedEnums reads the "Schema enums" table of docs/operator.md.
func documentedEnums(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleDir(), "..", "..", filepath.FromSlash("docs/operator.md")))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Schema enums\n")
	if !ok {
		t.Fatal("docs/operator.md has no \"## Schema enums\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string][]string{}
	for line := range strings.SplitSeq(section, "\n") {
		m := enumRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var values []string
		for v := range strings.SplitSeq(m[2], ", ") {
			values = append(values, strings.Trim(v, "`"))
		}
		out[m[1]] = values
	}
	if len(out) < 5 {
		t.Fatalf("read %d rows from docs/operator.md's Schema enums table: %v", len(out), out)
	}
	return out
}

// collectEnums records every enum under schema, keyed by field path
// ("spec.roles[].kind").
func collectEnums(schema map[string]any, path string, out map[string][]string) {
	if e, ok := schema["enum"].([]any); ok {
		for _, v := range e {
			out[path] = append(out[path], fmt.Sprint(v))
		}
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, p := range props {
			if m, ok := p.(map[string]any); ok {
				collectEnums(m, strings.TrimPrefix(path+"."+name, "."), out)
			}
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		collectEnums(items, path+"[]", out)
	}
}

// status.entrance is the operator's LocalQueue name for the InstanceType's
// ClusterQueue: "gpustack-fnv64-" and the FNV-64a of the name in 16 hex digits.
func TestInstanceTypeEntranceIsTheOperatorsQueueName(t *testing.T) {
	it, err := Read(SimInstanceType)
	if err != nil {
		t.Fatal(err)
	}
	if it.GetName() != config.SimInstanceType {
		t.Errorf("InstanceType %q, want the sim's %q", it.GetName(), config.SimInstanceType)
	}
	h := fnv.New64a()
	h.Write([]byte(it.GetName()))
	want := fmt.Sprintf("gpustack-fnv64-%016x", h.Sum64())
	got, _, _ := unstructured.NestedString(it.Object, "status", "entrance")
	if got != want || len(got) != 31 {
		t.Errorf("status.entrance = %q, want %q (31 characters)", got, want)
	}
	if accel, _, _ := unstructured.NestedBool(it.Object, "spec", "acceleratable"); !accel {
		t.Error("spec.acceleratable is not true")
	}
	if phase, _, _ := unstructured.NestedString(it.Object, "status", "phase"); phase != "Active" {
		t.Errorf("status.phase = %q, want Active", phase)
	}
}

// mapAt reads the object at a dotted path whose numeric parts index lists.
func mapAt(t *testing.T, u *unstructured.Unstructured, path string) map[string]any {
	t.Helper()
	var cur any = u.Object
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[part]
		case []any:
			var i int
			if _, err := fmt.Sscan(part, &i); err != nil || i >= len(c) {
				t.Fatalf("%s: bad index %q", path, part)
			}
			cur = c[i]
		default:
			t.Fatalf("%s: nothing at %q", path, part)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", path)
	}
	return m
}
