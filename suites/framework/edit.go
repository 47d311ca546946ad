package framework

// Router args by edit: a shared deployment's cases run with their own
// router args by editing spec.router.extraArgs, which replaces the router
// Pod and leaves the engines alone (docs/operator.md#router-edits). Each
// edit checks that: the engine Pods' UIDs before and after. If an edit
// replaced one (another operator version could), the guard trips for the
// whole run: it says so in one line, records it for the report and for
// the switch claim, and from then on every process creates a deployment
// per router-argument set instead of editing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/report"
)

// editTo edits the deployment's router args to args and waits, within
// <claim>/recover, until it is Ready with a new router Pod of those args
// and none of the old one is left (the target's WaitReady includes the
// end of the rollout), and, for a router that prints one, until the new
// Pod's banner is in its log. The engine Pods must be the ones before the
// edit; if not, the guard trips (the spec goes on: the deployment is
// whole, only dearer). An admission refusal of the edit is returned.
func (d *PairDeployment) editTo(ctx context.Context, t Target, claim string, args []string) error {
	GinkgoHelper()
	dep := d.dep
	from, engines, routers := d.snapshot(ctx)
	By(fmt.Sprintf("editing spec.router.extraArgs of %s from %q to %q", dep.Name(), from, args))
	start := time.Now()
	err := dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = slices.Clone(args) })
	var ae *clusters.AdmissionError
	if errors.As(err, &ae) {
		return err
	}
	Expect(err).NotTo(HaveOccurred(), "editing spec.router.extraArgs of %s to %q", dep.Name(), args)
	Expect(d.waitReady(ctx, t, claim, config.OpRecover)).To(Succeed(), "%s after editing spec.router.extraArgs to %q", dep.Name(), args)
	now := RouterUIDs(ctx, dep)
	for _, uid := range now {
		Expect(routers).NotTo(ContainElement(uid), "router Pods of %s before the edit to %q (%v) and after (%v): the edit must replace them", dep.Name(), args, routers, now)
	}
	if printsBanner(d.Pair) {
		iv := IntervalOf(t.Config, claim, config.OpWaitLogs)
		Eventually(ctx, func(ctx context.Context) error {
			logs, err := dep.RouterLogs(ctx, clusters.LogOptions{})
			if err != nil {
				return err
			}
			_, err = routerlog.FindBanner(logs)
			return err
		}).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D()).Should(Succeed(), "the banner of the new router Pod of %s", dep.Name())
	}
	d.checkEngines(ctx, t, claim, engines, RouterEdit{From: from, To: args, OldRouters: routers, NewRouters: now, Seconds: time.Since(start).Seconds()})
	return nil
}

// printsBanner: vllm-router and sglang-gateway log a startup banner with
// their policy; llm-d's epp logs JSON lines instead.
func printsBanner(p api.Pair) bool { return p.Router != api.RouterLLMD }

// snapshot reads the router args, the engine Pods' UIDs by name and the
// live router Pods' UIDs.
func (d *PairDeployment) snapshot(ctx context.Context) ([]string, map[string]string, []string) {
	GinkgoHelper()
	obj, err := d.dep.Object(ctx)
	Expect(err).NotTo(HaveOccurred())
	rs, err := d.dep.Replicas(ctx)
	Expect(err).NotTo(HaveOccurred())
	return slices.Clone(obj.Spec.Router.ExtraArgs), clusters.ReplicaUIDs(rs), RouterUIDs(ctx, d.dep)
}

// RouterEdit is one edit of a deployment's router args as the guard saw it.
type RouterEdit = report.RouterEdit

// checkEngines compares the engine Pods after an edit with before, records
// the edit, and trips the guard when one was replaced.
func (d *PairDeployment) checkEngines(ctx context.Context, t Target, claim string, before map[string]string, e RouterEdit) {
	GinkgoHelper()
	rs, err := d.dep.Replicas(ctx)
	Expect(err).NotTo(HaveOccurred())
	after := clusters.ReplicaUIDs(rs)
	e.Claim, e.Pair, e.Deployment, e.EnginesKept = claim, d.Pair.String(), d.dep.Name(), maps.Equal(before, after)
	if !e.EnginesKept {
		e.Replaced = replacedWords(before, after)
	}
	report.Record(e)
	if !e.EnginesKept {
		tripEditGuard(t, report.EditGuard{Pair: d.Pair.String(), Deployment: d.dep.Name(), Spec: CurrentSpecReport().FullText(),
			Line: fmt.Sprintf("edit guard: editing spec.router.extraArgs of %s/%s from %q to %q replaced engine Pods (%s); "+
				"switch fails with this evidence and the rest of the run creates one deployment per router-argument set",
				d.dep.Namespace(), d.dep.Name(), e.From, e.To, strings.Join(e.Replaced, ", "))})
	}
}

// replacedWords names each engine Pod whose UID changed, or that came or went.
func replacedWords(before, after map[string]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(before)) {
		switch now, ok := after[name]; {
		case !ok:
			out = append(out, name+" gone")
		case now != before[name]:
			out = append(out, fmt.Sprintf("%s UID %s -> %s", name, before[name], now))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[name]; !ok {
			out = append(out, name+" new")
		}
	}
	return out
}

// recreate is the guard's fallback for a deployment whose spec needs other
// router args: the current deployment is deleted and one created with args,
// named for them, takes its place for the specs that follow.
func (d *PairDeployment) recreate(ctx context.Context, t Target, claim string, args []string) clusters.Deployment {
	GinkgoHelper()
	By(fmt.Sprintf("the edit guard tripped: replacing %s by a deployment created with router args %q", d.dep.Name(), args))
	d.Release(ctx, t)
	d.RouterArgs = slices.Clone(args)
	d.Name = fallbackName(d.Deployment, d.Pair)
	d.created, d.err, d.waited, d.readyErr, d.released, d.collected = false, nil, false, nil, false, ""
	dep, err := d.Use(ctx, t, claim, args)
	Expect(err).NotTo(HaveOccurred(), "creating %s with router args %q", d.Name, args)
	return dep
}

// fallbackName names a deployment the fallback creates: its shape and args.
func fallbackName(d Deployment, p api.Pair) string {
	what := strings.TrimSuffix(sharedName(d, p), "-"+p.Slug())
	if len(d.RouterArgs) > 0 {
		what += "-" + strings.Join(d.RouterArgs, "-")
	}
	return ObjectName(what, p)
}

// editGuardFile is where the tripped guard is kept for every process of
// the run: the artifacts directory, under the run's id (a file from an
// earlier run there means nothing).
func editGuardFile(t Target) string {
	return filepath.Join(t.Config.Artifacts, ".edit-guard-"+t.RunID+".json")
}

// editGuardTripped reports whether an edit in this run replaced an engine
// Pod, on any process.
func editGuardTripped(t Target) bool {
	_, ok := EditGuardRecord(t)
	return ok
}

// EditGuardRecord is the first edit in this run that replaced an engine
// Pod, on any process, if there was one.
func EditGuardRecord(t Target) (report.EditGuard, bool) {
	var g report.EditGuard
	if t.Config == nil {
		return g, false
	}
	b, err := os.ReadFile(editGuardFile(t))
	if err != nil || json.Unmarshal(b, &g) != nil {
		return g, false
	}
	return g, true
}

// tripEditGuard says so in one line, records it for the report, and keeps
// it for every process (the first process to trip it writes the file).
func tripEditGuard(t Target, g report.EditGuard) {
	GinkgoHelper()
	fmt.Fprintln(GinkgoWriter, g.Line)
	report.Record(g)
	b, err := json.Marshal(g)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.MkdirAll(t.Config.Artifacts, 0o755)).To(Succeed())
	f, err := os.OpenFile(editGuardFile(t), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return // another spec tripped it first: its line stands
	}
	Expect(err).NotTo(HaveOccurred(), "keeping the edit guard's record")
	_, err = f.Write(b)
	Expect(errors.Join(err, f.Close())).To(Succeed(), "keeping the edit guard's record")
}

// ExpectEditsKeptEngines fails when an edit of the framework in this run
// replaced an engine Pod of pair p, with that edit's line: the switch
// claim's statement is that an edit keeps the engines.
func (in Spec) ExpectEditsKeptEngines() {
	GinkgoHelper()
	g, ok := EditGuardRecord(in.Target)
	tripped := ok && g.Pair == in.Pair.String()
	what := fmt.Sprintf("the suite's edits of spec.router.extraArgs on %s in this run", in.Pair)
	if tripped {
		what = g.Line // the one line says it all, and is what the report's row shows
	}
	Expect(assertions.EditGuard{Tripped: tripped, Line: g.Line}).To(assertions.HaveKeptEngines(), what)
}
