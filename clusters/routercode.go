package clusters

// Router implementations a target that runs the routers itself reports.
const (
	// RouterEmulated: this project's emulation of the router.
	RouterEmulated = "emulated"
	// RouterBuilt: the router's own binary, built from its pinned source
	// (the sim's vllm-router and sglang-gateway, make routers; llm-d-router's
	// EPP under sim.llmd: upstream, make upstream-llmd).
	RouterBuilt = "built from source"
)

// RouterCode says which code answered as a pair's router, on a target
// that runs the routers itself (the sim). A cluster's routers are its
// router image's code (Environment.RouterImage), and it reports none.
type RouterCode struct {
	// Implementation is RouterEmulated or RouterBuilt.
	Implementation string `json:"implementation"`
	// Emulates names the router release an emulation follows; beside a
	// build, what of the router stays emulated (llm-d-router's envoy).
	Emulates string `json:"emulates,omitempty"`
	// Binary is the binary built (vllm-router, sgl-model-gateway).
	Binary string `json:"binary,omitempty"`
	// Package, Version, File and SHA256 name the source it was built
	// from: the registry package, its version, the sdist file and its
	// digest.
	Package string `json:"package,omitempty"`
	Version string `json:"version,omitempty"`
	File    string `json:"file,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// Commit is the source's commit, where it was built from a git
	// checkout or module (llm-d-router's EPP).
	Commit string `json:"commit,omitempty"`
	// HashChecked: the source is the pinned one (digest and lock).
	HashChecked bool `json:"hashChecked,omitempty"`
	// Patches are the patch files applied to the source, in order.
	Patches []string `json:"patches,omitempty"`
}
