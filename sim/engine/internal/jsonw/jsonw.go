// Package jsonw appends JSON the way the engines' Python servers emit it:
// compact separators, non-ASCII text raw (Starlette's JSONResponse uses
// ensure_ascii=False; pydantic and orjson never escape it), and floats as
// Python's repr ("0.0", "1e-05"). The engines build their bodies with it so
// the hot path has no reflection and no intermediate maps.
package jsonw

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String appends s as a JSON string.
func String(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Int appends an integer.
func Int(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) }

// Float appends f as Python's json.dumps would (repr; NaN/Infinity as Python
// writes them).
func Float(dst []byte, f float64) []byte { return append(dst, PyRepr(f)...) }

// Bool appends true or false.
func Bool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// NullOrString appends null for "" and the JSON string otherwise.
func NullOrString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return String(dst, s)
}

// PyRepr is Python's repr(float): the shortest round-tripping digits, fixed
// notation with a trailing ".0" when the decimal exponent is in [-4, 16),
// scientific notation ("1e+16", "1.5e-05") otherwise.
func PyRepr(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "Infinity"
	case math.IsInf(d, -1):
		return "-Infinity"
	case math.IsNaN(d):
		return "NaN"
	case d == 0:
		if math.Signbit(d) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(d, 'e', -1, 64)
	i := strings.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= 16 {
		return e // Go's 'e' form already matches Python's (two-digit exponent minimum)
	}
	f := strconv.FormatFloat(d, 'f', -1, 64)
	if !strings.ContainsRune(f, '.') {
		f += ".0"
	}
	return f
}
