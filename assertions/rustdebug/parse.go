package rustdebug

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDepth bounds nesting; real Debug forms are a few levels deep, and a
// bound keeps hostile input from growing the stack without limit.
const maxDepth = 128

// SyntaxError says where and why a Debug form did not parse.
type SyntaxError struct {
	Input  string
	Offset int // byte offset into Input
	Msg    string
}

func (e *SyntaxError) Error() string {
	start := max(0, e.Offset-30)
	end := min(len(e.Input), e.Offset+30)
	return fmt.Sprintf("rustdebug: offset %d: %s: …%s⟨here⟩%s…", e.Offset, e.Msg, e.Input[start:e.Offset], e.Input[e.Offset:end])
}

// Parse reads one whole Debug form; anything but whitespace after it is an
// error.
func Parse(s string) (Value, error) {
	v, n, err := ParsePrefix(s)
	if err != nil {
		return Value{}, err
	}
	p := parser{s: s, pos: n}
	p.space()
	if p.pos < len(s) {
		return Value{}, p.errorf("unexpected %s after the value", p.describe())
	}
	return v, nil
}

// ParsePrefix reads one Debug form from the start of s (after leading
// whitespace) and returns it with the number of bytes consumed, so a caller
// can go on reading the text that follows, e.g. " | kv_connector: ...".
func ParsePrefix(s string) (Value, int, error) {
	p := parser{s: s}
	v, err := p.value(0)
	if err != nil {
		return Value{}, 0, err
	}
	return v, p.pos, nil
}

type parser struct {
	s   string
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return &SyntaxError{Input: p.s, Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.pos >= len(p.s) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
	return strconv.QuoteRune(r)
}

func (p *parser) space() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *parser) eat(c byte) bool {
	p.space()
	if p.peek() == c {
		p.pos++
		return true
	}
	return false
}

func (p *parser) value(depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, p.errorf("nested deeper than %d levels", maxDepth)
	}
	p.space()
	c := p.peek()
	switch {
	case p.pos >= len(p.s):
		return Value{}, p.errorf("expected a value, found end of input")
	case c == '"':
		t, err := p.quoted('"')
		return Value{Kind: String, Text: t}, err
	case c == '\'':
		t, err := p.quoted('\'')
		return Value{Kind: Char, Text: t}, err
	case c == '[':
		p.pos++
		items, err := p.items(']', depth)
		return Value{Kind: List, Items: items}, err
	case c == '(':
		p.pos++
		items, err := p.items(')', depth)
		return Value{Kind: Tuple, Items: items}, err
	case c == '{':
		p.pos++
		return p.braced(depth)
	case c == '-' || c == '+' || (c >= '0' && c <= '9'):
		return p.number()
	}
	name := p.ident()
	if name == "" {
		return Value{}, p.errorf("expected a value, found %s", p.describe())
	}
	// A name directly followed by { or ( is a struct or tuple variant; Debug
	// puts one space before { and none before (.
	save := p.pos
	p.space()
	switch p.peek() {
	case '{':
		p.pos++
		return p.structBody(name, depth)
	case '(':
		p.pos++
		items, err := p.items(')', depth)
		if err != nil {
			return Value{}, err
		}
		if name == "Some" {
			if len(items) != 1 {
				return Value{}, p.errorf("Some holds exactly one value, found %d", len(items))
			}
			return Value{Kind: Some, Items: items}, nil
		}
		return Value{Kind: Tuple, Name: name, Items: items}, nil
	}
	p.pos = save
	if name == "None" {
		return Value{Kind: None}, nil
	}
	return Value{Kind: Ident, Text: name}, nil
}

// ident reads a Rust path: letters, digits, _ and :: separators
// (std::time::Duration). It never consumes a single ':' (a field separator).
func (p *parser) ident() string {
	start := p.pos
	for p.pos < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.pos:])
		switch {
		case r == '_' || unicode.IsLetter(r) || (p.pos > start && unicode.IsDigit(r)):
			p.pos += n
		case r == ':' && p.pos > start && strings.HasPrefix(p.s[p.pos:], "::") && p.pos+2 < len(p.s) && isIdentStart(p.s[p.pos+2:]):
			p.pos += 2
		default:
			return p.s[start:p.pos]
		}
	}
	return p.s[start:p.pos]
}

func isIdentStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func (p *parser) number() (Value, error) {
	start := p.pos
	if c := p.peek(); c == '-' || c == '+' {
		p.pos++
		if strings.HasPrefix(p.s[p.pos:], "inf") {
			p.pos += 3
			return Value{Kind: Ident, Text: p.s[start:p.pos]}, nil
		}
	}
	digits := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if (c >= '0' && c <= '9') || c == '.' || c == '_' {
			p.pos++
			continue
		}
		if (c == 'e' || c == 'E') && p.pos > digits {
			// An exponent only if digits follow; otherwise it is a unit.
			q := p.pos + 1
			if q < len(p.s) && (p.s[q] == '-' || p.s[q] == '+') {
				q++
			}
			if q < len(p.s) && p.s[q] >= '0' && p.s[q] <= '9' {
				p.pos = q
				continue
			}
		}
		break
	}
	if p.pos == digits {
		p.pos = start
		return Value{}, p.errorf("expected digits after the sign")
	}
	// Duration's Debug prints a unit right after the number: 120s, 1.5ms, 3µs.
	for p.pos < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.pos:])
		if !unicode.IsLetter(r) {
			break
		}
		p.pos += n
	}
	return Value{Kind: Number, Text: p.s[start:p.pos]}, nil
}

// quoted reads a string or char literal with Rust's escapes.
func (p *parser) quoted(q byte) (string, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\':
			if p.pos+1 >= len(p.s) {
				p.pos = open
				return "", p.errorf("unterminated literal")
			}
			e := p.s[p.pos+1]
			p.pos += 2
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case '\\', '"', '\'':
				b.WriteByte(e)
			case 'u':
				end := strings.IndexByte(p.s[p.pos:], '}')
				if !strings.HasPrefix(p.s[p.pos:], "{") || end < 0 {
					return "", p.errorf(`bad \u escape; Rust writes \u{hex}`)
				}
				n, err := strconv.ParseUint(p.s[p.pos+1:p.pos+end], 16, 32)
				if err != nil || !utf8.ValidRune(rune(n)) {
					return "", p.errorf(`bad \u escape %q`, p.s[p.pos:p.pos+end+1])
				}
				b.WriteRune(rune(n))
				p.pos += end + 1
			default:
				p.pos -= 2
				return "", p.errorf("unknown escape \\%c", e)
			}
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	p.pos = open
	return "", p.errorf("unterminated literal")
}

// items reads comma-separated values up to close (a trailing comma is
// allowed: the {:#?} form writes one).
func (p *parser) items(close byte, depth int) ([]Value, error) {
	var out []Value
	for {
		if p.eat(close) {
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if p.eat(',') {
			continue
		}
		if p.eat(close) {
			return out, nil
		}
		return nil, p.errorf("expected ',' or '%c', found %s", close, p.describe())
	}
}

func (p *parser) structBody(name string, depth int) (Value, error) {
	v := Value{Kind: Struct, Name: name}
	for {
		if p.eat('}') {
			return v, nil
		}
		p.space()
		if strings.HasPrefix(p.s[p.pos:], "..") {
			p.pos += 2
			v.NonExhaustive = true
			if p.eat('}') {
				return v, nil
			}
			return Value{}, p.errorf("expected '}' after '..', found %s", p.describe())
		}
		field := p.fieldName()
		if field == "" {
			return Value{}, p.errorf("expected a field name in %s { ... }, found %s", name, p.describe())
		}
		if !p.eat(':') {
			return Value{}, p.errorf("expected ':' after field %s.%s, found %s", name, field, p.describe())
		}
		fv, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Fields = append(v.Fields, Field{Name: field, Value: fv})
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return v, nil
		}
		return Value{}, p.errorf("expected ',' or '}' after field %s.%s, found %s", name, field, p.describe())
	}
}

// fieldName reads a field name: an identifier, or a tuple index (0, 1) as
// some hand-written Debug impls print, or r#type.
func (p *parser) fieldName() string {
	start := p.pos
	for p.pos < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.pos:])
		if r == '_' || r == '#' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			p.pos += n
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

// braced reads a map {k: v} or a set {a, b} (an unnamed brace).
func (p *parser) braced(depth int) (Value, error) {
	if p.eat('}') {
		return Value{Kind: Map}, nil
	}
	first, err := p.value(depth + 1)
	if err != nil {
		return Value{}, err
	}
	if !p.eat(':') {
		rest, err := p.itemsAfter(first, '}', depth)
		return Value{Kind: Set, Items: rest}, err
	}
	v := Value{Kind: Map}
	key := first
	for {
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Entries = append(v.Entries, Entry{Key: key, Value: val})
		if p.eat('}') {
			return v, nil
		}
		if !p.eat(',') {
			return Value{}, p.errorf("expected ',' or '}' in a map, found %s", p.describe())
		}
		if p.eat('}') {
			return v, nil
		}
		if key, err = p.value(depth + 1); err != nil {
			return Value{}, err
		}
		if !p.eat(':') {
			return Value{}, p.errorf("expected ':' after a map key, found %s", p.describe())
		}
	}
}

func (p *parser) itemsAfter(first Value, close byte, depth int) ([]Value, error) {
	out := []Value{first}
	if p.eat(close) {
		return out, nil
	}
	if !p.eat(',') {
		return nil, p.errorf("expected ',' or '%c', found %s", close, p.describe())
	}
	rest, err := p.items(close, depth)
	return append(out, rest...), err
}
