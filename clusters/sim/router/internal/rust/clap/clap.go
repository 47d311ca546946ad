// Package clap emulates the parts of clap 4 (clap_builder 4.6, derive API)
// that the two argv routers use, so that the simulated vllm-router and
// sgl-model-gateway accept and refuse exactly the argv the real binaries do and
// print clap's error text byte for byte (docs/routers.md#command-line-flags,
// docs/routers.md#clap-errors).
//
// It covers long flags (`--name value` and `--name=value`), bool flags
// (ArgAction::SetTrue), Vec flags with `num_args = 0..` (values until the next
// flag), ArgAction::Append flags (one value per occurrence), possible-values
// checks with clap's "did you mean" rule (strsim Jaro > 0.7, the most similar
// candidate wins, the later one on ties), numeric value parsers with Rust's
// error texts, "cannot be used multiple times", unknown arguments with clap's
// usage line, a subcommand (SG's `launch`/`start`), --help and --version.
// Short flags other than -h/-V do not exist in either router; anything that
// looks like one is an unknown argument, as in clap.
package clap

import (
	"fmt"
	"strconv"
	"strings"
)

// Action is how an argument consumes the command line (clap's ArgAction plus
// num_args).
type Action int

const (
	// Set takes exactly one value; giving the flag twice is an error.
	Set Action = iota
	// SetTrue is a bool flag without a value; giving it twice is an error.
	SetTrue
	// AppendMany is a Vec flag with `num_args = 0..`: it takes every
	// following token up to the next flag, and may repeat.
	AppendMany
	// Append is a Vec flag with ArgAction::Append: one value per
	// occurrence, repeatable.
	Append
)

// ValueType selects the value parser clap derives for the field's Rust type.
type ValueType int

const (
	String ValueType = iota
	U16
	U32
	I32
	U64
	I64
	Usize
	F32
	F64
)

// Arg is one long flag.
type Arg struct {
	// Long is the flag name without dashes, e.g. "prefill-policy".
	Long string
	// Action is how values are taken.
	Action Action
	// Type is the Rust type of the field (value parser).
	Type ValueType
	// Default is the default value as clap renders it ("" for none unless
	// HasDefault).
	Default    string
	HasDefault bool
	// Possible lists the accepted values (value_parser = [...] or a
	// ValueEnum), in the order clap prints them.
	Possible []string
	// Aliases are other long names for the flag (e.g. "runtime").
	Aliases []string
	// ValueName overrides the placeholder (default: the field name in
	// SCREAMING_SNAKE_CASE, as clap derive does).
	ValueName string
	// Help is a one-line description for --help.
	Help string
}

// takesValue reports whether the flag takes values.
func (a *Arg) takesValue() bool { return a.Action != SetTrue }

func (a *Arg) valueName() string {
	if a.ValueName != "" {
		return a.ValueName
	}
	return strings.ToUpper(strings.ReplaceAll(a.Long, "-", "_"))
}

// Display is how clap names the argument in messages, e.g.
// "--policy <POLICY>", "--selector [<SELECTOR>...]", "--service-discovery".
func (a *Arg) Display() string {
	switch a.Action {
	case SetTrue:
		return "--" + a.Long
	case AppendMany:
		return "--" + a.Long + " [<" + a.valueName() + ">...]"
	default:
		return "--" + a.Long + " <" + a.valueName() + ">"
	}
}

// Subcommand is a subcommand that takes the same arguments as the top level
// (SG: `launch`, visible alias `start`).
type Subcommand struct {
	Name    string
	Aliases []string
	About   string
}

// Command describes a CLI.
type Command struct {
	// BinName is argv[0]'s file name; clap uses it in the usage line.
	BinName string
	// About is the first line of --help.
	About string
	// Version, when set, adds --version/-V printing "<BinName> <Version>".
	Version string
	// Args are the flags in declaration (field) order.
	Args []Arg
	// Subcommands, when any, also add clap's implicit `help` subcommand.
	Subcommands []Subcommand
	// ArgsConflictsWithSubcommands is clap's args_conflicts_with_subcommands.
	ArgsConflictsWithSubcommands bool
}

// find returns the flag with the long name or alias.
func (c *Command) find(long string) *Arg {
	for i := range c.Args {
		a := &c.Args[i]
		if a.Long == long {
			return a
		}
		for _, al := range a.Aliases {
			if al == long {
				return a
			}
		}
	}
	return nil
}

// longs lists every long key in clap's keymap order: the fields with their
// aliases, then the built-in --help and --version.
func (c *Command) longs() []string {
	var out []string
	for _, a := range c.Args {
		out = append(out, a.Long)
		out = append(out, a.Aliases...)
	}
	out = append(out, "help")
	if c.Version != "" {
		out = append(out, "version")
	}
	return out
}

func (c *Command) subcommand(name string) (string, bool) {
	for _, s := range c.Subcommands {
		if s.Name == name {
			return s.Name, true
		}
		for _, al := range s.Aliases {
			if al == name {
				return s.Name, true
			}
		}
	}
	if len(c.Subcommands) > 0 && name == "help" {
		return "help", true
	}
	return "", false
}

// Matches is the parse result.
type Matches struct {
	cmd *Command
	// vals holds the explicit values per flag (Long), in order given.
	vals map[string][]string
	// order is the order flags were first given.
	order []string
	// Subcommand is the subcommand used ("" for none).
	Subcommand string
}

// IsPresent reports whether the flag was given on the command line.
func (m *Matches) IsPresent(long string) bool {
	_, ok := m.vals[long]
	return ok
}

// Value is the flag's value: the explicit one, else the default, else "".
func (m *Matches) Value(long string) string {
	if v, ok := m.vals[long]; ok && len(v) > 0 {
		return v[len(v)-1]
	}
	if a := m.cmd.find(long); a != nil && a.HasDefault {
		return a.Default
	}
	return ""
}

// Optional is an Option<T> flag: the value and whether it was given.
func (m *Matches) Optional(long string) (string, bool) {
	v, ok := m.vals[long]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// Values is a Vec flag's values (explicit, else none).
func (m *Matches) Values(long string) []string {
	return append([]string(nil), m.vals[long]...)
}

// Bool is a SetTrue flag.
func (m *Matches) Bool(long string) bool {
	if m.IsPresent(long) {
		return true
	}
	return m.Value(long) == "true"
}

// Uint parses an unsigned flag; parsing already validated it.
func (m *Matches) Uint(long string) uint64 {
	v, _ := strconv.ParseUint(strings.TrimPrefix(m.Value(long), "+"), 10, 64)
	return v
}

// Int parses a signed flag; parsing already validated it.
func (m *Matches) Int(long string) int64 {
	v, _ := strconv.ParseInt(m.Value(long), 10, 64)
	return v
}

// Float parses a float flag; parsing already validated it. F32 flags are
// rounded to float32 as the Rust field is.
func (m *Matches) Float(long string) float64 {
	v, _ := parseRustFloat(m.Value(long))
	if a := m.cmd.find(long); a != nil && a.Type == F32 {
		return float64(float32(v))
	}
	return v
}

// Float32 is Float for f32 fields.
func (m *Matches) Float32(long string) float32 { return float32(m.Float(long)) }

// ErrorKind classifies a parse outcome that ends the program.
type ErrorKind int

const (
	InvalidValue ErrorKind = iota + 1
	ValueValidation
	UnknownArgument
	ArgumentConflict
	TooManyValues
	InvalidSubcommand
	DisplayHelp
	DisplayVersion
)

// Error is a parse failure (or --help/--version) with clap's rendered text.
type Error struct {
	Kind ErrorKind
	// Text is exactly what clap prints, trailing newline included.
	Text string
}

func (e *Error) Error() string { return e.Text }

// ExitCode is what clap's Error::exit uses: 0 for help/version, else 2.
func (e *Error) ExitCode() int {
	if e.Kind == DisplayHelp || e.Kind == DisplayVersion {
		return 0
	}
	return 2
}

// ToStdout reports whether clap prints this to stdout (help, version) rather
// than stderr (errors).
func (e *Error) ToStdout() bool { return e.ExitCode() == 0 }

func (e *Error) String() string { return fmt.Sprintf("clap error %d: %s", e.Kind, e.Text) }
