package clusters

import "github.com/gpustack/routing-conformance/api"

// Router implementations a target that runs the routers itself reports.
const (
	// RouterEmulated: this project's emulation of the router.
	RouterEmulated = "emulated"
	// RouterUpstream: the router's own upstream code, from a published
	// package (the sim with sim.routers: upstream).
	RouterUpstream = "upstream"
)

// RouterCode says which code answered as a pair's router, on a target
// that runs the routers itself (the sim). A cluster's routers are its
// router image's code (Environment.RouterImage), and it reports none.
type RouterCode struct {
	// Implementation is RouterEmulated or RouterUpstream.
	Implementation string `json:"implementation"`
	// Emulates names the router release an emulation follows.
	Emulates string `json:"emulates,omitempty"`
	// Package, Version, File and SHA256 name the upstream package that
	// ran: its registry name, version, the file installed and its digest.
	Package string `json:"package,omitempty"`
	Version string `json:"version,omitempty"`
	File    string `json:"file,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// HashChecked: the file was installed against a pinned digest.
	HashChecked bool `json:"hashChecked,omitempty"`
	// Workers says how the router learned its workers where that is not
	// the operator's rendering (a static list where no API serves Pods).
	Workers string `json:"workers,omitempty"`
}

// ClaimLimiter is implemented by targets that cannot give some claims a
// valid outcome on some pairs (the sim's upstream routers with a worker
// list fixed at their start cannot follow a replaced engine Pod). The suite
// skips those claims with the reason instead of judging them.
type ClaimLimiter interface {
	// ClaimLimit is why claim cannot be judged on pair here, or "".
	ClaimLimit(claim string, pair api.Pair) string
}
