package upstream

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/api"
)

// Patch is one patch the operator's router image applies to a router's
// source before building it, and what the sim does about it. The sim runs
// the unpatched pinned source unless make routers is given the operator's
// patch files (ROUTER_PATCHES); this project never carries their text.
type Patch struct {
	Router string
	// File is the patch's name under the operator's pack/llm-router/patches/<router>/.
	File string
	// Touches are the files it changes, as its paths name them.
	Touches string
	// Changes says what it changes, in this project's words.
	Changes string
	// Sim says what the sim does about it.
	Sim string
}

// OperatorPatchesCite is where the patches and the Dockerfile that applies
// them were read (each patch's own commit is the newest the index held).
const OperatorPatchesCite = "gpustack/gpustack-operator@1d1bc3bb:pack/llm-router/Dockerfile (git apply /tmp/patches/*.patch in each clone's root, " +
	"then cargo build --release --locked --bin vllm-router and cargo build --release --bin sgl-model-gateway); " +
	"patches read at gpustack/gpustack-operator@8e9a06e5 (vllm-router 0001), @c67484d8 (vllm-router 0002, sglang-gateway 0001), " +
	"@2cdae0e0 (vllm-router 0003), @c79e83a9 (sglang-gateway 0002)"

// Patches are the operator image's router patches, in the order it applies
// them. All five apply cleanly, in order, to the pinned sdists (checked with
// patch -p1 / -p2 and git apply on 2026-12-05; docs/routers-from-source.md).
var Patches = []Patch{
	{Router: api.RouterVLLM, File: "0001-mooncake-lazy-bootstrap-lookup.patch", Touches: "src/routers/http/vllm_pd_router.rs",
		Changes: "upstream asks each prefill's Mooncake bootstrap server (GET :<bootstrap port>/query, the engine id per DP rank) " +
			"once, when the P/D router is built, for the static --prefill list; under service discovery that list is empty, so " +
			"decode requests go out without kv_transfer_params. The patch looks the prefill up on first use per request (3 tries; " +
			"the port from the worker's bootstrap-port annotation, default 8998), caches successes, forgets a removed prefill",
		Sim: "not applied by default. On the plain sim the router discovers its engines (the kube-api row) and so, unpatched, " +
			"builds its P/D router with no prefill to ask; make routers ROUTER_PATCHES=<dir> builds the patched router"},
	{Router: api.RouterVLLM, File: "0002-discovery-readiness-and-deselect-removal.patch", Touches: "src/service_discovery.rs",
		Changes: "upstream's watcher adds a matching Pod and removes one only when an update shows its deletionTimestamp; a Pod " +
			"that turns unready, is deselected, or is deleted without such an update stays a worker. The patch withdraws a Pod " +
			"that is terminating, deselected, not Running and Ready, unreadable, deleted, or missing from a relist; keys workers " +
			"by Pod UID (a new UID at a known address replaces the old owner); relists every 15 s",
		Sim: "not applied by default: the routers' own, unpatched discovery runs against the sim's Pods (plain sim: the kube-api " +
			"row; API-server tier: a real kube-apiserver); an unready engine Pod stays a worker (a finding, tested: " +
			"#discovery-without-the-operators-patches)"},
	{Router: api.RouterVLLM, File: "0003-observer-read-only-endpoint-view.patch", Touches: "src/lib.rs, src/observer.rs (new), src/server.rs",
		Changes: "adds GET /observer/endpoints on the router's HTTP port: {router:{boot_generation, now_ms}, registry_revision, " +
			"workers:[{url, port, role, pod_hint, worker_id, selection:{registered, healthy, circuit_open, in_selection}}]}, " +
			"in_selection = healthy and the circuit breaker lets requests through; the operator reads it to publish serving endpoints",
		Sim: "served by the router container's Go front from what the process reports (GET /workers and each worker's " +
			"vllm_router_cb_state), since without it no deployment becomes Ready; a build with patches (ROUTER_PATCHES) answers it itself"},
	{Router: api.RouterSGLang, File: "0001-discovery-readiness-and-deselect-removal.patch",
		Touches: "sgl-model-gateway/src/core/job_queue.rs, sgl-model-gateway/src/service_discovery.rs",
		Changes: "the same discovery rules as vllm-router's 0002, plus a job lane per worker URL (add and remove jobs for one URL run " +
			"in order), a withdrawal that waits up to 60 s for its RemoveWorker job and keeps the Pod tracked until it succeeds, " +
			"and a re-issued AddWorker for a tracked Pod whose last job failed",
		Sim: "not applied by default, as vllm-router's 0002"},
	{Router: api.RouterSGLang, File: "0002-observer-read-only-endpoint-view.patch",
		Touches: "sgl-model-gateway/src/core/circuit_breaker.rs, src/core/job_queue.rs, src/lib.rs, src/observer.rs (new), src/server.rs",
		Changes: "GET /observer/endpoints in the gateway's admin routes, the same document plus each worker's job lane and last job; " +
			"the circuit state read without changing it (Open past its timeout shows as HalfOpen); 503 if the view changes while read. " +
			"Builds on 0001",
		Sim: "served by the Go front from GET /workers and smg_worker_cb_state, as vllm-router's 0003"},
}

// PatchesMarkdown is the patches table as docs/routers-from-source.md shows it.
func PatchesMarkdown() string {
	var b strings.Builder
	b.WriteString("| router | patch | files | what it changes | on the sim |\n|---|---|---|---|---|\n")
	for _, p := range Patches {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", p.Router, p.File, MarkdownCell(p.Touches), MarkdownCell(p.Changes), MarkdownCell(p.Sim))
	}
	return b.String()
}
