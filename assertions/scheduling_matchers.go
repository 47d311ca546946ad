package assertions

import (
	"fmt"
	"strings"

	"github.com/onsi/gomega/types"
)

// Weight is one plugin weight of an llm-d scheduling profile.
type Weight struct {
	Profile, Plugin string
	Weight          float64
}

// SchedulingConfig is llm-d-router's scheduling configuration read twice:
// Rendered, the EndpointPickerConfig the operator rendered (profile ->
// plugin -> weight; nil when it was not read), and Effective, the epp's
// startup line that prints the configuration after defaults (weights as
// %.2f, docs/llmd.md#startup-log-lines).
type SchedulingConfig struct {
	Rendered  map[string]map[string]float64
	Effective string
}

// effectiveWeight reports whether the effective configuration gives
// plugin weight w in profile: "{Name: <profile>, Plugins: [... {PluginRef:
// <plugin>, Weight: <w>} ...]}".
func (c SchedulingConfig) effectiveWeight(w Weight) bool {
	i := strings.Index(c.Effective, fmt.Sprintf("{Name: %s, Plugins: [", w.Profile))
	if i < 0 {
		return false
	}
	rest := c.Effective[i:]
	if j := strings.Index(rest, "]}"); j >= 0 {
		rest = rest[:j]
	}
	return strings.Contains(rest, fmt.Sprintf("{PluginRef: %s, Weight: %.2f}", w.Plugin, w.Weight))
}

// HaveSchedulingWeights succeeds when each documented weight is in the
// effective configuration and, when it was read, the rendered one. The
// evidence is a table of every weight (documented, rendered, effective)
// and the effective configuration line.
func HaveSchedulingWeights(want ...Weight) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		c, ok := actual.(SchedulingConfig)
		if !ok {
			return false, "", "", wrongType("HaveSchedulingWeights", "an assertions.SchedulingConfig", actual)
		}
		var rows [][]string
		wrong := 0
		for _, w := range want {
			rendered, eff := "not read", "missing"
			good := true
			if c.Rendered != nil {
				got, has := c.Rendered[w.Profile][w.Plugin]
				rendered = "missing"
				if has {
					rendered = fmt.Sprint(got)
				}
				good = has && got == w.Weight
			}
			if c.effectiveWeight(w) {
				eff = fmt.Sprintf("%.2f", w.Weight)
			} else {
				good = false
			}
			if !good {
				wrong++
			}
			rows = append(rows, []string{w.Profile, w.Plugin, fmt.Sprint(w.Weight), rendered, eff, mark(good, "differs")})
		}
		ev := table([]string{"profile", "plugin", "documented", "rendered", "effective", ""}, rows) +
			"\n  effective configuration:\n" + indent(c.Effective, "    ")
		return wrong == 0,
			fmt.Sprintf("Expected every documented scorer weight in the scheduling configuration, but %d of %d differ:\n%s", wrong, len(want), ev),
			fmt.Sprintf("Expected the documented scorer weights not to be in the scheduling configuration, but they are:\n%s", ev),
			nil
	}}
}
