package difftest

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/assertions/rustdebug"
)

// Picks are compared by candidate position, not by engine: a router's
// ties and round-robin positions follow its candidate list, whose order
// both routers draw per process for some pools (a DashMap walked over
// random UUID keys). Position i of one router's list stands for position i
// of the other's. Where each list comes from (upstream source):
//
//	vllm-router   regular, prefill  the registry's DashMap: what GET /list_workers
//	                                lists (vllm-project/router@v0.1.15:src/core/worker_registry.rs
//	                                get_all, get_prefill_workers, get_all_urls)
//	              decode            registration order (get_decode_workers = get_by_type)
//	sgl-model-gateway (IGW)         registration order (get_by_model, the model index;
//	                                sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/routers/http/router.rs
//	                                select_worker_for_model, pd_router.rs select_pd_pair)
//
// Registration order is the engines' creation order for both routers:
// Deploy registers each engine with the emulated router before it starts
// the next, and the upstream router's static list names them in that order.

// Order is a router's candidate order over one pool, as engine labels.
type Order struct {
	Labels []string
	// Source says where the order was read.
	Source string
}

// Orders are a router's candidate orders, by pool.
func (d *Deployment) Orders(r *Router) (map[string]Order, error) {
	out := d.creationOrders()
	for pool, o := range out {
		o.Source = "registration order"
		out[pool] = o
	}
	if d.Setup.Router != api.RouterVLLM {
		return out, nil
	}
	listed, err := d.listed(r)
	if err != nil {
		return nil, fmt.Errorf("%s router: %w", r.Impl, err)
	}
	for _, pool := range d.Pools() {
		if pool == poolDecode {
			continue
		}
		var labels []string
		for _, u := range listed {
			if e, ok := d.engineByURL(u); ok && e.Pool == pool {
				labels = append(labels, e.Label)
			}
		}
		out[pool] = Order{Labels: labels, Source: "GET /list_workers"}
	}
	return out, nil
}

// creationOrders are the engines in creation order, by pool (the same for
// both routers).
func (d *Deployment) creationOrders() map[string]Order {
	out := map[string]Order{}
	for _, e := range d.Engines {
		o := out[e.Pool]
		o.Labels, o.Source = append(o.Labels, e.Label), "engines by name (hash policies pick by URL)"
		out[e.Pool] = o
	}
	return out
}

func (d *Deployment) engineByURL(url string) (Engine, bool) {
	for _, e := range d.Engines {
		if e.URL == url {
			return e, true
		}
	}
	return Engine{}, false
}

// position names a label's place in its pool's order: w0, p1, d0 (regular,
// prefill, decode); "?" when the router does not list it.
func position(orders map[string]Order, pool, label string) string {
	i := slices.Index(orders[pool].Labels, label)
	if i < 0 {
		return "?" + label
	}
	return pool[:1] + strconv.Itoa(i)
}

// pickCell is one request's picks as candidate positions, pools in order.
func (d *Deployment) pickCell(orders map[string]Order, r Result) (positions, engines string) {
	var ps, es []string
	for _, pool := range d.Pools() {
		var pp []string
		for _, l := range r.Picks[pool] {
			pp = append(pp, position(orders, pool, l))
		}
		slices.Sort(pp)
		if len(pp) == 0 {
			pp = []string{"-"}
		}
		ps = append(ps, strings.Join(pp, "+"))
		es = append(es, strings.Join(r.Picks[pool], "+"))
	}
	return strings.Join(ps, " / "), strings.Join(es, " / ")
}

// answer is a request's outcome as compared: the status, and the body when
// it is not 2xx or the step compares it (Step.Whole).
func answer(r Result) string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	if r.Body == "" {
		return strconv.Itoa(r.Status)
	}
	return strconv.Itoa(r.Status) + " " + r.Body
}

// ComparePicks tables both routers' picks request by request and says
// whether they agree (positions and answers); exact=false compares only
// the answers (random policies: see the case's own check).
func (d *Deployment) ComparePicks(emuOrd, upOrd map[string]Order, emu, up []Result, exact bool) (string, bool) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\trequest\temulated\tupstream\t\tanswer (emulated | upstream)")
	same := len(emu) == len(up)
	for i := range max(len(emu), len(up)) {
		var e, u Result
		if i < len(emu) {
			e = emu[i]
		}
		if i < len(up) {
			u = up[i]
		}
		ep, ee := d.pickCell(emuOrd, e)
		upos, ue := d.pickCell(upOrd, u)
		ok := answer(e) == answer(u) && (!exact || ep == upos)
		same = same && ok
		mark := ""
		if !ok {
			mark = "≠"
		}
		ans := answer(e)
		if answer(u) != ans {
			ans += " | " + answer(u)
		}
		note := e.Note
		if e.Held {
			note += " (held)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s (%s)\t%s (%s)\t%s\t%s\n", i+1, note, ep, ee, upos, ue, mark, clip(ans, 160))
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "candidate order: emulated %s; upstream %s\n", formatOrders(d.Pools(), emuOrd), formatOrders(d.Pools(), upOrd))
	for i := range min(len(emu), len(up)) {
		if e, u := answer(emu[i]), answer(up[i]); e != u {
			fmt.Fprintf(&b, "answer #%d:\n  emulated: %s\n  upstream: %s\n", i+1, e, u)
		}
	}
	return b.String(), same
}

func formatOrders(pools []string, o map[string]Order) string {
	var parts []string
	for _, p := range pools {
		parts = append(parts, fmt.Sprintf("%s [%s] (%s)", p, strings.Join(o[p].Labels, " "), o[p].Source))
	}
	return strings.Join(parts, ", ")
}

// Counts are how many picks each candidate position got, by pool.
func (d *Deployment) Counts(orders map[string]Order, results []Result) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, r := range results {
		for pool, labels := range r.Picks {
			if out[pool] == nil {
				out[pool] = map[string]int{}
			}
			for _, l := range labels {
				out[pool][position(orders, pool, l)]++
			}
		}
	}
	return out
}

// urlFields are the banner mode's worker lists: the static-workers
// translation gives the upstream router the engines as static URLs where
// the emulated one discovers them (an empty list), so they are not
// compared.
var urlFields = []string{"worker_urls", "prefill_urls", "decode_urls"}

// FrontEnd is a banner field where the upstream launcher's front end
// differs from the operator's clap binary, which the emulation follows:
// the field must read Emulated (a prefix) on the emulated router and
// Upstream on the upstream one.
type FrontEnd struct {
	Router, Field string
	// PD: only in P/D mode.
	PD                 bool
	Emulated, Upstream string
	Why, Cite          string
}

// FrontEnds are the known banner differences of the launchers.
var FrontEnds = []FrontEnd{{
	Router: api.RouterSGLang, Field: "mode", PD: true,
	Emulated: "PrefillDecode {", Upstream: "Regular { worker_urls: … }",
	Why: "the Python binding builds RoutingMode::Regular { worker_urls: [] } whenever IGW is on; clap's main builds " +
		"PrefillDecode from --pd-disaggregation whatever IGW says (IGW routes the same either way: its P/D router takes --policy alone)",
	Cite: "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/bindings/python/src/lib.rs (Router::to_router_config); src/main.rs (CliArgs::to_router_config)",
}}

func frontEnd(s Setup, field, emu, up string) (FrontEnd, bool) {
	for _, f := range FrontEnds {
		if f.Router == s.Router && f.Field == field && (!f.PD || s.PD) && strings.HasPrefix(emu, f.Emulated) && up == f.Upstream {
			return f, true
		}
	}
	return FrontEnd{}, false
}

// CompareBanners tables the startup banners' fields; a difference listed
// in FrontEnds is shown, with its reason, and allowed.
func CompareBanners(s Setup, emuLogs, upLogs string) (string, bool) {
	eb, eerr := routerlog.FindBanner(emuLogs)
	ub, uerr := routerlog.FindBanner(upLogs)
	if eerr != nil || uerr != nil {
		return fmt.Sprintf("banner: emulated: %v; upstream: %v", eerr, uerr), false
	}
	port := func(b routerlog.Banner) string { _, p, _ := net.SplitHostPort(b.Address); return p }
	rows := [][3]string{
		{"port", port(eb), port(ub)},
		{"mode", modeText(eb.Mode), modeText(ub.Mode)},
		{"policy", eb.Policy.String(), ub.Policy.String()},
		{"max_payload", eb.MaxPayload, ub.MaxPayload},
	}
	if eb.HasKVConnector || ub.HasKVConnector {
		rows = append(rows, [3]string{"kv_connector", eb.KVConnector.String(), ub.KVConnector.String()})
	}
	for _, k := range unionKeys(eb.Other, ub.Other) {
		rows = append(rows, [3]string{k, eb.Other[k], ub.Other[k]})
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "banner field\temulated\tupstream\t")
	same := true
	var notes []string
	for _, r := range rows {
		mark := ""
		if r[1] != r[2] {
			if f, ok := frontEnd(s, r[0], r[1], r[2]); ok {
				mark = "front end"
				notes = append(notes, fmt.Sprintf("front end, %s: %s (%s)", r[0], f.Why, f.Cite))
			} else {
				mark, same = "≠", false
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r[0], r[1], r[2], mark)
	}
	_ = tw.Flush()
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	return b.String(), same
}

// modeText is the mode's Debug form without its worker URL lists.
func modeText(v rustdebug.Value) string {
	if v.Kind != rustdebug.Struct {
		return v.String()
	}
	c := v
	c.Fields = nil
	for _, f := range v.Fields {
		if slices.Contains(urlFields, f.Name) {
			f.Value = rustdebug.Value{Kind: rustdebug.Ident, Text: "…"}
		}
		c.Fields = append(c.Fields, f)
	}
	return c.String()
}

func unionKeys(a, b map[string]string) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
