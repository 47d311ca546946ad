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

// unpinnedRouters names the built routers that are not the pins (another
// version, or patched), once each, in order ("vllm-router 0.1.17, not
// hash-pinned"); "" when every build is the pins.
func unpinnedRouters(codes []PairRouterCode) string {
	var names []string
	for _, c := range codes {
		// A build from a commit (llm-d-router's EPP) names its commit instead.
		if c.Implementation != clusters.RouterBuilt || c.Commit != "" || (c.HashChecked && len(c.Patches) == 0) {
			continue
		}
		n := c.Binary + " " + c.Version
		if !c.HashChecked {
			n += ", not hash-pinned"
		}
		if len(c.Patches) > 0 {
			n += fmt.Sprintf(", %d patches", len(c.Patches))
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, "; ")
}

// routerCodeRows are the environment block's lines for the router code,
// one per pair.
func routerCodeRows(codes []PairRouterCode) []EnvRow {
	var rows []EnvRow
	for _, c := range codes {
		var v string
		switch c.Implementation {
		case clusters.RouterBuilt:
			if c.Commit != "" {
				v = fmt.Sprintf("built from source: %s %s @%s (%s, binary sha256 %s)", c.Package, c.Version, c.Commit, c.Binary, c.SHA256)
				if c.Emulates != "" {
					v += "; emulated beside it: " + c.Emulates
				}
				break
			}
			pinned := "hash-pinned"
			if !c.HashChecked {
				pinned = "not hash-pinned: a version other than the pins"
			}
			v = fmt.Sprintf("built from source: %s %s (%s, sdist %s, sha256 %s, %s)", c.Binary, c.Version, c.Package, c.File, c.SHA256, pinned)
			if len(c.Patches) > 0 {
				v += "; patches: " + strings.Join(c.Patches, ", ")
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

// simTarget is the Target line of a sim run: what ran as what.
func simTarget(codes []PairRouterCode) string {
	built := slices.ContainsFunc(codes, func(c PairRouterCode) bool { return c.Implementation == clusters.RouterBuilt })
	if !built {
		return "simulator (sim): the operator, routers and engines are emulated in-process on loopback; no GPU"
	}
	return "simulator (sim): the routers marked built from source below run their own binaries as processes; the " +
		"operator, the engines and the routers marked emulated run emulated in-process; all on loopback; no GPU"
}
