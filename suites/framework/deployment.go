package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// PairDeployment is one ModelDeployment of a pair, as a plan's Deployment
// describes it. It is created by the first spec that asks for it, so the
// spec's own skips (not applicable, target cannot run the pair, no free
// accelerators) come first and keep their reasons; later specs get the same
// object, or the same failure. On a GPU cluster each one is an image pull
// and a model load per engine Pod, which is why cases that can share one
// do (see the package documentation).
//
// It is not safe for concurrent use: a Ginkgo process runs one spec at a
// time, and an Ordered container keeps its specs on one process.
type PairDeployment struct {
	Pair api.Pair
	Deployment
	// Name is metadata.name.
	Name string

	// perSpec: created for one spec, deleted when that spec ends.
	perSpec  bool
	created  bool
	by       string // the spec that created it
	dep      clusters.Deployment
	err      error // Deploy's answer
	waited   bool
	readyErr error
	released bool
	// collected is the spec whose artifacts were already written.
	collected string
}

// NewPairDeployment is the deployment d of p named name, shared by the
// specs of one Ordered container (Release it after the last), or, when
// d.Own, the running spec's alone, deleted when the spec ends.
func NewPairDeployment(p api.Pair, d Deployment, name string) *PairDeployment {
	return &PairDeployment{Pair: p, Deployment: d, Name: name, perSpec: d.Own}
}

// options are the fixture options the deployment is built with, its
// router args being args.
func (d *PairDeployment) options(args []string) []fixtures.Option {
	return deploymentOptions(d.Name, d.Deployment, args)
}

// deploymentOptions are the fixture options of deployment d named name
// with router args args.
func deploymentOptions(name string, d Deployment, args []string) []fixtures.Option {
	opts := []fixtures.Option{fixtures.WithName(name), fixtures.WithRouterArgs(args...)}
	if d.Replicas > 0 {
		opts = append(opts, fixtures.WithReplicas(d.Replicas))
	}
	if d.PD() {
		// Last: the pair replaces the server role, with its own replicas.
		opts = append(opts, fixtures.WithPrefillDecode(d.Prefill, d.Decode))
	}
	return opts
}

// Create creates the deployment once, with its RouterArgs, and returns
// the target's answer: the deployment, or the error Deploy gave (an
// admission refusal is a *clusters.AdmissionError), the same answer to
// every later call.
func (d *PairDeployment) Create(ctx context.Context, t Target, claim string) (clusters.Deployment, error) {
	GinkgoHelper()
	if !d.created {
		md := build(t, d.Pair, d.options(d.RouterArgs)...)
		Expect(md.Spec.Router).NotTo(BeNil(), "the suite deploys routed ModelDeployments only")
		Expect(md.Spec.Roles).NotTo(BeEmpty())
		By(fmt.Sprintf("creating ModelDeployment %s (%s in front of %s, router args %q)", md.Metadata.Name,
			md.Spec.Router.Name, roleWords(md), md.Spec.Router.ExtraArgs))
		d.created, d.by = true, CurrentSpecReport().FullText()
		d.dep, d.err = t.Cluster.Deploy(ctx, md)
		if d.err == nil && d.perSpec {
			deleted := IntervalOf(t.Config, claim, config.OpWaitDeleted)
			DeferCleanup(func(ctx SpecContext) { d.Release(ctx, t) }, NodeTimeout(deleted.Timeout.D()))
		}
	} else {
		By(fmt.Sprintf("using ModelDeployment %s, created by %q", d.Name, d.by))
	}
	if d.err == nil {
		d.collectAfter(t, claim)
	}
	return d.dep, d.err
}

// Use brings the deployment to router args args and returns it Ready
// with a router Pod of those args: the first spec that asks creates it
// with them (after asking a target with finite capacity for room, and
// skipping with the reason if there is none) and waits, within
// <claim>/wait-ready, for the target's readiness gate (phase Ready,
// RouterReady True, every role serving Confirmed at its desired count,
// docs/operator.md#gotchas) and for the router rollout to be over; a
// later spec with other args edits spec.router.extraArgs (editTo). The
// error is an admission refusal of the create or the edit; anything else
// fails the spec. A deployment that did not become Ready fails every later
// spec at once with the same error, instead of waiting again.
func (d *PairDeployment) Use(ctx context.Context, t Target, claim string, args []string) (clusters.Deployment, error) {
	GinkgoHelper()
	if !d.created {
		if d.RouterArgs = slices.Clone(args); !d.perSpec && editGuardTripped(t) {
			// Created after the guard tripped: named for its args, as the
			// fallback names every deployment it creates.
			d.Name = fallbackName(d.Deployment, d.Pair)
		}
		if cc, ok := t.Cluster.(clusters.CapacityChecker); ok {
			md := build(t, d.Pair, d.options(args)...)
			fits, reason, err := cc.CanRun(ctx, md)
			Expect(err).NotTo(HaveOccurred(), "checking free accelerators for %s", d.Name)
			if !fits {
				Skip(fmt.Sprintf("target %s has no room for %s: %s", t.Env.Target, d.Name, reason))
			}
		}
	}
	dep, err := d.Create(ctx, t, claim)
	if err != nil {
		return nil, err
	}
	if !d.waited {
		d.waited = true
		d.readyErr = d.waitReady(ctx, t, claim, config.OpWaitReady)
	}
	Expect(d.readyErr).NotTo(HaveOccurred(), "%s/%s did not become Ready", dep.Namespace(), dep.Name())
	obj, err := dep.Object(ctx)
	Expect(err).NotTo(HaveOccurred())
	if slices.Equal(obj.Spec.Router.ExtraArgs, args) {
		return dep, nil
	}
	if !d.perSpec && editGuardTripped(t) {
		return d.recreate(ctx, t, claim, args), nil
	}
	if err := d.editTo(ctx, t, claim, args); err != nil {
		return nil, err
	}
	return d.dep, nil
}

// Ready is Use, failing the spec on an admission refusal.
func (d *PairDeployment) Ready(ctx context.Context, t Target, claim string, args []string) clusters.Deployment {
	GinkgoHelper()
	dep, err := d.Use(ctx, t, claim, args)
	Expect(err).NotTo(HaveOccurred(), "bringing %s to router args %q", d.Name, args)
	return dep
}

// waitReady waits, within <claim>/op, for the readiness gate and the end
// of the router rollout (clusters.Deployment.WaitReady).
func (d *PairDeployment) waitReady(ctx context.Context, t Target, claim, op string) error {
	GinkgoHelper()
	iv := IntervalOf(t.Config, claim, op)
	By(fmt.Sprintf("waiting up to %s for %s to be Ready with every replica confirmed behind the router", iv.Timeout.D(), d.dep.Name()))
	wctx, cancel := context.WithTimeout(ctx, iv.Timeout.D())
	defer cancel()
	return d.dep.WaitReady(wctx, iv.Poll.D())
}

// collectAfter writes the deployment's artifacts under
// artifacts/<spec>/<deployment> when the running spec ends, as configured
// (on failure by default). DeferCleanup is LIFO, so a per-spec deployment's
// artifacts are written before it is deleted.
func (d *PairDeployment) collectAfter(t Target, claim string) {
	deleted := IntervalOf(t.Config, claim, config.OpWaitDeleted)
	DeferCleanup(func(ctx SpecContext) { d.collect(ctx, t) }, NodeTimeout(deleted.Timeout.D()))
}

func (d *PairDeployment) collect(ctx context.Context, t Target) {
	spec := CurrentSpecReport()
	mode := t.Config.CollectArtifacts
	if mode == config.CollectNever || (mode == config.CollectOnFailure && !spec.Failed()) || d.released || d.collected == spec.FullText() {
		return
	}
	d.collected = spec.FullText()
	dir := filepath.Join(t.Config.Artifacts, specDir(spec), d.Name)
	if err := d.dep.CollectArtifacts(ctx, dir); err != nil {
		// A partial dump never fails a spec; say what is missing.
		GinkgoWriter.Printf("artifacts of %s are incomplete: %v\n", d.Name, err)
	}
	AddReportEntry("artifacts", dir, ReportEntryVisibilityFailureOrVerbose)
}

// specDir names a spec's artifacts folder: its text without the shared
// deployment's container, which would make every name start alike.
func specDir(spec SpecReport) string {
	var parts []string
	for _, c := range spec.ContainerHierarchyTexts {
		if !strings.HasPrefix(c, sharedTextPrefix) {
			parts = append(parts, c)
		}
	}
	return DNSLabel(strings.Join(append(parts, spec.LeafNodeText), " "))
}

// Release deletes the deployment (unless skipCleanup) and records what it
// cost as a deployment-cost report entry, once. A cost the target could not
// count is recorded as not counted, with the target's reason, never as
// zeros. Called by DeferCleanup after the last spec that uses it, or
// earlier by a spec that is done with it.
func (d *PairDeployment) Release(ctx context.Context, t Target) {
	GinkgoHelper()
	if !d.created || d.err != nil || d.released {
		return
	}
	if d.perSpec {
		d.collect(ctx, t) // a spec releasing early still leaves its artifacts
	}
	d.released = true
	obj, _ := d.dep.Object(ctx)
	args := d.RouterArgs
	if obj != nil && obj.Spec.Router != nil {
		args = obj.Spec.Router.ExtraArgs
	}
	entry := report.DeploymentCost{Name: d.dep.Name(), Namespace: d.dep.Namespace(), Pair: d.Pair.String(), RouterArgs: args}
	var delErr error
	if !t.Config.SkipCleanup {
		By("deleting " + d.dep.Name())
		delErr = d.dep.Delete(ctx)
		entry.Deleted = delErr == nil
	}
	if cost, err := d.dep.Cost(ctx); err != nil {
		entry.Error = err.Error() // the same for every deployment of a target, so the report lists it once
	} else {
		entry.Cost = &cost
	}
	report.Record(entry)
	Expect(delErr).NotTo(HaveOccurred(), "deleting %s/%s", d.dep.Namespace(), d.dep.Name())
}

// roleWords says what engines md runs: "2 vLLM replicas", or "2 prefill
// and 2 decode vLLM replicas".
func roleWords(md *api.ModelDeployment) string {
	var parts []string
	for _, r := range md.Spec.Roles {
		if r.RoleKind() == api.RoleKindServer {
			parts = append(parts, fmt.Sprint(r.RoleReplicas()))
		} else {
			parts = append(parts, fmt.Sprintf("%d %s", r.RoleReplicas(), strings.ToLower(r.RoleKind())))
		}
	}
	return fmt.Sprintf("%s %s replicas", strings.Join(parts, " and "), md.Spec.Engine.Name)
}

// build is fixtures.ModelDeployment, failing on error.
func build(t Target, p api.Pair, opts ...fixtures.Option) *api.ModelDeployment {
	GinkgoHelper()
	md, err := fixtures.ModelDeployment(t.Config, p, opts...)
	Expect(err).NotTo(HaveOccurred())
	return md
}

// Throwaway is a deployment of p with args for the running spec alone,
// deleted when it ends: a create that admission is expected to refuse (if
// it admits it by mistake, the deployment does not outlive the spec).
func Throwaway(p api.Pair, what string, args ...string) *PairDeployment {
	return NewPairDeployment(p, Deployment{RouterArgs: args, Own: true}, ObjectName(what, p))
}
