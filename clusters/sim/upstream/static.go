package upstream

import (
	"fmt"

	"github.com/gpustack/routing-conformance/clusters"
)

// StaticWorkersNote is how a router learns its workers on the plain sim
// (the static-workers row), for the report.
const StaticWorkersNote = "a static list of the engine Pods the selectors match when the router container starts " +
	"(the sim has no Kubernetes API to discover them through)"

// MembershipClaim is the verdict on one claim that changes the Pods around
// a router, when the router's workers are a list fixed at its start (the
// static-workers row) instead of service discovery.
type MembershipClaim struct {
	// Claim is the suite's claim name (suites/routing).
	Claim string
	// Runs: the claim's outcome does not depend on the list being fixed.
	Runs bool
	// Why says what the claim changes and what a fixed list does to it.
	Why string
}

// MembershipClaims are the claims that change membership (issue #16 names
// them: switch, killengine, deleterouter, routerreplicas), each judged on
// what it does. A replaced or added router Pod starts a new router
// container, which lists the engine Pods again, so only a claim that
// replaces an engine Pod under a running router loses its meaning.
var MembershipClaims = []MembershipClaim{
	{Claim: "switch", Runs: true,
		Why: "each edit of spec.router.extraArgs replaces the router Pod; the new container lists the engine Pods at its start, " +
			"and they are the same Pods (the claim asserts their UIDs unchanged), so the list is what discovery would find"},
	{Claim: "deleterouter", Runs: true,
		Why: "the replacement router Pod lists the engine Pods at its start; the engines are untouched (asserted), " +
			"so the list is what discovery would find"},
	{Claim: "routerreplicas", Runs: true,
		Why: "the added router Pod lists the same engine Pods at its start; engine membership does not change"},
	{Claim: "killengine", Runs: false,
		Why: "the killed engine Pod is replaced by one with a new name and address; a worker list fixed at the router's start " +
			"keeps the dead address and never names the replacement, so the outcome would be the sim's static list, not the " +
			"router's discovery (the API-server tier runs it with the routers' real service discovery)"},
}

// StaticLimit is why claim cannot be judged by an upstream router with a
// static worker list, or "".
func StaticLimit(claim string) string {
	for _, m := range MembershipClaims {
		if m.Claim == claim && !m.Runs {
			return fmt.Sprintf("upstream router with a static worker list (the plain sim has no Kubernetes API): %s", m.Why)
		}
	}
	return ""
}

// Code is which code runs as router's container from this install.
func (in *Install) Code(router string, static bool) clusters.RouterCode {
	w, _ := in.Wheel(router)
	c := clusters.RouterCode{Implementation: clusters.RouterUpstream, Package: w.Package, Version: w.Version,
		File: w.File, SHA256: w.SHA256, HashChecked: w.HashChecked}
	if static {
		c.Workers = StaticWorkersNote
	}
	return c
}
