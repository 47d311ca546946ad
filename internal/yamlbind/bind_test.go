package yamlbind

import (
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

type common struct {
	Name string `json:"name"`
	Note string `json:"note,omitempty"`
}

type shape struct {
	Kind string `json:"kind"`
}

func (s shape) Check() []string {
	if s.Kind != "even" && s.Kind != "one" {
		return []string{"kind " + s.Kind + " is not one of even, one"}
	}
	return nil
}

type own struct {
	Shape shape `json:"shape"`
	Count int   `json:"count,omitempty"`
}

// row is a common part embedded beside a claim's own fields inlined, as
// expect.yaml rows are bound.
type row struct {
	common
	Own  own       `json:",inline"`
	Rest yaml.Node `json:"rest,omitempty"`
}

func bind(t *testing.T, doc string, d *Decoder) row {
	t.Helper()
	root, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var r row
	d.Decode(root, &r, "rows[0]")
	return r
}

func TestEmbeddedAndInlineFieldsAreKeysOfTheirParent(t *testing.T) {
	d := &Decoder{Required: RequiredUnlessOmitempty}
	r := bind(t, "name: a\nshape: {kind: even}\ncount: 3\nrest: {anything: [1, 2]}\n", d)
	if len(d.Errs) > 0 || r.Name != "a" || r.Own.Shape.Kind != "even" || r.Own.Count != 3 || r.Rest.Kind != yaml.MappingNode {
		t.Fatalf("row %+v, errors %q", r, d.Errs)
	}
}

func TestStrictBindingNamesThePathAndLine(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"unknown":  {"name: a\nshape: {kind: even}\nshap: x\n", "rows[0].shap is not a known field; known fields here: count, name, note, rest, shape (line 3)"},
		"required": {"name: a\n", "rows[0].shape must be set (line 1)"},
		"checked":  {"name: a\nshape: {kind: half}\n", "rows[0].shape: kind half is not one of even, one (line 2)"},
		"twice":    {"name: a\nname: b\nshape: {kind: one}\n", "rows[0].name is set twice (line 2)"},
		"type":     {"name: 0.10\nshape: {kind: one}\n", `rows[0].name expected a string, got the number 0.10 (quote it: "0.10") (line 1)`},
	} {
		t.Run(name, func(t *testing.T) {
			d := &Decoder{Required: RequiredUnlessOmitempty}
			bind(t, c.doc, d)
			if got := strings.Join(d.Errs, "\n"); !strings.Contains(got, c.want) {
				t.Errorf("errors %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestLenientBindingSkipsUnknownKeysAndRequiresNothingUnasked(t *testing.T) {
	d := &Decoder{IgnoreUnknown: true}
	r := bind(t, "name: a\nsomething: else\n", d)
	if len(d.Errs) > 0 || r.Name != "a" {
		t.Errorf("row %+v, errors %q", r, d.Errs)
	}
}
