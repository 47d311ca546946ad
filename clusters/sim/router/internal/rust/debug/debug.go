// Package debug renders values the way Rust's `{:?}` (Debug) does, for the
// routers' startup banners (docs/routers.md#debug-forms): floats in their
// shortest form with ".0" kept on whole numbers, quoted strings, Vec and
// Option.
//
// This writer and the suite's parser of the same forms
// (assertions/rustdebug) are independent on purpose: each is written from
// Rust's behaviour, not from the other, so a mistake in one is caught by the
// other instead of agreed with. Do not share code between them.
package debug

import (
	"math"
	"strconv"
	"strings"
)

// Float is Debug for an f32 (bits 32) or f64 (bits 64): shortest digits that
// round-trip, ".0" on whole numbers, exponent form outside [1e-4, 1e16).
func Float(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return Shortest(f, bits, 1e-4)
}

// Shortest is a finite float in its shortest round-trip digits, ".0" on
// whole numbers, and in exponent form ("1e-7", "1.5e16") outside
// [plainFrom, 1e16): Rust's Debug uses 1e-4, serde_json (ryu) 1e-5.
func Shortest(f float64, bits int, plainFrom float64) string {
	abs := math.Abs(f)
	if abs != 0 && (abs < plainFrom || abs >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, bits)
		mant, exp, _ := strings.Cut(s, "e")
		neg := strings.HasPrefix(exp, "-")
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if exp == "" {
			exp = "0"
		}
		if neg {
			exp = "-" + exp
		}
		return mant + "e" + exp
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// F32 is Debug for an f32.
func F32(f float32) string { return Float(float64(f), 32) }

// Str is Debug for a &str/String: double-quoted with Rust's escapes.
func Str(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
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
				b.WriteString(`\u{` + strconv.FormatInt(int64(r), 16) + `}`)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// StrVec is Debug for a Vec<String>: ["a", "b"].
func StrVec(v []string) string {
	parts := make([]string, len(v))
	for i, s := range v {
		parts[i] = Str(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Vec is Debug for a Vec whose items are already rendered.
func Vec(items []string) string { return "[" + strings.Join(items, ", ") + "]" }

// Option is Debug for an Option whose Some value is already rendered.
func Option(rendered string, some bool) string {
	if !some {
		return "None"
	}
	return "Some(" + rendered + ")"
}

// OptionWith is Debug for an Option whose Some value render renders.
func OptionWith(v *string, render func(string) string) string {
	if v == nil {
		return "None"
	}
	return "Some(" + render(*v) + ")"
}
