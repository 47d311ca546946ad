// Package routing is the routing conformance suite's claims: every claim
// of the operator's routing page, and the extended and resilience claims
// beyond it, each in a file of its own named for it (<claim>.go) that
// holds its row type (what its fixtures/expect.yaml rows state), its spec
// function and its registry row. Shared spec shapes live beside them:
// PolicySpec (policy.go) for a --policy on the router's argv, FaultSpec
// (fault.go) for a fault injected under traffic, the prefill/decode
// traffic spec (pd.go) and BadPolicySpec (badpolicy.go).
//
// Package framework runs them: it reads each claim's rows into its row
// type, plans which deployments the claims share, builds the spec tree and
// writes the report; suite_test.go only wires the registry to Ginkgo:
//
//	go tool ginkgo -v --procs=2 ./suites/routing -- -e2e.config=$PWD/e2e.yaml -e2e.artifacts=$PWD/artifacts
package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// Registry holds the suite's claims; each <claim>.go adds its own.
var Registry = &framework.Registry{}
