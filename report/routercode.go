package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/clusters"
)

// PairRouterCode is which code answered as one pair's router: the
// project's emulation, or the router's upstream code (package, version,
// file and digest). A target that runs routers itself reports it (the
// sim); a cluster runs its router image (Environment.RouterImage).
type PairRouterCode struct {
	Pair string `json:"pair"`
	clusters.RouterCode
}

// routerCode lists the router code of the target's supported pairs, in
// the target's order.
func routerCode(env clusters.Environment) []PairRouterCode {
	var out []PairRouterCode
	for _, p := range env.Pairs {
		if p.Supported && p.RouterCode != nil {
			out = append(out, PairRouterCode{Pair: p.Pair.String(), RouterCode: *p.RouterCode})
		}
	}
	return out
}

// upstreamRouters names the upstream router packages that ran, once each,
// in order ("vllm-router 0.1.15, sglang-router 0.3.1"); "" when none did.
func upstreamRouters(codes []PairRouterCode) string {
	var names []string
	for _, c := range codes {
		if c.Implementation != clusters.RouterUpstream {
			continue
		}
		n := c.Package + " " + c.Version
		if !c.HashChecked {
			n += ", not hash-checked"
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// routerCodeRows are the environment block's lines for the router code,
// one per pair.
func routerCodeRows(codes []PairRouterCode) []EnvRow {
	var rows []EnvRow
	for _, c := range codes {
		var v string
		switch c.Implementation {
		case clusters.RouterUpstream:
			checked := "hash-checked"
			if !c.HashChecked {
				checked = "not hash-checked: a version other than the pins"
			}
			v = fmt.Sprintf("upstream %s %s (%s, sha256 %s, %s)", c.Package, c.Version, c.File, c.SHA256, checked)
			if c.Workers != "" {
				v += "; workers: " + c.Workers
			}
		case clusters.RouterEmulated:
			v = "emulated (" + c.Emulates + ")"
		default:
			v = c.Implementation
		}
		rows = append(rows, EnvRow{Name: "Router code, " + c.Pair, Value: v})
	}
	return rows
}

// simTarget is the Target line of a sim run: what it emulated.
func simTarget(codes []PairRouterCode) string {
	if upstreamRouters(codes) == "" {
		return "simulator (sim): the operator, routers and engines are emulated in-process on loopback; no GPU"
	}
	return "simulator (sim): the operator, the engines and the routers marked emulated below run emulated in-process on " +
		"loopback; the routers marked upstream run their own code from PyPI as processes; no GPU"
}
