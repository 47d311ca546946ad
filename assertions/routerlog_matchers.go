package assertions

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/assertions/rustdebug"
)

func logText(matcher string, actual any) (string, error) {
	switch v := actual.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case fmt.Stringer:
		return v.String(), nil
	}
	return "", wrongType(matcher, "log text (string or []byte)", actual)
}

// HaveStartedWithPolicy succeeds when the router's last startup banner
// (docs/routers.md#banner) shows exactly this policy, written in the Debug form the
// router prints (expect.yaml's banner after "policy: "), e.g. "RoundRobin" or
// "CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, ... }".
// Numbers compare by value (1 matches 1.0) and spacing is free; the variant
// and every field must be the same, none missing and none added. A failure
// names each difference and shows the banner line found:
//
//	Expect(logs).To(HaveStartedWithPolicy("RoundRobin"))
//
// The actual value is a routerlog.Banner, or log text (string or []byte,
// ANSI codes and all) whose last banner is the running process's.
func HaveStartedWithPolicy(debug string) types.GomegaMatcher {
	return bannerPartMatcher("HaveStartedWithPolicy", "policy", debug, func(b routerlog.Banner) rustdebug.Value { return b.Policy })
}

// DocumentedPolicy is the policy of an expect.yaml banner, which is
// written "policy: <the policy's Debug form as the router prints it>".
func DocumentedPolicy(banner string) (string, error) {
	policy, ok := strings.CutPrefix(banner, "policy: ")
	if !ok {
		return "", fmt.Errorf("banner %q must be written \"policy: <the policy as the router prints it>\"", banner)
	}
	return policy, nil
}

// HaveStartedWithBanner is HaveStartedWithPolicy for an expect.yaml banner
// ("policy: <Debug form>", DocumentedPolicy); a banner not written so is
// an error.
func HaveStartedWithBanner(documented string) types.GomegaMatcher {
	policy, err := DocumentedPolicy(documented)
	if err != nil {
		return &evidenceMatcher{check: func(any) (bool, string, string, error) {
			return false, "", "", fmt.Errorf("HaveStartedWithBanner: %w", err)
		}}
	}
	return HaveStartedWithPolicy(policy)
}

// HaveStartedInMode is HaveStartedWithPolicy for the banner's routing mode
// (docs/routers.md#debug-forms), e.g. for a prefill/decode pair under the
// operator's discovery
// "VllmPrefillDecode { prefill_urls: [], decode_urls: [], prefill_policy: Some(RoundRobin), decode_policy: None, discovery_address: None }".
func HaveStartedInMode(debug string) types.GomegaMatcher {
	return bannerPartMatcher("HaveStartedInMode", "mode", debug, func(b routerlog.Banner) rustdebug.Value { return b.Mode })
}

// bannerPartMatcher compares one Debug-form part of the last banner.
func bannerPartMatcher(matcher, part, debug string, get func(routerlog.Banner) rustdebug.Value) types.GomegaMatcher {
	want, perr := rustdebug.Parse(debug)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		if perr != nil {
			return false, "", "", fmt.Errorf("%s(%q): the expected %s is not a Debug form: %w", matcher, debug, part, perr)
		}
		b, count, err := lastBanner(matcher, actual)
		if err != nil {
			return false, "", "", fmt.Errorf("%s: expected a startup banner showing %s %s, but found %w", matcher, part, want, err)
		}
		diffs := valueDiffs(part, get(b), want)
		ev := bannerEvidence(b, count)
		return len(diffs) == 0,
			fmt.Sprintf("Expected the router's startup banner to show %s %s, but %s:\n%s", part, want, strings.Join(diffs, "; "), ev),
			fmt.Sprintf("Expected the router's startup banner not to show %s %s, but it does:\n%s", part, want, ev),
			nil
	}}
}

// lastBanner is the banner actual holds: a Banner itself, or the last one in
// log text (how many there were is evidence of restarts).
func lastBanner(matcher string, actual any) (routerlog.Banner, int, error) {
	if b, ok := actual.(routerlog.Banner); ok {
		return b, 1, nil
	}
	logs, err := logText(matcher, actual)
	if err != nil {
		return routerlog.Banner{}, 0, err
	}
	bs, _ := routerlog.FindBanners(logs)
	if len(bs) == 0 {
		_, err := routerlog.FindBanner(logs) // the *NoBannerError, with the log's tail
		return routerlog.Banner{}, 0, err
	}
	return bs[len(bs)-1], len(bs), nil
}

// valueDiffs says how got differs from want, field by field.
func valueDiffs(part string, got, want rustdebug.Value) []string {
	if got.TypeName() != want.TypeName() {
		// Another variant: its fields say nothing about the wanted one's.
		return []string{fmt.Sprintf("%s is %s", part, got.TypeName())}
	}
	var diffs []string
	for _, f := range want.Fields {
		g, ok := got.Field(f.Name)
		switch {
		case !ok && len(got.Fields) == 0:
			diffs = append(diffs, fmt.Sprintf("%s %s has no fields, so no %s", part, got.TypeName(), f.Name))
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s has no field %s (its fields: %s)", part, f.Name, strings.Join(got.FieldNames(), ", ")))
		case !g.Equal(f.Value):
			diffs = append(diffs, fmt.Sprintf("%s.%s is %s, want %s", part, f.Name, g, f.Value))
		}
	}
	for _, f := range got.Fields {
		if _, ok := want.Field(f.Name); !ok {
			diffs = append(diffs, fmt.Sprintf("%s has field %s: %s, which the expectation does not show", part, f.Name, f.Value))
		}
	}
	if len(diffs) == 0 && !got.Equal(want) {
		diffs = append(diffs, fmt.Sprintf("%s is %s", part, got))
	}
	return diffs
}

func bannerEvidence(b routerlog.Banner, count int) string {
	where := fmt.Sprintf("line %d", b.Line.Number)
	if count > 1 {
		where += fmt.Sprintf(", the last of %d banners", count)
	}
	return fmt.Sprintf("  %s: %s\n  policy: %s\n  mode: %s", where, b.Line.Text, b.Policy, b.Mode)
}

// ClapMatcher checks that a router refused its arguments with clap's error
// (docs/routers.md#clap-errors) in its output (stderr, or logs including it).
type ClapMatcher struct {
	evidenceMatcher
	value, flag    string
	possibleValues []string
	tip            *string // nil: not checked; "": no tip expected
	lines          []string
}

// HaveRefusedPolicyValue succeeds when the output holds clap's
// `error: invalid value '<value>' for '<flag> <...>'`. flag is the flag
// ("--policy") or the argument as clap names it ("--policy <POLICY>"). Chain
// WithPossibleValues, WithTip or WithoutTip, and WithLines to check the rest
// of the block.
func HaveRefusedPolicyValue(value, flag string) *ClapMatcher {
	m := &ClapMatcher{value: value, flag: flag}
	m.check = m.run
	return m
}

// WithPossibleValues also requires clap's `[possible values: ...]` list to be
// exactly these, in this order.
func (m *ClapMatcher) WithPossibleValues(values ...string) *ClapMatcher {
	m.possibleValues = values
	if m.possibleValues == nil {
		m.possibleValues = []string{}
	}
	return m
}

// WithTip also requires `tip: a similar value exists: '<value>'`.
func (m *ClapMatcher) WithTip(value string) *ClapMatcher { m.tip = &value; return m }

// WithoutTip also requires that clap offered no similar value.
func (m *ClapMatcher) WithoutTip() *ClapMatcher { none := ""; m.tip = &none; return m }

// WithLines also requires each line, verbatim, in clap's error block: its
// exact wording, as the docs quote it.
func (m *ClapMatcher) WithLines(lines ...string) *ClapMatcher { m.lines = lines; return m }

func (m *ClapMatcher) want() string {
	w := fmt.Sprintf("clap to refuse %q for %s", m.value, m.flag)
	if m.possibleValues != nil {
		w += fmt.Sprintf(" listing possible values %s", strings.Join(m.possibleValues, ", "))
	}
	if m.tip != nil {
		if *m.tip == "" {
			w += " without a tip"
		} else {
			w += fmt.Sprintf(" with tip %q", *m.tip)
		}
	}
	if len(m.lines) > 0 {
		w += fmt.Sprintf(" in the %d documented lines", len(m.lines))
	}
	return w
}

func (m *ClapMatcher) run(actual any) (bool, string, string, error) {
	out, err := logText("HaveRefusedPolicyValue", actual)
	if err != nil {
		return false, "", "", err
	}
	ce, err := routerlog.FindClapError(out)
	if err != nil {
		return false, fmt.Sprintf("Expected %s, but found %v", m.want(), err), "", nil
	}
	var diffs []string
	if ce.Kind != routerlog.InvalidValue {
		diffs = append(diffs, fmt.Sprintf("the error is of kind %s", ce.Kind))
	}
	if ce.Flag != m.flag && ce.Arg != m.flag {
		diffs = append(diffs, fmt.Sprintf("it is about %q", ce.Arg))
	}
	if ce.Value != m.value {
		diffs = append(diffs, fmt.Sprintf("the refused value is %q", ce.Value))
	}
	if m.possibleValues != nil && !slices.Equal(ce.PossibleValues, m.possibleValues) {
		diffs = append(diffs, fmt.Sprintf("the possible values are %s", strings.Join(ce.PossibleValues, ", ")))
	}
	if m.tip != nil {
		switch {
		case *m.tip == "" && len(ce.Tips) > 0:
			diffs = append(diffs, fmt.Sprintf("clap offered %q", ce.Tips))
		case *m.tip != "" && len(ce.Tips) == 0:
			diffs = append(diffs, "clap offered no similar value")
		case *m.tip != "" && !slices.Contains(ce.Tips, *m.tip):
			diffs = append(diffs, fmt.Sprintf("clap offered %q", ce.Tips))
		}
	}
	for _, l := range m.lines {
		if !strings.Contains(ce.Text, l) {
			diffs = append(diffs, fmt.Sprintf("the block lacks the line %q", l))
		}
	}
	ev := fmt.Sprintf("clap's output from line %d:\n%s", ce.Line, indent(ce.Text, "  | "))
	return len(diffs) == 0,
		fmt.Sprintf("Expected %s, but %s; %s", m.want(), strings.Join(diffs, "; "), ev),
		fmt.Sprintf("Expected not %s, but it did; %s", m.want(), ev),
		nil
}
