// Package rustdebug parses the text Rust's #[derive(Debug)] prints (the `{:?}`
// and `{:#?}` forms) into a value tree, so a router's startup banner
// `policy: CacheAware { cache_threshold: 0.3, ... }` can be checked field by
// field instead of by string equality.
//
// It is independent on purpose of the sim's Debug writer
// (clusters/sim/router/internal/rust/debug): the oracle and the emulator are
// each written from Rust's behaviour, so neither can hide the other's
// mistake. Do not share code between them.
package rustdebug

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the shape of a Value.
type Kind int

// The shapes Debug output takes.
const (
	Ident  Kind = iota // unit struct or enum variant, bool, inf/NaN: RoundRobin, Nixl, true
	Struct             // Name { field: value, ... } (Name may be empty only for a map; see Map)
	Tuple              // Name(a, b) for tuple structs/variants, or (a, b) and () with no name
	List               // [a, b]: Vec, slice, array
	Set                // {a, b}: HashSet, BTreeSet
	Map                // {k: v, ...}: HashMap, BTreeMap
	Some               // Some(x)
	None               // None
	String             // "text", unquoted in Text
	Char               // 'c', unquoted in Text
	Number             // 0.3, 64, -1, 1e-5, or with a unit suffix as Duration prints it: 120s, 1.5ms
)

var kindNames = [...]string{"identifier", "struct", "tuple", "list", "set", "map", "Some", "None", "string", "char", "number"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one node of a parsed Debug form.
type Value struct {
	Kind Kind
	// Name is the struct, tuple-struct or variant name ("CacheAware",
	// "VllmPrefillDecode"); empty for plain tuples, lists, sets and maps.
	Name string
	// Text is an identifier, a number's literal text, or the unquoted
	// contents of a string or char.
	Text string
	// Fields are a struct's fields in printed order.
	Fields []Field
	// Items are the elements of a tuple, list or set, or Some's one value.
	Items []Value
	// Entries are a map's pairs in printed order.
	Entries []Entry
	// NonExhaustive marks a struct printed with a trailing `..`
	// (finish_non_exhaustive).
	NonExhaustive bool
}

// Field is one `name: value` of a struct.
type Field struct {
	Name  string
	Value Value
}

// Entry is one `key: value` of a map.
type Entry struct {
	Key, Value Value
}

// TypeName is what a policy or mode is called: the struct or variant name,
// the identifier of a unit variant, "Some" or "None"; "" for other kinds.
func (v Value) TypeName() string {
	switch v.Kind {
	case Ident:
		return v.Text
	case Struct, Tuple:
		return v.Name
	case Some:
		return "Some"
	case None:
		return "None"
	}
	return ""
}

// Field returns the named field of a struct.
func (v Value) Field(name string) (Value, bool) {
	for _, f := range v.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return Value{}, false
}

// FieldNames lists a struct's field names in printed order.
func (v Value) FieldNames() []string {
	out := make([]string, len(v.Fields))
	for i, f := range v.Fields {
		out[i] = f.Name
	}
	return out
}

// Unwrap returns the value inside Some, and false for None or anything else.
func (v Value) Unwrap() (Value, bool) {
	if v.Kind == Some && len(v.Items) == 1 {
		return v.Items[0], true
	}
	return Value{}, false
}

// Float reads a number (or Rust's inf, -inf, NaN).
func (v Value) Float() (float64, error) {
	switch v.Kind {
	case Number:
		return strconv.ParseFloat(v.Text, 64)
	case Ident:
		switch v.Text {
		case "inf":
			return math.Inf(1), nil
		case "NaN":
			return math.NaN(), nil
		}
	}
	return 0, fmt.Errorf("rustdebug: %s is a %s, not a number", v, v.Kind)
}

// Equal compares two trees exactly; numbers compare by value, so 1.0 equals 1.
func (v Value) Equal(o Value) bool {
	if v.Kind != o.Kind || v.Name != o.Name || v.NonExhaustive != o.NonExhaustive ||
		len(v.Fields) != len(o.Fields) || len(v.Items) != len(o.Items) || len(v.Entries) != len(o.Entries) {
		return false
	}
	if v.Kind == Number {
		a, err1 := v.Float()
		b, err2 := o.Float()
		if err1 == nil && err2 == nil {
			return a == b
		}
	}
	if v.Text != o.Text {
		return false
	}
	for i := range v.Fields {
		if v.Fields[i].Name != o.Fields[i].Name || !v.Fields[i].Value.Equal(o.Fields[i].Value) {
			return false
		}
	}
	for i := range v.Items {
		if !v.Items[i].Equal(o.Items[i]) {
			return false
		}
	}
	for i := range v.Entries {
		if !v.Entries[i].Key.Equal(o.Entries[i].Key) || !v.Entries[i].Value.Equal(o.Entries[i].Value) {
			return false
		}
	}
	return true
}

// Matches compares the value with a Go value the way a test author means it:
//   - a Value: Equal;
//   - nil: None;
//   - a bool: the identifier true/false;
//   - an integer or float: a number (or inf/NaN) of that value, so 0.3 matches
//     `0.3` and 1 matches `1.0`;
//   - a string: a string or char with that content, an identifier or variant
//     name of that name, or the value's Debug text (e.g. "Some(RoundRobin)",
//     "[]").
func (v Value) Matches(want any) bool {
	switch w := want.(type) {
	case Value:
		return v.Equal(w)
	case nil:
		return v.Kind == None
	case bool:
		return v.Kind == Ident && v.Text == strconv.FormatBool(w)
	case string:
		switch v.Kind {
		case String, Char:
			return v.Text == w
		case Ident:
			if v.Text == w {
				return true
			}
		case Number:
			if f, err := strconv.ParseFloat(w, 64); err == nil {
				return v.Matches(f)
			}
		}
		return v.String() == w || normalizeSpace(v.String()) == normalizeSpace(w)
	}
	f, ok := toFloat(want)
	if !ok {
		return false
	}
	got, err := v.Float()
	if err != nil {
		return false
	}
	if math.IsNaN(f) {
		return math.IsNaN(got)
	}
	return got == f
}

func toFloat(x any) (float64, bool) {
	switch n := x.(type) {
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float32:
		// 0.3 as float32 is not 0.3 as float64; compare at float32 precision.
		f, err := strconv.ParseFloat(strconv.FormatFloat(float64(n), 'g', -1, 32), 64)
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// MarshalText writes the Debug form, so a Value in a report reads as the
// router printed it.
func (v Value) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText parses a Debug form.
func (v *Value) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// String renders the value back in Rust's single-line Debug form.
func (v Value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v Value) write(b *strings.Builder) {
	switch v.Kind {
	case Ident, Number:
		b.WriteString(v.Text)
	case String:
		b.WriteString(quote(v.Text, '"'))
	case Char:
		b.WriteString(quote(v.Text, '\''))
	case None:
		b.WriteString("None")
	case Some:
		b.WriteString("Some")
		writeItems(b, "(", v.Items, ")")
	case Tuple:
		b.WriteString(v.Name)
		writeItems(b, "(", v.Items, ")")
	case List:
		writeItems(b, "[", v.Items, "]")
	case Set:
		writeItems(b, "{", v.Items, "}")
	case Map:
		b.WriteByte('{')
		for i, e := range v.Entries {
			if i > 0 {
				b.WriteString(", ")
			}
			e.Key.write(b)
			b.WriteString(": ")
			e.Value.write(b)
		}
		b.WriteByte('}')
	case Struct:
		b.WriteString(v.Name)
		if len(v.Fields) == 0 && !v.NonExhaustive {
			b.WriteString(" {}") // keeps it apart from the unit variant `Name`
			return
		}
		b.WriteString(" { ")
		for i, f := range v.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name)
			b.WriteString(": ")
			f.Value.write(b)
		}
		if v.NonExhaustive {
			if len(v.Fields) > 0 {
				b.WriteString(", ")
			}
			b.WriteString("..")
		}
		b.WriteString(" }")
	}
}

func writeItems(b *strings.Builder, open string, items []Value, close string) {
	b.WriteString(open)
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		it.write(b)
	}
	b.WriteString(close)
}

// quote writes Rust's escape_debug form closely enough to read back.
func quote(s string, q rune) string {
	var b strings.Builder
	b.WriteRune(q)
	for _, r := range s {
		switch r {
		case q, '\\':
			b.WriteRune('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case 0:
			b.WriteString(`\0`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u{%x}`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteRune(q)
	return b.String()
}
