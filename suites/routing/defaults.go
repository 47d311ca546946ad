package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimDefaults: the policy a router starts with when no policy flag is given.
const ClaimDefaults = "defaults"

var _ = register(Claim{
	Name:        ClaimDefaults,
	Title:       "Default policy",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		out := need(nil, e.Banner != "" || len(e.Scorers) > 0, "defaults needs banner or scorers")
		return requireBanner(out, e.Banner)
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		DefaultsSpec(func() DefaultsSpecInput { return DefaultsSpecInput{Input: input()} })
	},
})

// DefaultsSpecInput is the input of DefaultsSpec.
type DefaultsSpecInput struct {
	Input
}

// DefaultsSpec: with no policy flag each argv router logs the CacheAware
// banner with the documented thresholds; llm-d-router's effective
// EndpointPickerConfig carries the 3/2/2 scorer weights.
func DefaultsSpec(input func() DefaultsSpecInput) {
	var (
		in  DefaultsSpecInput
		exp fixtures.Expectation
		dep clusters.Deployment
	)
	BeforeEach(func(ctx SpecContext) {
		in = input()
		exp = in.begin("DefaultsSpec", ClaimDefaults)
		dep = in.ready(ctx, ClaimDefaults, exp.RouterArgs)
	})

	It("starts with the documented default policy when no policy flag is given", func(ctx SpecContext) {
		if len(exp.Scorers) > 0 {
			expectScorers(ctx, in.Target, dep, in.Pair, exp)
			return
		}
		b := in.waitBanner(ctx, ClaimDefaults, dep)
		measured := "policy: " + b.Policy.String()
		report.Record(report.Banner{Claim: ClaimDefaults, Pair: in.Pair.String(), Expected: exp.Banner, Line: b.Summary()})
		report.Record(report.Claim{Claim: ClaimDefaults, Pair: in.Pair.String(), Expected: exp.Banner, Measured: measured})
		expectBanner(b, exp.Banner)
	})
}

// expectScorers checks each documented scorer weight twice: in the
// EndpointPickerConfig the operator rendered (epp.yaml of the router
// ConfigMap, read through the target) and in the epp container's startup
// line that prints the configuration after defaults are applied (weights
// as %.2f, docs/llmd.md#startup-log-lines).
func expectScorers(ctx context.Context, t Target, dep clusters.Deployment, p api.Pair, exp fixtures.Expectation) {
	GinkgoHelper()
	By("reading the rendered EndpointPickerConfig from the router ConfigMap")
	cfg, err := dep.RouterConfig(ctx)
	Expect(err).NotTo(HaveOccurred(), "reading the router ConfigMap")
	rendered, err := profileWeights(cfg["epp.yaml"])
	Expect(err).NotTo(HaveOccurred(), "epp.yaml of the router ConfigMap:\n%s", cfg["epp.yaml"])

	By("reading the epp's effective configuration from its startup log")
	line := effectiveConfig(ctx, t, ClaimDefaults, dep)

	var missing, found []string
	for _, s := range exp.Scorers {
		if w, ok := rendered[s.Profile][s.Plugin]; !ok || w != s.Weight {
			missing = append(missing, fmt.Sprintf("epp.yaml %s: %s weight %v (rendered: %v)", s.Profile, s.Plugin, s.Weight, rendered[s.Profile]))
		}
		want := fmt.Sprintf("{PluginRef: %s, Weight: %.2f}", s.Plugin, s.Weight)
		profile := fmt.Sprintf("{Name: %s, Plugins: [", s.Profile)
		i := strings.Index(line, profile)
		if i < 0 || !strings.Contains(line[i:], want) {
			missing = append(missing, "effective configuration "+s.Profile+": "+want)
			continue
		}
		found = append(found, fmt.Sprintf("%s %s %.0f", s.Profile, s.Plugin, s.Weight))
	}
	report.Record(report.Claim{Claim: ClaimDefaults, Pair: p.String(), Expected: exp.Summary,
		Measured: "rendered and effective: " + strings.Join(found, ", ")})
	Expect(missing).To(BeEmpty(), "scorers missing or different; effective configuration line: %s", line)
}

// profileWeights reads an EndpointPickerConfig's scheduling profiles into
// profile -> plugin -> weight; a plugin listed without a weight has the
// loader's default 1 (docs/llmd.md#config-file).
func profileWeights(doc string) (map[string]map[string]float64, error) {
	var cfg struct {
		Profiles []struct {
			Name    string `json:"name"`
			Plugins []struct {
				PluginRef string   `json:"pluginRef"`
				Weight    *float64 `json:"weight"`
			} `json:"plugins"`
		} `json:"schedulingProfiles"`
	}
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Profiles) == 0 {
		return nil, fmt.Errorf("no schedulingProfiles")
	}
	out := map[string]map[string]float64{}
	for _, p := range cfg.Profiles {
		out[p.Name] = map[string]float64{}
		for _, pl := range p.Plugins {
			w := 1.0
			if pl.Weight != nil {
				w = *pl.Weight
			}
			out[p.Name][pl.PluginRef] = w
		}
	}
	return out, nil
}

// effectiveConfig is the configuration the epp's "Effective raw
// configuration" startup line prints: the EndpointPickerConfig it runs,
// after defaults, with weights as %.2f and plugin parameters as JSON
// (docs/llmd.md#startup-log-lines). The line is a zap JSON object whose
// config field holds it; a line that is not JSON is returned whole.
func effectiveConfig(ctx context.Context, t Target, claim string, dep clusters.Deployment) string {
	GinkgoHelper()
	const marker = "Effective raw configuration"
	var line string
	t.eventually(ctx, claim, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{Container: api.ContainerEPP})
		if err != nil {
			return err
		}
		for _, l := range routerlog.Lines(logs) {
			if strings.Contains(l.Text, marker) {
				line = l.Text
				return nil
			}
		}
		return fmt.Errorf("no %q line in the epp log yet", marker)
	}).Should(Succeed())
	var fields struct {
		Config string `json:"config"`
	}
	if err := json.Unmarshal([]byte(line), &fields); err == nil && fields.Config != "" {
		return fields.Config
	}
	return line
}
