// Package argparse parses argv the way Python's argparse does, for the engine
// emulators whose real CLIs are argparse programs (vllm serve,
// python3 -m sglang.launch_server). What a caller can observe is kept:
// "--flag value" and "--flag=value", unique-prefix abbreviations, "--" as the
// end of options, negative numbers as values, BooleanOptionalAction's
// --no-<flag>, and the exact error texts with exit status 2:
//
//	usage: <prog> [-h] ...
//	<prog>: error: unrecognized arguments: --bogus
package argparse

import (
	"fmt"
	"slices"
	"strings"
)

// Action is what an option does with its argument.
type Action int

const (
	// Store takes a value (Nargs says how many).
	Store Action = iota
	// StoreTrue is a flag without a value.
	StoreTrue
	// BoolOptional is BooleanOptionalAction: --x sets true, --no-x false.
	BoolOptional
	// Append takes one value and may repeat.
	Append
)

// Nargs is how many values a Store option or a positional takes.
type Nargs int

const (
	One        Nargs = iota // exactly one
	Optional                // "?"
	OneOrMore               // "+"
	ZeroOrMore              // "*"
)

// Option is one optional argument.
type Option struct {
	// Flags are the option strings, long first ("--tensor-parallel-size", "-tp").
	Flags  []string
	Action Action
	Nargs  Nargs
	// Dest names the value; default: the first long flag without dashes,
	// with "-" turned into "_".
	Dest string
	// Metavar for usage; default Dest upper-cased (or {a,b} with Choices).
	Metavar  string
	Choices  []string
	Required bool
	// Check validates one value; it returns argparse's message for a bad one,
	// e.g. "invalid int value: 'x'".
	Check func(string) error
}

// Positional is one positional argument.
type Positional struct {
	Name  string
	Nargs Nargs // One or Optional
}

// Parser is one argparse.ArgumentParser.
type Parser struct {
	Prog string
	// Usage overrides the generated usage text (argparse's usage=...).
	Usage       string
	Options     []*Option
	Positionals []*Positional
	// NoAbbrev is allow_abbrev=False.
	NoAbbrev bool

	byFlag map[string]*Option
}

// Error is an argparse error: Text is what the program writes to stderr
// before exiting with status 2.
type Error struct {
	Prog, Usage, Msg string
}

func (e *Error) Error() string { return e.Msg }

// Text is "usage: ...\n<prog>: error: <msg>\n".
func (e *Error) Text() string {
	return e.Usage + e.Prog + ": error: " + e.Msg + "\n"
}

// Help is returned by Parse when -h/--help was given; Text is the help text
// for stdout, exit status 0.
type Help struct{ Text string }

func (h *Help) Error() string { return "help requested" }

// Result holds parsed values by Dest.
type Result struct {
	values map[string][]string
	bools  map[string]bool
	pos    map[string]string
}

func (p *Parser) index() {
	if p.byFlag != nil {
		return
	}
	p.byFlag = map[string]*Option{}
	for _, o := range p.Options {
		if o.Dest == "" {
			o.Dest = destOf(o.Flags)
		}
		for _, f := range o.Flags {
			p.byFlag[f] = o
			if o.Action == BoolOptional && strings.HasPrefix(f, "--") {
				p.byFlag["--no-"+f[2:]] = o
			}
		}
	}
}

func destOf(flags []string) string {
	for _, f := range flags {
		if strings.HasPrefix(f, "--") {
			return strings.ReplaceAll(f[2:], "-", "_")
		}
	}
	return strings.ReplaceAll(strings.TrimLeft(flags[0], "-"), "-", "_")
}

// Parse is parse_args: extras are an "unrecognized arguments" error.
func (p *Parser) Parse(args []string) (*Result, error) {
	r, extras, err := p.ParseKnown(args)
	if err != nil {
		return nil, err
	}
	if len(extras) > 0 {
		return nil, p.Errorf("unrecognized arguments: %s", strings.Join(extras, " "))
	}
	return r, nil
}

// Errorf builds this parser's Error.
func (p *Parser) Errorf(format string, a ...any) *Error {
	return &Error{Prog: p.Prog, Usage: p.FormatUsage(), Msg: fmt.Sprintf(format, a...)}
}

// isOption reports whether argparse would read s as an option string rather
// than a value: it starts with '-', is not just "-", and is not a negative
// number (none of our parsers define options that look like numbers).
func isOption(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	if s[1] >= '0' && s[1] <= '9' || s[1] == '.' {
		return false
	}
	return true
}

// ParseKnown is parse_known_args: unknown options and surplus positionals
// come back as extras.
func (p *Parser) ParseKnown(args []string) (*Result, []string, error) {
	p.index()
	r := &Result{values: map[string][]string{}, bools: map[string]bool{}, pos: map[string]string{}}
	var extras, positional []string
	seen := map[*Option]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if !isOption(a) {
			positional = append(positional, a)
			continue
		}
		if a == "-h" || a == "--help" || strings.HasPrefix(a, "--help=") {
			return nil, nil, &Help{Text: p.FormatHelp()}
		}
		flag, explicit, hasExplicit := a, "", false
		if k := strings.IndexByte(a, '='); k > 0 {
			flag, explicit, hasExplicit = a[:k], a[k+1:], true
		}
		o, used, err := p.lookup(flag)
		if err != nil {
			return nil, nil, err
		}
		if o == nil {
			extras = append(extras, a)
			continue
		}
		seen[o] = true
		name := strings.Join(o.Flags, "/")
		switch o.Action {
		case StoreTrue, BoolOptional:
			if hasExplicit {
				return nil, nil, p.Errorf("argument %s: ignored explicit argument '%s'", name, explicit)
			}
			r.bools[o.Dest] = !strings.HasPrefix(used, "--no-")
		case Store, Append:
			var vals []string
			switch {
			case hasExplicit:
				vals = []string{explicit}
			case o.Nargs == One || o.Action == Append:
				if i+1 >= len(args) || isOption(args[i+1]) {
					return nil, nil, p.Errorf("argument %s: expected one argument", name)
				}
				i++
				vals = []string{args[i]}
			default:
				for i+1 < len(args) && !isOption(args[i+1]) && args[i+1] != "--" {
					i++
					vals = append(vals, args[i])
					if o.Nargs == Optional {
						break
					}
				}
				if o.Nargs == OneOrMore && len(vals) == 0 {
					return nil, nil, p.Errorf("argument %s: expected at least one argument", name)
				}
			}
			for _, v := range vals {
				if len(o.Choices) > 0 && !slices.Contains(o.Choices, v) {
					q := make([]string, len(o.Choices))
					for j, c := range o.Choices {
						q[j] = "'" + c + "'"
					}
					return nil, nil, p.Errorf("argument %s: invalid choice: '%s' (choose from %s)", name, v, strings.Join(q, ", "))
				}
				if o.Check != nil {
					if err := o.Check(v); err != nil {
						return nil, nil, p.Errorf("argument %s: %s", name, err.Error())
					}
				}
			}
			if o.Action == Append {
				r.values[o.Dest] = append(r.values[o.Dest], vals...)
			} else {
				r.values[o.Dest] = vals
			}
		}
	}
	// Positionals in order; the surplus is unrecognized.
	k := 0
	for _, ps := range p.Positionals {
		if k < len(positional) {
			r.pos[ps.Name] = positional[k]
			k++
		}
	}
	extras = append(extras, positional[k:]...)
	var missing []string
	for _, ps := range p.Positionals {
		if _, ok := r.pos[ps.Name]; !ok && ps.Nargs == One {
			missing = append(missing, ps.Name)
		}
	}
	for _, o := range p.Options {
		if o.Required && !seen[o] {
			missing = append(missing, strings.Join(o.Flags, "/"))
		}
	}
	if len(missing) > 0 {
		return nil, nil, p.Errorf("the following arguments are required: %s", strings.Join(missing, ", "))
	}
	return r, extras, nil
}

// lookup finds the option for a flag: an exact match, else (allow_abbrev) the
// one long option it is a unique prefix of. nil, nil means unknown.
func (p *Parser) lookup(flag string) (*Option, string, error) {
	if o, ok := p.byFlag[flag]; ok {
		return o, flag, nil
	}
	if p.NoAbbrev || !strings.HasPrefix(flag, "--") {
		return nil, "", nil
	}
	var matches []string
	for f := range p.byFlag {
		if strings.HasPrefix(f, flag) && strings.HasPrefix(f, "--") {
			matches = append(matches, f)
		}
	}
	switch len(matches) {
	case 0:
		return nil, "", nil
	case 1:
		return p.byFlag[matches[0]], matches[0], nil
	}
	slices.Sort(matches)
	return nil, "", p.Errorf("ambiguous option: %s could match %s", flag, strings.Join(matches, ", "))
}

// FormatUsage is argparse's format_usage(): "usage: <prog> <parts>\n",
// wrapped at 78 columns with continuation lines aligned after the prog.
func (p *Parser) FormatUsage() string {
	if p.Usage != "" {
		return "usage: " + p.Usage + "\n"
	}
	p.index()
	parts := []string{"[-h]"}
	for _, o := range p.Options {
		parts = append(parts, o.usagePart())
	}
	for _, ps := range p.Positionals {
		if ps.Nargs == Optional {
			parts = append(parts, "["+ps.Name+"]")
		} else {
			parts = append(parts, ps.Name)
		}
	}
	const width = 78
	head := "usage: " + p.Prog + " "
	if len(head)+len(strings.Join(parts, " ")) <= width {
		return head + strings.Join(parts, " ") + "\n"
	}
	indent := strings.Repeat(" ", len(head))
	var b strings.Builder
	b.WriteString(head)
	lineLen := len(head)
	first := true
	for _, part := range parts {
		if !first && lineLen+1+len(part) > width {
			b.WriteString("\n")
			b.WriteString(indent)
			lineLen = len(indent)
			first = true
		}
		if !first {
			b.WriteByte(' ')
			lineLen++
		}
		b.WriteString(part)
		lineLen += len(part)
		first = false
	}
	b.WriteString("\n")
	return b.String()
}

// FormatHelp is a short help text: usage and the option list.
func (p *Parser) FormatHelp() string {
	p.index()
	var b strings.Builder
	b.WriteString(p.FormatUsage())
	b.WriteString("\noptions:\n  -h, --help            show this help message and exit\n")
	for _, o := range p.Options {
		b.WriteString("  ")
		b.WriteString(strings.Join(o.Flags, ", "))
		if o.Action == Store || o.Action == Append {
			b.WriteString(" " + o.metavar())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (o *Option) metavar() string {
	if o.Metavar != "" {
		return o.Metavar
	}
	if len(o.Choices) > 0 {
		return "{" + strings.Join(o.Choices, ",") + "}"
	}
	return strings.ToUpper(o.Dest)
}

func (o *Option) usagePart() string {
	f := o.Flags[0]
	var s string
	switch o.Action {
	case StoreTrue:
		s = f
	case BoolOptional:
		s = f + " | --no-" + strings.TrimPrefix(f, "--")
	default:
		m := o.metavar()
		switch o.Nargs {
		case Optional:
			s = f + " [" + m + "]"
		case OneOrMore:
			s = f + " " + m + " [" + m + " ...]"
		case ZeroOrMore:
			s = f + " [" + m + " ...]"
		default:
			s = f + " " + m
		}
	}
	if o.Required {
		return s
	}
	return "[" + s + "]"
}

// Has reports whether dest was given on the command line.
func (r *Result) Has(dest string) bool {
	_, v := r.values[dest]
	_, b := r.bools[dest]
	return v || b
}

// String returns dest's last value, or def.
func (r *Result) String(dest, def string) string {
	if v := r.values[dest]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// Strings returns all of dest's values (nargs "+"/"*", Append).
func (r *Result) Strings(dest string) []string { return r.values[dest] }

// Bool returns a flag's value, or def when it was not given.
func (r *Result) Bool(dest string, def bool) bool {
	if v, ok := r.bools[dest]; ok {
		return v
	}
	return def
}

// Positional returns a positional's value, or def.
func (r *Result) Positional(name, def string) string {
	if v, ok := r.pos[name]; ok {
		return v
	}
	return def
}
