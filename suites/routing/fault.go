package routing

// The resilience claims (deleterouter.go, killengine.go, engineerrors.go,
// metricshang.go, routerhang.go) share this spec shape: a fault injected
// into the shared deployment while background traffic runs, the failed
// requests held to the row's bound, the deployment whole again within
// <claim>/recover, and put back as created. Each claim's file holds the
// fault itself and what it asserts beyond that.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// FaultRow is what a resilience claim's rows state.
type FaultRow struct {
	Fault Fault `json:"fault"`
}

// Fault is what a resilience claim's fault is held to.
type Fault struct {
	// Status is the engine's answer for a fault that makes it answer one.
	Status int `json:"status,omitempty"`
	// Concurrency of the traffic during the fault (default 2).
	Concurrency int `json:"concurrency,omitempty"`
	// Failed bounds the failed requests over the fault.
	Failed fixtures.Bound `json:"failed"`
	// Recovery says what "whole again" means for this fault; it must hold
	// within <claim>/recover.
	Recovery string `json:"recovery"`
	// Counters are router series that rise by exactly Rise over the fault.
	Counters []Counter `json:"counters,omitempty"`
}

// Check implements yamlbind.Checker.
func (f Fault) Check() []string {
	var out []string
	if f.Status != 0 && f.Status < 500 {
		out = append(out, "status must be a 5xx")
	}
	if f.Concurrency < 0 {
		out = append(out, "concurrency must not be negative")
	}
	return out
}

// Counter is a router series and its exact rise.
type Counter struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Rise   float64           `json:"rise"`
}

// Injection injects a claim's fault into a running fault spec and asserts
// what the claim states of it.
type Injection func(ctx context.Context, fr *faultRun)

// faultClaim is the registry row of a resilience claim whose specs run
// FaultSpec with inject.
func faultClaim(name, title, asserts string, inject Injection) framework.Claim[FaultRow] {
	return framework.Claim[FaultRow]{
		Name:    name,
		Title:   title,
		Asserts: asserts,
		Labels:  []string{fixtures.LabelNeedsGPU},
		Mutates: true,
		Specs: func(input func() framework.Input[FaultRow]) {
			FaultSpec(func() FaultSpecInput { return FaultSpecInput{Input: input(), Inject: inject} })
		},
	}
}

// FaultSpecInput is the input of FaultSpec.
type FaultSpecInput struct {
	framework.Input[FaultRow]
	// Inject is the claim's fault.
	Inject Injection
}

// Check implements framework.SpecInput.
func (in FaultSpecInput) Check() error {
	if err := in.Input.Check(); err != nil {
		return err
	}
	if in.Inject == nil {
		return errors.New("input.Inject is nil: the claim injects no fault")
	}
	return nil
}

// faultRun is what one fault spec knows while it runs.
type faultRun struct {
	in      FaultSpecInput
	dep     clusters.Deployment
	fi      clusters.FaultInjector
	base    string
	engines map[string]string // engine Pod name -> UID before the fault
}

// FaultSpec injects the claim's fault into its deployment under
// background traffic and asserts what the row states.
func FaultSpec(input func() FaultSpecInput) {
	framework.CheckInput("FaultSpec", input)
	var in FaultSpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
	})

	It("keeps failed requests within the stated bound and is whole again within its interval", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		fr := &faultRun{in: in, dep: dep, fi: in.Injector(dep)}
		in.RestoreAfter(ctx, dep)
		var err error
		fr.base, err = dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())
		fr.engines = clusters.ReplicaUIDs(in.Replicas(ctx, dep))
		in.Inject(ctx, fr)
	})
}

func (fr *faultRun) concurrency() int {
	if c := fr.in.Expect.Fault.Concurrency; c > 0 {
		return c
	}
	return framework.LoadConcurrency
}

// record writes the claim's verdict line and the disruption, and asserts
// the bound.
func (fr *faultRun) record(action string, s framework.LoadSummary, recovery time.Duration, extra string) {
	GinkgoHelper()
	d := fr.in.Disrupted(action, s, fr.concurrency(), fr.in.Expect.Fault.Failed, recovery)
	measured := fmt.Sprintf("%s: %d of %d requests failed (bound %d = %s)", action, s.Failed, s.Requests, d.FailedBound, d.Bound)
	if recovery > 0 {
		measured += fmt.Sprintf("; whole again after %.2fs (bound %.0fs)", recovery.Seconds(), d.RecoveryBoundSeconds)
	}
	if extra != "" {
		measured += "; " + extra
	}
	fr.in.Record(fr.in.Row.Summary, measured)
	framework.ExpectWithinBound(d, fr.in.Expect.Fault.Failed.Why)
}

// warm starts the background traffic and waits until it flows.
func (fr *faultRun) warm(ctx context.Context) *framework.Load {
	GinkgoHelper()
	l := fr.in.StartLoad(ctx, fr.base, fr.concurrency())
	fr.in.WaitOK(ctx, l, 2*framework.LoadBatch, time.Now())
	return l
}

// busiest is the replica whose engine counter rose most since before:
// the one the traffic goes to, which the fault then hits.
func (fr *faultRun) busiest(ctx context.Context, rs []clusters.Replica, before map[string]metrics.Snapshot) clusters.Replica {
	GinkgoHelper()
	s := fr.in.SplitOnce(ctx, fr.dep, rs, before,
		WithTransform(func(s split.Split) int { return s.Total() }, BeNumerically(">", 0)), "rose")
	pick := rs[0]
	for _, r := range rs {
		if s.Count(r.Name) > s.Count(pick.Name) {
			pick = r
		}
	}
	return pick
}

// expectEngines asserts the engine Pods are those from before, but the
// replaced ones.
func (fr *faultRun) expectEngines(ctx context.Context, why string, replaced ...string) {
	GinkgoHelper()
	Expect(clusters.ReplicaUIDs(fr.in.Replicas(ctx, fr.dep))).To(assertions.HavePodsReplaced(fr.engines, replaced...), "engine Pods before and after: %s", why)
}

// lineWith is the first line of a failure message that contains needle
// (else its first line): the line that says what went wrong.
func lineWith(msg, needle string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for _, l := range lines {
		if strings.Contains(l, needle) {
			return strings.TrimSpace(l)
		}
	}
	return lines[0]
}
