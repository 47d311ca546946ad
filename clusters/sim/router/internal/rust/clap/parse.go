package clap

import (
	"strings"
)

// pending is an option waiting for its separate-token values (clap's
// "pending" arg in the ArgMatcher).
type pending struct {
	arg  *Arg
	vals []string
}

type parser struct {
	cmd     *Command
	m       *Matches
	pending *pending
	// awaiting is the option whose values the next plain tokens belong to
	// (clap's ParseState::Opt).
	awaiting *Arg
	// validArgFound is clap's valid_arg_found (a known flag was seen).
	validArgFound bool
}

// Parse parses args (argv without the program name) against cmd. On failure
// (and for --help/--version) it returns an *Error with clap's text.
func Parse(cmd *Command, args []string) (*Matches, error) {
	p := &parser{cmd: cmd, m: &Matches{cmd: cmd, vals: map[string][]string{}}}
	if err := p.parse(args); err != nil {
		return nil, err
	}
	return p.m, nil
}

func (p *parser) parse(args []string) error {
	trailing := false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if !trailing {
			if p.awaiting == nil && len(p.cmd.Subcommands) > 0 {
				if !(p.cmd.ArgsConflictsWithSubcommands && p.validArgFound) {
					if name, ok := p.cmd.subcommand(tok); ok {
						if err := p.resolvePending(); err != nil {
							return err
						}
						return p.parseSubcommand(name, args[i+1:])
					}
				}
			}
			if tok == "--" {
				trailing = true
				continue
			}
			if strings.HasPrefix(tok, "--") {
				if err := p.parseLong(tok[2:]); err != nil {
					return err
				}
				continue
			}
			if strings.HasPrefix(tok, "-") && len(tok) > 1 {
				if err := p.parseShort(tok[1:]); err != nil {
					return err
				}
				continue
			}
			if p.awaiting != nil {
				p.pending.vals = append(p.pending.vals, tok)
				if p.awaiting.Action != AppendMany {
					// num_args = 1: the value is complete.
					p.awaiting = nil
				}
				continue
			}
		}
		// A positional token: neither router declares positionals.
		_ = p.resolvePending()
		return p.matchArgError(tok, trailing)
	}
	return p.resolvePending()
}

func (p *parser) parseSubcommand(name string, rest []string) error {
	if name == "help" {
		return &Error{Kind: DisplayHelp, Text: p.helpText()}
	}
	sub := &Command{
		BinName: p.cmd.BinName + " " + name,
		About:   p.cmd.About,
		Args:    p.cmd.Args,
	}
	sp := &parser{cmd: sub, m: &Matches{cmd: sub, vals: map[string][]string{}}}
	if err := sp.parse(rest); err != nil {
		return err
	}
	p.m.vals = sp.m.vals
	p.m.order = sp.m.order
	p.m.Subcommand = name
	return nil
}

func (p *parser) parseLong(body string) error {
	name, value, hasEq := strings.Cut(body, "=")
	if name == "help" && !hasEq {
		if err := p.resolvePending(); err != nil {
			return err
		}
		return &Error{Kind: DisplayHelp, Text: p.helpText()}
	}
	if name == "version" && p.cmd.Version != "" && !hasEq {
		if err := p.resolvePending(); err != nil {
			return err
		}
		return &Error{Kind: DisplayVersion, Text: p.cmd.BinName + " " + p.cmd.Version + "\n"}
	}
	a := p.cmd.find(name)
	if a == nil {
		_ = p.resolvePending()
		return p.unknownLong(name)
	}
	p.validArgFound = true
	p.awaiting = nil
	if a.takesValue() {
		if hasEq {
			return p.react(a, []string{value})
		}
		if err := p.resolvePending(); err != nil {
			return err
		}
		p.pending = &pending{arg: a}
		p.awaiting = a
		return nil
	}
	if hasEq {
		// A bool flag with an attached value: clap's UnneededAttachedValue.
		_ = p.resolvePending()
		used := append(p.used(), a.Long)
		return p.fail(TooManyValues,
			"unexpected value '"+value+"' for '"+a.Display()+"' found; no more were expected",
			"", p.usage(used))
	}
	return p.react(a, nil)
}

func (p *parser) parseShort(body string) error {
	c := []rune(body)[0]
	switch {
	case c == 'h':
		if err := p.resolvePending(); err != nil {
			return err
		}
		return &Error{Kind: DisplayHelp, Text: p.helpText()}
	case c == 'V' && p.cmd.Version != "":
		if err := p.resolvePending(); err != nil {
			return err
		}
		return &Error{Kind: DisplayVersion, Text: p.cmd.BinName + " " + p.cmd.Version + "\n"}
	}
	_ = p.resolvePending()
	return p.fail(UnknownArgument, "unexpected argument '-"+string(c)+"' found", "", p.usage(nil))
}

// resolvePending hands the collected values of the pending option to react.
func (p *parser) resolvePending() error {
	pd := p.pending
	if pd == nil {
		return nil
	}
	p.pending = nil
	p.awaiting = nil
	return p.react(pd.arg, pd.vals)
}

// react records one occurrence of a with its values (clap's Parser::react).
func (p *parser) react(a *Arg, vals []string) error {
	if err := p.resolvePending(); err != nil {
		return err
	}
	if a.takesValue() && a.Action != AppendMany && len(vals) == 0 {
		return p.invalidValue(a, "")
	}
	switch a.Action {
	case Set, SetTrue:
		if _, dup := p.m.vals[a.Long]; dup {
			return p.fail(ArgumentConflict,
				"the argument '"+a.Display()+"' cannot be used multiple times", "", p.usage(nil))
		}
	}
	p.start(a)
	if a.Action == SetTrue {
		p.m.vals[a.Long] = append(p.m.vals[a.Long], "true")
		return nil
	}
	for _, v := range vals {
		if err := p.validate(a, v); err != nil {
			return err
		}
		p.m.vals[a.Long] = append(p.m.vals[a.Long], v)
	}
	return nil
}

func (p *parser) start(a *Arg) {
	if _, ok := p.m.vals[a.Long]; !ok {
		p.m.vals[a.Long] = []string{}
		p.m.order = append(p.m.order, a.Long)
	}
}

// used lists the explicitly given flags in first-seen order.
func (p *parser) used() []string {
	return append([]string(nil), p.m.order...)
}

func (p *parser) validate(a *Arg, v string) error {
	if len(a.Possible) > 0 {
		for _, pv := range a.Possible {
			if pv == v {
				return nil
			}
		}
		return p.invalidValue(a, v)
	}
	if msg := checkValue(a.Type, v); msg != "" {
		return p.fail(ValueValidation, "invalid value '"+v+"' for '"+a.Display()+"': "+msg, "", "")
	}
	return nil
}

func (p *parser) invalidValue(a *Arg, v string) error {
	var b strings.Builder
	if v == "" {
		b.WriteString("a value is required for '" + a.Display() + "' but none was supplied")
	} else {
		b.WriteString("invalid value '" + v + "' for '" + a.Display() + "'")
	}
	if len(a.Possible) > 0 {
		b.WriteString("\n  [possible values: ")
		for i, pv := range a.Possible {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(escape(pv))
		}
		b.WriteString("]")
	}
	tip := ""
	if s := didYouMean(v, a.Possible); len(s) > 0 {
		tip = "a similar value exists: '" + s[len(s)-1] + "'"
	}
	return p.fail(InvalidValue, b.String(), tip, "")
}

// unknownLong is clap's did_you_mean_error for a long flag.
func (p *parser) unknownLong(name string) error {
	tip := ""
	used := p.used()
	if s := didYouMean(name, p.cmd.longs()); len(s) > 0 {
		best := s[len(s)-1]
		tip = "a similar argument exists: '--" + best + "'"
		// clap adds the suggested flag to the matches so the usage shows it.
		if a := p.cmd.find(best); a != nil && !contains(used, a.Long) {
			used = append(used, a.Long)
		}
	}
	return p.fail(UnknownArgument, "unexpected argument '--"+name+"' found", tip, p.usage(used))
}

// matchArgError is clap's match_arg_error for a stray positional token.
func (p *parser) matchArgError(tok string, trailing bool) error {
	if len(p.cmd.Subcommands) > 0 {
		if p.cmd.ArgsConflictsWithSubcommands && p.validArgFound {
			var prior []string
			for _, l := range p.m.order {
				prior = append(prior, p.cmd.find(l).Display())
			}
			msg := "the subcommand '" + tok + "' cannot be used with"
			switch len(prior) {
			case 0:
				msg += " one or more of the other specified arguments"
			case 1:
				msg += " '" + prior[0] + "'"
			default:
				msg += ":"
				for _, pa := range prior {
					msg += "\n  " + pa
				}
			}
			return p.fail(ArgumentConflict, msg, "", p.usage(nil))
		}
		names := []string{}
		for _, s := range p.cmd.Subcommands {
			names = append(names, s.Name)
			names = append(names, s.Aliases...)
		}
		names = append(names, "help")
		if s := didYouMean(tok, names); len(s) > 0 {
			return p.fail(InvalidSubcommand, "unrecognized subcommand '"+tok+"'",
				"a similar subcommand exists: '"+s[len(s)-1]+"'", p.usage(nil))
		}
		return p.fail(InvalidSubcommand, "unrecognized subcommand '"+tok+"'", "", p.usage(nil))
	}
	return p.fail(UnknownArgument, "unexpected argument '"+tok+"' found", "", p.usage(nil))
}

// fail renders clap's RichFormatter layout: "error: <msg>", an optional
// "tip:" block, an optional usage block, then the --help hint.
func (p *parser) fail(kind ErrorKind, msg, tip, usage string) error {
	var b strings.Builder
	b.WriteString("error: ")
	b.WriteString(msg)
	if tip != "" {
		b.WriteString("\n\n  tip: ")
		b.WriteString(tip)
	}
	if usage != "" {
		b.WriteString("\n\n")
		b.WriteString(usage)
	}
	b.WriteString("\n\nFor more information, try '--help'.\n")
	return &Error{Kind: kind, Text: b.String()}
}

// usage renders "Usage: ..." as clap's Usage::create_usage_with_title: the
// help usage when no argument was used, else the "smart" usage naming the
// used arguments.
func (p *parser) usage(used []string) string {
	var b strings.Builder
	b.WriteString("Usage: ")
	b.WriteString(p.cmd.BinName)
	b.WriteString(" ")
	if len(used) == 0 {
		b.WriteString("[OPTIONS]")
		if len(p.cmd.Subcommands) > 0 {
			if p.cmd.ArgsConflictsWithSubcommands {
				b.WriteString("\n       " + p.cmd.BinName + " <COMMAND>")
			} else {
				b.WriteString(" [COMMAND]")
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	seen := map[string]bool{}
	for _, l := range used {
		if seen[l] {
			continue
		}
		seen[l] = true
		if a := p.cmd.find(l); a != nil {
			b.WriteString(a.Display())
			b.WriteString(" ")
		}
	}
	return strings.TrimRight(b.String(), " ")
}

func (p *parser) helpText() string {
	var b strings.Builder
	if p.cmd.About != "" {
		b.WriteString(p.cmd.About + "\n\n")
	}
	b.WriteString(p.usage(nil) + "\n")
	if len(p.cmd.Subcommands) > 0 {
		b.WriteString("\nCommands:\n")
		for _, s := range p.cmd.Subcommands {
			b.WriteString("  " + s.Name + "  " + s.About + "\n")
		}
		b.WriteString("  help  Print this message or the help of the given subcommand(s)\n")
	}
	b.WriteString("\nOptions:\n")
	for _, a := range p.cmd.Args {
		line := "      " + a.Display()
		if a.Help != "" {
			line += "\n          " + a.Help
		}
		if a.HasDefault && a.Action != SetTrue {
			line += " [default: " + a.Default + "]"
		}
		if len(a.Possible) > 0 {
			line += " [possible values: " + strings.Join(a.Possible, ", ") + "]"
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("  -h, --help\n          Print help\n")
	if p.cmd.Version != "" {
		b.WriteString("  -V, --version\n          Print version\n")
	}
	return b.String()
}

// escape quotes a possible value containing whitespace, as clap's Escape.
func escape(s string) string {
	if strings.ContainsAny(s, " \t\n") {
		return `"` + s + `"`
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
