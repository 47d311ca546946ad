package difftest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/kubelet"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
	"github.com/gpustack/routing-conformance/metrics"
)

// Compare is how a case compares the two routers' picks.
type Compare int

const (
	// ByPosition: request by request, each pick as its candidate position
	// (policies that choose by order and load).
	ByPosition Compare = iota
	// ByEngine: request by request, the engine itself (hash policies, which
	// choose by the worker's URL, whatever the order).
	ByEngine
	// Drawn: the policy draws at random, so picks cannot match request by
	// request: only the answers are compared request by request, the
	// per-worker metric series are summed over workers, and the case's
	// Check asserts what can be (a distribution, stickiness).
	Drawn
)

// Case is one differential case: a deployment, a request sequence, and how
// picks compare.
type Case struct {
	Name    string
	Setup   Setup
	Steps   []Step
	Compare Compare
	// Check, when set, asserts more of the outcome (Drawn cases' statistics).
	Check func(t testing.TB, o *Outcome)
	// Refused, when set, is the upstream launcher's error for Setup.Args
	// (a front-end difference: the operator's clap binary accepts them):
	// the case asserts that the launcher exits 2 with it, and compares
	// nothing, since no upstream code behind it can run.
	Refused string
}

// Outcome is one case's run on both routers.
type Outcome struct {
	D                  *Deployment
	EmuOrder, UpOrder  map[string]Order
	Emulated, Upstream []Result
}

// caseTimeout bounds one case, set-up included.
const caseTimeout = 3 * time.Minute

// RunCase deploys c in its own namespace on k, sends the sequence to the
// emulated router and then to the upstream one, and fails t with a side by
// side table of whatever differs: picks, answers, the banner's fields,
// metric families and series.
func RunCase(t testing.TB, k *kubelet.Kubelet, in *upstream.Install, c Case) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	ns := "diff-" + strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(c.Name)
	setup := c.Setup
	setup.Refused = c.Refused != ""
	d, err := Deploy(ctx, k, in, ns, setup)
	if d != nil {
		t.Cleanup(func() { d.Close() })
	}
	if err != nil {
		t.Fatalf("deploy %s: %v", c.Name, err)
	}
	emu, up := d.Routers[0], d.Routers[1]
	if c.Refused != "" {
		code, err := d.Exit(ctx, up)
		if err != nil {
			t.Fatal(err)
		}
		if logs := d.Logs(up); code != 2 || !strings.Contains(logs, c.Refused) {
			t.Fatalf("the upstream launcher should refuse %q with exit 2 and %q; exit %d, log:\n%s", c.Setup.Args, c.Refused, code, logs)
		}
		t.Logf("%s: not compared: the upstream launcher refuses %q (exit 2: %s); the operator's clap binary accepts it", c.Name, c.Setup.Args, c.Refused)
		return
	}
	o := &Outcome{D: d}
	if o.EmuOrder, err = d.Orders(emu); err != nil {
		t.Fatal(err)
	}
	if o.UpOrder, err = d.Orders(up); err != nil {
		t.Fatal(err)
	}
	before := map[string]metrics.Snapshot{}
	for _, r := range d.Routers {
		if before[r.Impl], err = r.Scrape(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The upstream sequence starts while the emulated one's last held
	// requests finish: their engines' arrivals do not move any more.
	emuRun, err := d.Start(ctx, emu, c.Steps)
	if err != nil {
		t.Fatalf("emulated run: %v", err)
	}
	upRun, err := d.Start(ctx, up, c.Steps)
	if err != nil {
		t.Fatalf("upstream run: %v", err)
	}
	if o.Emulated, err = emuRun.Wait(); err != nil {
		t.Fatalf("emulated run: %v", err)
	}
	if o.Upstream, err = upRun.Wait(); err != nil {
		t.Fatalf("upstream run: %v", err)
	}
	after := map[string]metrics.Snapshot{}
	for _, r := range d.Routers {
		if after[r.Impl], err = r.Scrape(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var report strings.Builder
	ok := true
	section := func(title, table string, same bool) {
		status := "same"
		if !same {
			status, ok = "DIFFERENT", false
		}
		fmt.Fprintf(&report, "\n== %s: %s\n%s", title, status, table)
	}
	fmt.Fprintf(&report, "%s: %s argv %q", c.Name, c.Setup.Router, d.Argv)
	// Hash policies pick by URL: positions then name engines, for both.
	emuOrd, upOrd := o.EmuOrder, o.UpOrder
	if c.Compare == ByEngine {
		emuOrd, upOrd = d.creationOrders(), d.creationOrders()
	}
	picks, same := d.ComparePicks(emuOrd, upOrd, o.Emulated, o.Upstream, c.Compare != Drawn)
	section("picks (candidate positions; the engine in brackets)", picks, same)
	banner, same := CompareBanners(c.Setup, d.Logs(emu), d.Logs(up))
	section("banner", banner, same)
	ef, es := d.MetricsView(before[Emulated], after[Emulated], emuOrd, c.Compare == Drawn)
	uf, us := d.MetricsView(before[Upstream], after[Upstream], upOrd, c.Compare == Drawn)
	table, same := CompareMetrics(ef, uf, es, us)
	section("metrics (families, series and their change)", table, same)
	if !ok {
		t.Errorf("the emulated and the upstream router disagree:%s", report.String())
	} else {
		t.Log(report.String())
	}
	if c.Check != nil {
		c.Check(t, o)
	}
}

// Close deletes the deployment's Pods and waits for them to go.
func (d *Deployment) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods []kubelet.PodStatus
	for _, r := range d.Routers {
		pods = append(pods, r.Pod)
	}
	for _, e := range d.Engines {
		pods = append(pods, e.Pod)
	}
	for _, p := range pods {
		d.k.Kill(p.Namespace, p.Name)
	}
	for _, p := range pods {
		_ = d.k.WaitGone(ctx, p.Namespace, p.Name)
	}
}
