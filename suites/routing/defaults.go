package routing

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// DefaultsSpecInput is the input of DefaultsSpec.
type DefaultsSpecInput struct {
	Target
	Pair fixtures.Pair
}

// DefaultsSpec: with no policy flag each argv router logs the CacheAware
// banner with the documented thresholds; llm-d-router's effective
// EndpointPickerConfig carries the 3/2/2 scorer weights.
func DefaultsSpec(input func() DefaultsSpecInput) {
	const spec = config.SpecDefaults
	var (
		in  DefaultsSpecInput
		exp fixtures.Expectation
		dep clusters.Deployment
	)
	BeforeEach(func(ctx SpecContext) {
		in = input()
		in.check("DefaultsSpec", in.Pair)
		exp = expectation(fixtures.ClaimDefaults, in.Pair)
		in.requireRunnable(in.Pair)
		dep = in.deployReady(ctx, spec, in.build(in.Pair, objectName(spec, in.Pair)))
	})

	It("starts with the documented default policy when no policy flag is given", func(ctx SpecContext) {
		if len(exp.Scorers) > 0 {
			expectScorers(ctx, in.Target, dep, in.Pair, exp)
			return
		}
		b := waitBanner(ctx, in.Target, spec, dep)
		measured := "policy: " + b.Policy.String()
		report.Record(report.Banner{Claim: fixtures.ClaimDefaults, Pair: in.Pair.String(), Expected: exp.Banner, Line: b.Summary()})
		report.Record(report.Claim{Claim: fixtures.ClaimDefaults, Pair: in.Pair.String(), Expected: exp.Banner, Measured: measured})
		Expect(b.Summary()).To(ContainSubstring(exp.Banner), "the router's startup banner")
	})
}

// waitBanner waits for the router's startup banner in its current logs.
func waitBanner(ctx context.Context, t Target, spec string, dep clusters.Deployment) routerlog.Banner {
	GinkgoHelper()
	By("reading the router's startup banner")
	var b routerlog.Banner
	t.eventually(ctx, spec, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{})
		if err != nil {
			return err
		}
		b, err = routerlog.FindBanner(logs)
		return err
	}).Should(Succeed())
	return b
}

// expectScorers reads llm-d-router's effective configuration from the epp
// container's startup log (the line that prints it after defaults are
// applied) and checks each documented scorer weight in its profile.
func expectScorers(ctx context.Context, t Target, dep clusters.Deployment, p fixtures.Pair, exp fixtures.Expectation) {
	GinkgoHelper()
	const marker = "Effective raw configuration"
	var line string
	t.eventually(ctx, config.SpecDefaults, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{Container: "epp"})
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
	var missing, found []string
	for _, s := range exp.Scorers {
		want := fmt.Sprintf("{PluginRef: %s, Weight: %.2f}", s.Plugin, s.Weight)
		profile := fmt.Sprintf("{Name: %s, Plugins: [", s.Profile)
		i := strings.Index(line, profile)
		if i < 0 || !strings.Contains(line[i:], want) {
			missing = append(missing, s.Profile+": "+want)
			continue
		}
		found = append(found, fmt.Sprintf("%s %s %.0f", s.Profile, s.Plugin, s.Weight))
	}
	report.Record(report.Claim{Claim: fixtures.ClaimDefaults, Pair: p.String(), Expected: exp.Summary, Measured: strings.Join(found, ", ")})
	Expect(missing).To(BeEmpty(), "scorers missing from the effective configuration: %s", line)
}

var _ = Describe("Default policy", Label(claimLabels(fixtures.ClaimDefaults, LabelNeedsGPU)...), func() {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(pairLabels(fixtures.ClaimDefaults, p)...), func() {
			DefaultsSpec(func() DefaultsSpecInput { return DefaultsSpecInput{Target: suite, Pair: p} })
		})
	}
})
