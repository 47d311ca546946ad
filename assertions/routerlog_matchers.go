package assertions

import (
	"fmt"
	"slices"
	"strings"

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

// BannerMatcher checks one part of the last startup banner in a router's
// log: its policy, mode or kv_connector.
type BannerMatcher struct {
	evidenceMatcher
	part   string // "policy", "mode", "kv_connector"
	name   string
	fields []any
}

// HaveStartedWithPolicy succeeds when the router's last startup banner
// (docs/routers.md#banner) shows policy name (the Debug variant name:
// "CacheAware", "RoundRobin", ...) and each given field has the given value.
// fields are pairs of field name and value; values compare as
// rustdebug.Value.Matches says (0.3 matches `0.3`, 1 matches `1.0`, a string
// matches a string, a variant or the Debug text):
//
//	Expect(logs).To(HaveStartedWithPolicy("CacheAware", "cache_threshold", 0.3, "balance_abs_threshold", 64))
//
// The actual value is log text (string or []byte), ANSI codes and all.
func HaveStartedWithPolicy(name string, fields ...any) *BannerMatcher {
	return newBannerMatcher("policy", name, fields)
}

// HaveStartedWithMode is HaveStartedWithPolicy for the routing mode
// ("Regular", "VllmPrefillDecode", "PrefillDecode"), e.g.
// HaveStartedWithMode("VllmPrefillDecode", "prefill_policy", "Some(RoundRobin)").
func HaveStartedWithMode(name string, fields ...any) *BannerMatcher {
	return newBannerMatcher("mode", name, fields)
}

// HaveStartedWithKVConnector checks vllm-router's kv_connector ("Nixl",
// "Mooncake", "MoriIO"). A banner without one (sgl-model-gateway) fails.
func HaveStartedWithKVConnector(name string) *BannerMatcher {
	return newBannerMatcher("kv_connector", name, nil)
}

func newBannerMatcher(part, name string, fields []any) *BannerMatcher {
	m := &BannerMatcher{part: part, name: name, fields: fields}
	m.check = m.run
	return m
}

func (m *BannerMatcher) want() string {
	if len(m.fields) == 0 {
		return m.part + " " + m.name
	}
	parts := make([]string, 0, len(m.fields)/2)
	for i := 0; i+1 < len(m.fields); i += 2 {
		parts = append(parts, fmt.Sprintf("%v: %v", m.fields[i], m.fields[i+1]))
	}
	return fmt.Sprintf("%s %s { %s }", m.part, m.name, strings.Join(parts, ", "))
}

func (m *BannerMatcher) run(actual any) (bool, string, string, error) {
	matcher := map[string]string{"policy": "HaveStartedWithPolicy", "mode": "HaveStartedWithMode", "kv_connector": "HaveStartedWithKVConnector"}[m.part]
	if len(m.fields)%2 != 0 {
		return false, "", "", fmt.Errorf("%s(%q, ...): fields must be name, value pairs; got %d arguments", matcher, m.name, len(m.fields))
	}
	for i := 0; i < len(m.fields); i += 2 {
		if _, ok := m.fields[i].(string); !ok {
			return false, "", "", fmt.Errorf("%s(%q, ...): field name %d is a %T, want a string", matcher, m.name, i/2, m.fields[i])
		}
	}
	var b routerlog.Banner
	var count int
	switch v := actual.(type) {
	case routerlog.Banner:
		b, count = v, 1
	default:
		logs, err := logText(matcher, actual)
		if err != nil {
			return false, "", "", err
		}
		bs, _ := routerlog.FindBanners(logs)
		if len(bs) == 0 {
			_, err := routerlog.FindBanner(logs) // the *NoBannerError, with the log's tail
			return false, "", "", fmt.Errorf("%s: expected a startup banner showing %s, but found %w", matcher, m.want(), err)
		}
		// The last banner is the running process's; how many there were is evidence.
		b, count = bs[len(bs)-1], len(bs)
	}
	var v rustdebug.Value
	switch m.part {
	case "policy":
		v = b.Policy
	case "mode":
		v = b.Mode
	default:
		if !b.HasKVConnector {
			return false, fmt.Sprintf("Expected the startup banner to show kv_connector %s, but it has no kv_connector part (sgl-model-gateway prints none):\n%s", m.name, bannerEvidence(b, count)), "", nil
		}
		v = b.KVConnector
	}
	var diffs []string
	if v.TypeName() != m.name {
		// Another variant: its fields say nothing about the wanted one's.
		diffs = append(diffs, fmt.Sprintf("%s is %s", m.part, v.TypeName()))
	} else {
		for i := 0; i < len(m.fields); i += 2 {
			f := m.fields[i].(string)
			got, ok := v.Field(f)
			switch {
			case !ok && len(v.Fields) == 0:
				diffs = append(diffs, fmt.Sprintf("%s %s has no fields, so no %s", m.part, m.name, f))
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s has no field %s (its fields: %s)", m.part, f, strings.Join(v.FieldNames(), ", ")))
			case !got.Matches(m.fields[i+1]):
				diffs = append(diffs, fmt.Sprintf("%s.%s is %s, want %v", m.part, f, got, m.fields[i+1]))
			}
		}
	}
	ev := bannerEvidence(b, count)
	return len(diffs) == 0,
		fmt.Sprintf("Expected the router's startup banner to show %s, but %s:\n%s", m.want(), strings.Join(diffs, "; "), ev),
		fmt.Sprintf("Expected the router's startup banner not to show %s, but it does:\n%s", m.want(), ev),
		nil
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
	kind           routerlog.ClapErrorKind
	value, flag    string
	possibleValues []string
	tip            *string // nil: not checked; "": no tip expected
}

// HaveRefusedPolicyValue succeeds when the output holds clap's
// `error: invalid value '<value>' for '<flag> <...>'`. Chain
// WithPossibleValues, WithTip or WithoutTip to check the rest of the block.
func HaveRefusedPolicyValue(value, flag string) *ClapMatcher {
	m := &ClapMatcher{kind: routerlog.InvalidValue, value: value, flag: flag}
	m.check = m.run
	return m
}

// HaveRefusedRepeatedArgument succeeds when the output holds clap's
// `error: the argument '<flag> <...>' cannot be used multiple times`.
func HaveRefusedRepeatedArgument(flag string) *ClapMatcher {
	m := &ClapMatcher{kind: routerlog.ArgumentRepeated, flag: flag}
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

// name is the constructor that built m, for error messages.
func (m *ClapMatcher) name() string {
	if m.kind == routerlog.ArgumentRepeated {
		return "HaveRefusedRepeatedArgument"
	}
	return "HaveRefusedPolicyValue"
}

func (m *ClapMatcher) want() string {
	var w string
	if m.kind == routerlog.InvalidValue {
		w = fmt.Sprintf("clap to refuse %q for %s", m.value, m.flag)
	} else {
		w = fmt.Sprintf("clap to refuse %s given more than once", m.flag)
	}
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
	return w
}

func (m *ClapMatcher) run(actual any) (bool, string, string, error) {
	out, err := logText(m.name(), actual)
	if err != nil {
		return false, "", "", err
	}
	ce, err := routerlog.FindClapError(out)
	if err != nil {
		return false, fmt.Sprintf("Expected %s, but found %v", m.want(), err), "", nil
	}
	var diffs []string
	if ce.Kind != m.kind {
		diffs = append(diffs, fmt.Sprintf("the error is of kind %s", ce.Kind))
	}
	if ce.Flag != m.flag {
		diffs = append(diffs, fmt.Sprintf("it is about %q", ce.Arg))
	}
	if m.kind == routerlog.InvalidValue && ce.Value != m.value {
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
	ev := fmt.Sprintf("clap's output from line %d:\n%s", ce.Line, indent(ce.Text, "  | "))
	return len(diffs) == 0,
		fmt.Sprintf("Expected %s, but %s; %s", m.want(), strings.Join(diffs, "; "), ev),
		fmt.Sprintf("Expected not %s, but it did; %s", m.want(), ev),
		nil
}
