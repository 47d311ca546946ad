package routing

// What the prefill/decode claims share: the pair's shape, its replicas by
// pool, and the traffic spec that measures each pool's split, the
// router's counters and the banner's routing mode.

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// PDShape is the prefill/decode pair a claim runs on: replicas per role.
type PDShape struct {
	Prefill int32 `json:"prefill"`
	Decode  int32 `json:"decode"`
}

// Check implements yamlbind.Checker.
func (s PDShape) Check() []string {
	if s.Prefill < 1 || s.Decode < 1 {
		return []string{"pd needs at least one prefill and one decode replica"}
	}
	return nil
}

// shared is the one case of a claim on the shared pair of this shape,
// run with args.
func (s PDShape) shared(args []string) []framework.Case {
	d := framework.Shared(args)
	d.Prefill, d.Decode = s.Prefill, s.Decode
	return []framework.Case{{Deployment: d}}
}

// PDTraffic is a prefill/decode pair that serial chats pass through: its
// shape, the banner's routing mode and each pool's split of the requests
// by the engines' counters (every request passes through both pools).
type PDTraffic struct {
	PDShape
	// Requests is how many serial chats the claim sends.
	Requests int `json:"requests"`
	// Mode is the banner's routing mode, "mode: <Debug form>".
	Mode         string         `json:"mode"`
	PrefillSplit fixtures.Split `json:"prefillSplit"`
	DecodeSplit  fixtures.Split `json:"decodeSplit"`
}

// Check implements yamlbind.Checker.
func (t PDTraffic) Check() []string {
	out := t.PDShape.Check()
	if !strings.HasPrefix(t.Mode, "mode: ") {
		out = append(out, fmt.Sprintf("mode %q must be written \"mode: <the mode as the router prints it>\"", t.Mode))
	}
	if t.Requests < 1 {
		out = append(out, "requests must be at least 1")
	}
	return out
}

// PDTrafficRow is what the prefill/decode traffic claims' rows state
// (their routerArgs are the pair's).
type PDTrafficRow struct {
	Banner framework.Banner `json:"banner,omitempty"`
	PD     PDTraffic        `json:"pd"`
	// Series rise (delta set) or exist as documented, per pool.
	Series []fixtures.Series `json:"series"`
}

// pools lists the engine replicas by pool, expecting the shape.
func pools(ctx context.Context, dep clusters.Deployment, shape PDShape) (prefill, decode []clusters.Replica) {
	GinkgoHelper()
	rs, err := dep.Replicas(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, r := range rs {
		switch r.Kind {
		case api.RoleKindPrefill:
			prefill = append(prefill, r)
		case api.RoleKindDecode:
			decode = append(decode, r)
		}
	}
	Expect(prefill).To(HaveLen(int(shape.Prefill)), "prefill replicas of %s", dep.Name())
	Expect(decode).To(HaveLen(int(shape.Decode)), "decode replicas of %s", dep.Name())
	return prefill, decode
}

// poolOf is the replicas a series' worker label names: its pool's, or all.
func poolOf(pool string, prefill, decode []clusters.Replica) []clusters.Replica {
	switch pool {
	case fixtures.PoolPrefill:
		return prefill
	case fixtures.PoolDecode:
		return decode
	}
	return append(append([]clusters.Replica{}, prefill...), decode...)
}

// pdTrafficSpec is the body of the prefill/decode traffic claims: on the
// row's pair, the banner shows the documented policy and routing mode;
// pd.requests serial chats pass through both pools (each pool's engine
// counters account for every request) and split per pool as documented;
// the router's series rise (or exist) as documented, per pool.
func pdTrafficSpec(spec, text string, input func() framework.Input[PDTrafficRow]) {
	framework.CheckInput(spec, input)
	var in framework.Input[PDTrafficRow]
	BeforeEach(func() {
		in = input()
		in.Begin()
	})

	It(text, func(ctx SpecContext) {
		pd := in.Expect.PD
		n := pd.Requests
		dep := in.Ready(ctx)

		b := in.WaitBanner(ctx, dep)
		in.RecordBanner(strings.TrimPrefix(pd.Mode+" | "+string(in.Expect.Banner), " | "), b)

		prefill, decode := pools(ctx, dep, pd.PDShape)
		routerBefore := framework.RouterMetrics(ctx, dep)
		before := framework.ScrapeEngines(ctx, dep, poolOf("", prefill, decode))
		rep := in.Send(ctx, in.ChatPlan(ctx, dep, n))
		// Every request passes through both pools: each pool's engine
		// counters account for all n of them.
		preSplit := in.MeasureSplit(ctx, dep, prefill, before, n)
		decSplit := in.MeasureSplit(ctx, dep, decode, before, n)
		title := fmt.Sprintf("%d serial chats, router args %q", n, in.Row.RouterArgs)
		in.RecordSplit("prefill pool: "+title, preSplit, prefill, n, rep.Summary.Failed, framework.ShapeWords(pd.PrefillSplit, n, len(prefill)))
		in.RecordSplit("decode pool: "+title, decSplit, decode, n, rep.Summary.Failed, framework.ShapeWords(pd.DecodeSplit, n, len(decode)))

		measured := []string{"mode: " + b.Mode.String() + " | policy: " + b.Policy.String(), "prefill " + preSplit.Ratio(), "decode " + decSplit.Ratio()}
		var readings []framework.Reading
		for _, s := range in.Expect.Series {
			rs := poolOf(s.Pool, prefill, decode)
			var words string
			var r framework.Reading
			if s.Delta == "" {
				words, r = in.SeriesPresent(ctx, dep, s, rs, nil)
			} else {
				words, r = in.SeriesDelta(ctx, dep, routerBefore, s, rs, n)
			}
			measured = append(measured, words)
			readings = append(readings, r)
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))

		if in.Expect.Banner != "" {
			framework.ExpectBanner(b, in.Expect.Banner)
		}
		By("checking each pool's split")
		framework.ExpectShape(preSplit, pd.PrefillSplit, n)
		framework.ExpectShape(decSplit, pd.DecodeSplit, n)
		for _, r := range readings {
			r.Expect()
		}
		// The banner's mode last: a router that builds another mode must
		// not hide what the pools did.
		if pd.Mode != "" {
			Expect(b).To(assertions.HaveStartedInMode(strings.TrimPrefix(pd.Mode, "mode: ")), "the router's startup banner")
		}
	})
}
