package httpx

import (
	"strconv"
	"strings"
)

// serde_json's syntax errors, as axum's Json extractor reports them: the
// first error a parse of the body meets, with serde_json's wording and its
// "at line L column C" (serde_json src/read.rs SliceRead position and
// peek_position: a column counts the bytes since the last newline up to
// the last consumed byte, or up to and including the peeked one for the
// errors raised on a peek; src/de.rs, src/error.rs ErrorCode).
// Type errors, which a typed request raises first when they come before a
// syntax error, are not emulated.

// serdeSyntax reports the syntax error in b's first value, if any, with
// the path to where it is (serde_path_to_error, which axum's extractor
// wraps the deserializer in: "model: EOF while parsing a value at ...").
// Without one, end is where the value ends (a data error such as a
// missing field is reported there, serde_json's fix_position), and
// trailing is the error for what follows it, if anything: serde_json
// checks that only once the value deserialized.
func serdeSyntax(b []byte) (msg string, end int, trailing string) {
	p := &serdeParser{b: b}
	if err := p.value(); err != "" {
		return p.withPath(err), 0, ""
	}
	end = p.i
	if p.skipSpace() {
		trailing = p.peekErr("trailing characters")
	}
	return "", end, trailing
}

// withPath prefixes msg with the path of the value being parsed, as
// serde_path_to_error's Display does (nothing at the top level).
func (p *serdeParser) withPath(msg string) string {
	if len(p.path) == 0 {
		return msg
	}
	var b strings.Builder
	for i, seg := range p.path {
		switch {
		case seg.key == nil:
			b.WriteString("[" + strconv.Itoa(seg.index) + "]")
		case i > 0:
			b.WriteString("." + *seg.key)
		default:
			b.WriteString(*seg.key)
		}
	}
	return b.String() + ": " + msg
}

// segment is one step of a path: a map key, or a sequence index.
type segment struct {
	key   *string
	index int
}

// serdePosition is "line L column C" after consuming n bytes of b.
func serdePosition(b []byte, n int) string {
	line, col := 1, 0
	for _, c := range b[:n] {
		if c == '\n' {
			line, col = line+1, 0
		} else {
			col++
		}
	}
	return "line " + strconv.Itoa(line) + " column " + strconv.Itoa(col)
}

type serdeParser struct {
	b    []byte
	i    int
	path []segment
}

// skipSpace skips whitespace and reports whether a byte follows.
func (p *serdeParser) skipSpace() bool {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\n', '\t', '\r':
			p.i++
		default:
			return true
		}
	}
	return false
}

// peekErr is an error raised on the next byte (peek_error).
func (p *serdeParser) peekErr(msg string) string {
	return msg + " at " + serdePosition(p.b, min(len(p.b), p.i+1))
}

// err is an error raised after the consumed bytes (error).
func (p *serdeParser) err(msg string) string { return msg + " at " + serdePosition(p.b, p.i) }

func (p *serdeParser) value() string {
	if !p.skipSpace() {
		return p.peekErr("EOF while parsing a value")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		return p.object()
	case c == '[':
		p.i++
		return p.list()
	case c == '"':
		p.i++
		return p.str()
	case c == 't':
		return p.ident("true")
	case c == 'f':
		return p.ident("false")
	case c == 'n':
		return p.ident("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return p.peekErr("expected value")
}

func (p *serdeParser) object() string {
	return p.container('}', "an object", func() string {
		if p.b[p.i] != '"' {
			return p.peekErr("key must be a string")
		}
		p.i++
		start := p.i
		if e := p.str(); e != "" {
			return e
		}
		key := string(p.b[start : p.i-1])
		if !p.skipSpace() {
			return p.peekErr("EOF while parsing an object")
		}
		if p.b[p.i] != ':' {
			return p.peekErr("expected `:`")
		}
		p.i++
		p.path = append(p.path, segment{key: &key})
		if e := p.value(); e != "" {
			return e
		}
		p.path = p.path[:len(p.path)-1]
		return ""
	})
}

func (p *serdeParser) list() string {
	n := 0
	return p.container(']', "a list", func() string {
		p.path = append(p.path, segment{index: n})
		n++
		if e := p.value(); e != "" {
			return e
		}
		p.path = p.path[:len(p.path)-1]
		return ""
	})
}

// container parses an object's or a list's rest, after its opening
// bracket: elements separated by commas up to end, each parsed by elem
// from its first byte (serde_json's MapAccess and SeqAccess).
func (p *serdeParser) container(end byte, what string, elem func() string) string {
	for first := true; ; first = false {
		if !p.skipSpace() {
			return p.peekErr("EOF while parsing " + what)
		}
		switch c := p.b[p.i]; {
		case c == end:
			p.i++
			return ""
		case c == ',' && !first:
			p.i++
			if !p.skipSpace() {
				return p.peekErr("EOF while parsing a value")
			}
			if p.b[p.i] == end {
				return p.peekErr("trailing comma")
			}
		case !first:
			return p.peekErr("expected `,` or `" + string(end) + "`")
		}
		if e := elem(); e != "" {
			return e
		}
	}
}

// str parses a string's rest, after its opening quote.
func (p *serdeParser) str() string {
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '"':
			return ""
		case c == '\\':
			if p.i >= len(p.b) {
				return p.err("EOF while parsing a string")
			}
			e := p.b[p.i]
			p.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					if p.i >= len(p.b) {
						return p.err("EOF while parsing a string")
					}
					if !isHex(p.b[p.i]) {
						p.i++
						return p.err("invalid escape")
					}
					p.i++
				}
			default:
				return p.err("invalid escape")
			}
		case c < 0x20:
			return p.err("control character (\\u0000-\\u001F) found while parsing a string")
		}
	}
	return p.err("EOF while parsing a string")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// ident parses true, false or null.
func (p *serdeParser) ident(word string) string {
	p.i++
	for _, want := range []byte(word[1:]) {
		if p.i >= len(p.b) {
			return p.err("EOF while parsing a value")
		}
		got := p.b[p.i]
		p.i++
		if got != want {
			return p.err("expected ident")
		}
	}
	return ""
}

// number parses a JSON number.
func (p *serdeParser) number() string {
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.b) {
		return p.err("EOF while parsing a value")
	}
	// someDigits reads one or more digits, else the error serde_json gives.
	someDigits := func() string {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		switch {
		case n > 0:
			return ""
		case p.i >= len(p.b):
			return p.err("EOF while parsing a value")
		}
		p.i++
		return p.err("invalid number")
	}
	if p.b[p.i] == '0' {
		p.i++
	} else if e := someDigits(); e != "" {
		return e
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if e := someDigits(); e != "" {
			return e
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if e := someDigits(); e != "" {
			return e
		}
	}
	return ""
}
