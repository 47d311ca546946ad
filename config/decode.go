package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The YAML is parsed into a node tree by yaml.v3 and bound to the Go types
// here, rather than with yaml.Unmarshal, so that every error can name the
// field path (routers[1].name), the line and the expected type. The binding
// is strict: unknown keys, duplicate keys, wrong scalar types and merge keys
// are errors (what yaml.v3's KnownFields(true) refuses, and more: a number
// where a string is expected is refused too, so a version 0.10 is not read
// as "0.1").

// nodeDecoder is implemented by types that bind themselves (Duration, Interval).
type nodeDecoder interface {
	decodeNode(n *yaml.Node, path string) error
}

// decoder binds a node tree and records the line of every path it visits so
// that validation errors found later can point at the file position too.
type decoder struct {
	lines map[string]int
	errs  []string
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + " " + msg
	}
	if n != nil && n.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", n.Line)
	}
	d.errs = append(d.errs, msg)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		return // key: with no value keeps the zero (or default) value
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if v.CanAddr() {
		if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
			if err := nd.decodeNode(n, path); err != nil {
				d.fail(n, path, "%v", err)
			}
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", describe(n))
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
			d.fail(n, path, "expected a string, got %s%s", describe(n), quoteHint(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, v.Type().Bits())
		if err != nil {
			d.fail(n, path, "expected an integer that fits in %d bits, got %s", v.Type().Bits(), n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") {
			d.fail(n, path, "expected a number, got %s", describe(n))
			return
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), v.Type().Bits())
		if err != nil {
			d.fail(n, path, "expected a number, got %s", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.fail(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	default:
		d.fail(n, path, "has unsupported Go type %s (a bug in package config)", v.Type())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping with keys %s, got %s", strings.Join(fieldNames(v.Type()), ", "), describe(n))
		return
	}
	fields := map[string]int{}
	for i := 0; i < v.NumField(); i++ {
		if name := fieldName(v.Type().Field(i)); name != "" {
			fields[name] = i
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		child := join(path, key)
		if k.Tag == "!!merge" {
			d.fail(k, child, "is a YAML merge key, which this file does not support; write the keys out")
			continue
		}
		if seen[key] {
			d.fail(k, child, "is set twice")
			continue
		}
		seen[key] = true
		idx, ok := fields[key]
		if !ok {
			d.fail(k, child, "is not a known field; known fields here: %s", strings.Join(fieldNames(v.Type()), ", "))
			continue
		}
		d.decode(val, v.Field(idx), child)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.fail(n, path, "has unsupported key type %s (a bug in package config)", v.Type().Key())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		child := join(path, k.Value)
		if k.Tag == "!!merge" {
			d.fail(k, child, "is a YAML merge key, which this file does not support; write the keys out")
			continue
		}
		key := reflect.ValueOf(k.Value).Convert(v.Type().Key())
		if v.MapIndex(key).IsValid() && d.lines[child] != 0 {
			d.fail(k, child, "is set twice")
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(key); old.IsValid() {
			elem.Set(old) // start from the default so a partial entry overrides it
		}
		d.decode(val, elem, child)
		d.lines[child] = k.Line
		v.SetMapIndex(key, elem)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names a node's YAML type for error messages.
func describe(n *yaml.Node) string {
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

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if name := fieldName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
