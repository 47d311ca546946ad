package routerlog

import (
	"fmt"
	"regexp"
	"strings"
)

// ClapErrorKind classifies the first line of a clap error.
type ClapErrorKind string

// The clap errors a router can stop with under the operator.
const (
	// InvalidValue: `error: invalid value 'roundrobin' for '--policy <POLICY>'`.
	InvalidValue ClapErrorKind = "invalid-value"
	// ArgumentRepeated: `error: the argument '--x <X>' cannot be used multiple times`.
	ArgumentRepeated ClapErrorKind = "argument-repeated"
	// UnknownArgument: `error: unexpected argument '--foo' found`.
	UnknownArgument ClapErrorKind = "unknown-argument"
	// MissingValue: `error: a value is required for '--policy <POLICY>' but none was supplied`.
	MissingValue ClapErrorKind = "missing-value"
	// OtherError: any other `error: ...` line.
	OtherError ClapErrorKind = "other"
)

// ClapError is clap's error block (clap_builder error/format.rs):
//
//	error: invalid value 'roundrobin' for '--policy <POLICY>'
//	  [possible values: random, round_robin, cache_aware, ...]
//
//	  tip: a similar value exists: 'round_robin'
//
//	For more information, try '--help'.
type ClapError struct {
	Kind    ClapErrorKind `json:"kind"`
	Message string        `json:"message"` // the first line after "error: "
	// Value is the rejected value (InvalidValue) or argument (UnknownArgument).
	Value string `json:"value,omitempty"`
	// Arg is the argument as clap names it: "--policy <POLICY>".
	Arg string `json:"arg,omitempty"`
	// Flag is Arg's flag alone: "--policy".
	Flag           string   `json:"flag,omitempty"`
	PossibleValues []string `json:"possibleValues,omitempty"`
	// Tips are the similar values clap suggests (`tip: a similar value
	// exists: 'x'`); empty when nothing was close enough.
	Tips  []string `json:"tips,omitempty"`
	Usage string   `json:"usage,omitempty"` // the "Usage: ..." line, if printed
	Line  int      `json:"line"`            // 1-based line of "error: "
	Text  string   `json:"text"`            // the whole block, ANSI removed
}

var (
	invalidValueRE = regexp.MustCompile(`^invalid value '(.*)' for '(.*)'$`)
	repeatedRE     = regexp.MustCompile(`^the argument '(.*)' cannot be used multiple times$`)
	unknownArgRE   = regexp.MustCompile(`^unexpected argument '(.*)' found$`)
	missingValueRE = regexp.MustCompile(`^a value is required for '(.*)' but none was supplied$`)
	quotedRE       = regexp.MustCompile(`'([^']*)'`)
)

// NoClapError says the text holds no clap `error:` line.
type NoClapError struct {
	Lines int
	Tail  []string
}

func (e *NoClapError) Error() string {
	if len(e.Tail) == 0 {
		return "no clap error (a line starting with \"error: \"): the output is empty"
	}
	return fmt.Sprintf("no clap error (a line starting with \"error: \") in %d lines; last %d:\n  | %s", e.Lines, len(e.Tail), strings.Join(e.Tail, "\n  | "))
}

// FindClapError finds and parses clap's error block in a router's output
// (stderr, or logs that include it; VR prints DEBUG lines before it).
func FindClapError(output string) (ClapError, error) {
	lines := Lines(output)
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l.Message, "error: ") {
			start = i
			break
		}
	}
	if start < 0 {
		return ClapError{}, &NoClapError{Lines: len(lines), Tail: Tail(lines, 20)}
	}
	ce := ClapError{Line: lines[start].Number, Message: strings.TrimPrefix(lines[start].Message, "error: ")}
	ce.Kind = OtherError
	var m []string
	switch msg := ce.Message; {
	case match(invalidValueRE, msg, &m):
		ce.Kind, ce.Value, ce.Arg = InvalidValue, m[1], m[2]
	case match(repeatedRE, msg, &m):
		ce.Kind, ce.Arg = ArgumentRepeated, m[1]
	case match(unknownArgRE, msg, &m):
		ce.Kind, ce.Value = UnknownArgument, m[1]
	case match(missingValueRE, msg, &m):
		ce.Kind, ce.Arg = MissingValue, m[1]
	}
	ce.Flag, _, _ = strings.Cut(ce.Arg, " ")
	if ce.Kind == UnknownArgument {
		ce.Flag, _, _ = strings.Cut(ce.Value, "=")
	}
	block := []string{lines[start].Message}
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l.Message)
		if strings.HasPrefix(l.Message, "error: ") {
			break // a second error: not part of this block
		}
		block = append(block, l.Message)
		switch {
		case strings.HasPrefix(t, "[possible values: ") && strings.HasSuffix(t, "]"):
			for _, v := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(t, "[possible values: "), "]"), ", ") {
				ce.PossibleValues = append(ce.PossibleValues, strings.Trim(v, `"`))
			}
		case strings.HasPrefix(t, "tip: "):
			if strings.Contains(t, "similar value") {
				for _, q := range quotedRE.FindAllStringSubmatch(t, -1) {
					ce.Tips = append(ce.Tips, q[1])
				}
			}
		case strings.HasPrefix(t, "Usage: "):
			ce.Usage = t
		}
		if strings.HasPrefix(t, "For more information") {
			break
		}
	}
	ce.Text = strings.Join(block, "\n")
	return ce, nil
}

func match(re *regexp.Regexp, s string, m *[]string) bool {
	*m = re.FindStringSubmatch(s)
	return *m != nil
}
