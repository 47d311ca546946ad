// Package yamlbind binds a YAML node tree (yaml.v3) to Go values strictly,
// so that every error can name the field path (routers[1].name), the line
// and what was expected. Unknown keys, duplicate keys, wrong scalar types
// and merge keys are errors (what yaml.v3's KnownFields(true) refuses, and
// more: a number where a string is expected is refused too, so a version
// 0.10 is not read as "0.1"). Fields are named by their json tag, as the
// rest of the project writes them out.
//
// e2e.yaml (package config) and fixtures/expect.yaml (package fixtures)
// are read with it.
package yamlbind

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// NodeDecoder is implemented by types that bind themselves (a duration
// written "30s", an interval written [timeout, poll]).
type NodeDecoder interface {
	DecodeYAMLNode(n *yaml.Node) error
}

// Checker is implemented by values that know what makes them consistent:
// after a value is bound, each message Check returns is an error at the
// value's path ("path: message (line N)").
type Checker interface {
	Check() []string
}

// Decoder binds node trees and records the line of every path it visits,
// so that errors found later can point at the file position too.
type Decoder struct {
	// Lines maps each visited path to its line; nil: not recorded.
	Lines map[string]int
	// Required reports whether a struct field must be present in the
	// mapping that binds its struct; nil: no field is required.
	Required func(reflect.StructField) bool
	// IgnoreUnknown skips keys no field names instead of failing on them.
	IgnoreUnknown bool
	// Errs are the problems found, in the order met.
	Errs []string
}

// RequiredUnlessOmitempty is a Required that makes every field without
// ",omitempty" in its json tag required.
func RequiredUnlessOmitempty(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return !strings.Contains(","+opts+",", ",omitempty,")
}

// Decode binds n to the value v points to; path names n in errors ("" for
// the document root).
func (d *Decoder) Decode(n *yaml.Node, v any, path string) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		d.Errs = append(d.Errs, fmt.Sprintf("yamlbind: Decode needs a non-nil pointer, got %T", v))
		return
	}
	d.decode(n, rv.Elem(), path)
}

// Fail records a problem at n's path, with its line.
func (d *Decoder) Fail(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + " " + msg
	}
	if n != nil && n.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", n.Line)
	}
	d.Errs = append(d.Errs, msg)
}

var nodeType = reflect.TypeFor[yaml.Node]()

func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" && d.Lines != nil {
		d.Lines[path] = n.Line
	}
	if v.Type() == nodeType {
		v.Set(reflect.ValueOf(*n)) // bound later, by whoever knows its type
		return
	}
	if IsNull(n) {
		return // key: with no value keeps the zero (or default) value
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	defer d.check(n, v, path)
	if v.CanAddr() {
		if nd, ok := v.Addr().Interface().(NodeDecoder); ok {
			if err := nd.DecodeYAMLNode(n); err != nil {
				d.Fail(n, path, "%v", err)
			}
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.Fail(n, path, "expected a list, got %s", Describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.Fail(n, path, "expected a string, got %s%s", Describe(n), quoteHint(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.Fail(n, path, "expected an integer, got %s", Describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, v.Type().Bits())
		if err != nil {
			d.Fail(n, path, "expected an integer that fits in %d bits, got %s", v.Type().Bits(), n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") {
			d.Fail(n, path, "expected a number, got %s", Describe(n))
			return
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), v.Type().Bits())
		if err != nil {
			d.Fail(n, path, "expected a number, got %s", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.Fail(n, path, "expected true or false, got %s", Describe(n))
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	default:
		d.Fail(n, path, "has unsupported Go type %s (a bug in the caller of package yamlbind)", v.Type())
	}
}

// check runs a bound value's Check, if it has one.
func (d *Decoder) check(n *yaml.Node, v reflect.Value, path string) {
	if !v.CanAddr() {
		return
	}
	c, ok := v.Addr().Interface().(Checker)
	if !ok {
		return
	}
	for _, msg := range c.Check() {
		where := path
		if where == "" {
			where = "document"
		}
		line := ""
		if n.Line > 0 {
			line = fmt.Sprintf(" (line %d)", n.Line)
		}
		d.Errs = append(d.Errs, fmt.Sprintf("%s: %s%s", where, msg, line))
	}
}

// field is one key a struct binds: the index path to its Go field (through
// embedded and inline structs) and the field itself.
type field struct {
	index []int
	sf    reflect.StructField
}

// fields lists the keys of a struct type: its fields by json name, with
// the fields of embedded structs and of fields tagged ",inline" flattened
// in, as encoding/json flattens embedded structs.
func fields(t reflect.Type) map[string]field {
	out := map[string]field{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			idx := append(append([]int(nil), prefix...), i)
			if flattened(f) {
				walk(f.Type, idx)
				continue
			}
			if name := fieldName(f); name != "" {
				if _, dup := out[name]; !dup {
					out[name] = field{index: idx, sf: f}
				}
			}
		}
	}
	walk(t, nil)
	return out
}

// flattened: an embedded struct without a json name, or a struct field
// tagged ",inline".
func flattened(f reflect.StructField) bool {
	if f.Type.Kind() != reflect.Struct {
		return false
	}
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if f.Anonymous && name == "" {
		return true
	}
	return name == "" && strings.Contains(","+opts+",", ",inline,")
}

func (d *Decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	fs := fields(v.Type())
	if n.Kind != yaml.MappingNode {
		d.Fail(n, path, "expected a mapping with keys %s, got %s", strings.Join(names(fs), ", "), Describe(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		child := Join(path, key)
		if k.Tag == "!!merge" {
			d.Fail(k, child, "is a YAML merge key, which this file does not support; write the keys out")
			continue
		}
		if seen[key] {
			d.Fail(k, child, "is set twice")
			continue
		}
		seen[key] = true
		f, ok := fs[key]
		if !ok {
			if !d.IgnoreUnknown {
				d.Fail(k, child, "is not a known field; known fields here: %s", strings.Join(names(fs), ", "))
			}
			continue
		}
		d.decode(val, v.FieldByIndex(f.index), child)
	}
	if d.Required == nil {
		return
	}
	for _, name := range names(fs) {
		if f := fs[name]; !seen[name] && d.Required(f.sf) {
			d.Fail(n, Join(path, name), "must be set")
		}
	}
}

func (d *Decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.Fail(n, path, "expected a mapping, got %s", Describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.Fail(n, path, "has unsupported key type %s (a bug in the caller of package yamlbind)", v.Type().Key())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	set := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		child := Join(path, k.Value)
		if k.Tag == "!!merge" {
			d.Fail(k, child, "is a YAML merge key, which this file does not support; write the keys out")
			continue
		}
		key := reflect.ValueOf(k.Value).Convert(v.Type().Key())
		if set[k.Value] {
			d.Fail(k, child, "is set twice")
			continue
		}
		set[k.Value] = true
		elem := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(key); old.IsValid() {
			elem.Set(old) // start from the default so a partial entry overrides it
		}
		d.decode(val, elem, child)
		if d.Lines != nil {
			d.Lines[child] = k.Line
		}
		v.SetMapIndex(key, elem)
	}
}

// Parse returns the root node of data, a single YAML document whose top
// level is a mapping, or nil for an empty document.
func Parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("holds more than one YAML document (line %d); keep one", extra.Line)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode && !IsNull(root) {
		return nil, fmt.Errorf("expected a mapping at the top level, got %s (line %d)", Describe(root), root.Line)
	}
	return root, nil
}

// Join appends a key to a path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// IsNull reports whether n is YAML's null (a key with no value).
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// Describe names a node's YAML type for error messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return fmt.Sprintf("a list of %d values", len(n.Content))
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int":
			return "the integer " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		}
		return fmt.Sprintf("%s %s", n.Tag, n.Value)
	}
	return "an unsupported YAML node"
}

// quoteHint helps with versions such as 0.10 that YAML reads as numbers.
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" {
		return fmt.Sprintf(" (quote it: %q)", n.Value)
	}
	return ""
}

func fieldName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

func names(fs map[string]field) []string {
	out := make([]string, 0, len(fs))
	for name := range fs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
