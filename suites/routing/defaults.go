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
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimDefaults: the policy a router starts with when no policy flag is
// given. The argv routers print it in their startup banner; llm-d-router
// has no policy but a scheduling configuration, whose scorer weights the
// operator renders and the epp logs once it has applied its defaults.
const ClaimDefaults = "defaults"

// DefaultsRow is what defaults' rows state: a banner for the argv
// routers, scorer weights for llm-d-router.
type DefaultsRow struct {
	// Banner is the policy the router's startup banner shows.
	Banner framework.Banner `json:"banner,omitempty"`
	// Scorers are the scheduling-profile weights llm-d-router runs with.
	Scorers []Scorer `json:"scorers,omitempty"`
}

// Check implements yamlbind.Checker.
func (r DefaultsRow) Check() []string {
	if r.Banner == "" && len(r.Scorers) == 0 {
		return []string{"defaults needs banner or scorers"}
	}
	return nil
}

// Scorer is one plugin weight in an llm-d scheduling profile.
type Scorer struct {
	Profile string  `json:"profile"`
	Plugin  string  `json:"plugin"`
	Weight  float64 `json:"weight"`
}

func weights(ss []Scorer) []assertions.Weight {
	var out []assertions.Weight
	for _, s := range ss {
		out = append(out, assertions.Weight{Profile: s.Profile, Plugin: s.Plugin, Weight: s.Weight})
	}
	return out
}

var _ = framework.Add(Registry, framework.Claim[DefaultsRow]{
	Name:  ClaimDefaults,
	Title: "Default policy",
	Asserts: "with no policy flag the banner reads `policy: CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, " +
		"balance_rel_threshold: 1.5, ... }`; llm-d-router's rendered `epp.yaml` (read from the router ConfigMap) and its " +
		"effective-configuration log line score prefix-cache 3, queue 2, kv-cache-utilization 2",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Specs:       DefaultsSpec,
})

// DefaultsSpec: with no policy flag each argv router logs the CacheAware
// banner with the documented thresholds; llm-d-router's effective
// EndpointPickerConfig carries the 3/2/2 scorer weights.
func DefaultsSpec(input func() framework.Input[DefaultsRow]) {
	framework.CheckInput("DefaultsSpec", input)
	var (
		in  framework.Input[DefaultsRow]
		dep clusters.Deployment
	)
	BeforeEach(func(ctx SpecContext) {
		in = input()
		in.Begin()
		dep = in.Ready(ctx)
	})

	It("starts with the documented default policy when no policy flag is given", func(ctx SpecContext) {
		if len(in.Expect.Scorers) > 0 {
			expectScorers(ctx, in.Spec, dep, in.Expect.Scorers)
			return
		}
		b := in.WaitBanner(ctx, dep)
		in.RecordBanner(string(in.Expect.Banner), b)
		in.Record(string(in.Expect.Banner), "policy: "+b.Policy.String())
		framework.ExpectBanner(b, in.Expect.Banner)
	})
}

// expectScorers checks each documented scorer weight twice: in the
// EndpointPickerConfig the operator rendered (epp.yaml of the router
// ConfigMap, read through the target) and in the epp container's startup
// line that prints the configuration after defaults are applied (weights
// as %.2f, docs/llmd.md#startup-log-lines).
func expectScorers(ctx context.Context, in framework.Spec, dep clusters.Deployment, scorers []Scorer) {
	GinkgoHelper()
	By("reading the rendered EndpointPickerConfig from the router ConfigMap")
	cfg, err := dep.RouterConfig(ctx)
	Expect(err).NotTo(HaveOccurred(), "reading the router ConfigMap")
	rendered, err := profileWeights(cfg["epp.yaml"])
	Expect(err).NotTo(HaveOccurred(), "epp.yaml of the router ConfigMap:\n%s", cfg["epp.yaml"])

	By("reading the epp's effective configuration from its startup log")
	sc := assertions.SchedulingConfig{Rendered: rendered, Effective: effectiveConfig(ctx, in, dep)}
	var found []string
	for _, s := range scorers {
		found = append(found, fmt.Sprintf("%s %s %v", s.Profile, s.Plugin, rendered[s.Profile][s.Plugin]))
	}
	in.Record(in.Row.Summary, "rendered: "+strings.Join(found, ", "))
	Expect(sc).To(assertions.HaveSchedulingWeights(weights(scorers)...))
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
func effectiveConfig(ctx context.Context, in framework.Spec, dep clusters.Deployment) string {
	GinkgoHelper()
	const marker = "Effective raw configuration"
	var line string
	in.Eventually(ctx, config.OpWaitLogs, func(ctx context.Context) error {
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
