// Package upstreamverdict compares a routing suite run with the routers'
// upstream code (sim.routers: upstream) with an emulated run of the same
// suite binary, row by row (claim × pair, from report.json): every row
// must agree, except the rows of Known, each of which must show what its
// entry says the upstream front end does instead. make
// test-upstream-routers (cmd/e2e upstream) runs both and calls Compare.
package upstreamverdict

import (
	"slices"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
)

// Kinds of known difference.
const (
	// FrontEnd: the Python launcher (argparse, the PyO3 binding's config
	// building) where the operator's image runs the clap binary.
	FrontEnd = "front end"
	// StaticWorkers: the sim's static worker list (upstream's
	// static-workers translation) where the operator renders discovery.
	StaticWorkers = "static workers"
	// EmulationBug: the emulation disagrees with upstream; listed only
	// until the emulation is fixed, never as a front-end difference.
	EmulationBug = "emulation bug, to be fixed"
)

// Results as report.json writes them.
const (
	Pass = "PASS"
	Fail = "FAIL"
	Skip = "SKIP"
)

// Difference is one claim × pair row whose upstream outcome differs from
// the emulated one for a known reason outside the routers' routing.
type Difference struct {
	Claim string
	Pair  api.Pair
	Kind  string
	// Emulated and Upstream are the row's results in each run.
	Emulated, Upstream string
	// Shows is what every spec of the row must show in the upstream run.
	Shows []Evidence
	// Why says what differs; Cite the upstream sources (repo@tag:path).
	Why, Cite string
}

// Evidence is what one case (spec) of a known row shows upstream.
type Evidence struct {
	// Case is a substring of the spec's text naming its case ("--policy
	// roundrobin"); empty matches every spec of the row.
	Case string
	// Exit is the router container's last exit code (0: not checked).
	Exit int
	// Log must match a line of the router container's log, as the failed
	// spec's artifacts hold it (empty: not checked).
	Log string
	// Failure must match the spec's failure message; Reason its skip
	// reason (empty: not checked).
	Failure, Reason string
}

var (
	vllm   = api.Pair{Router: api.RouterVLLM, Engine: api.EngineVLLM}
	sglang = api.Pair{Router: api.RouterSGLang, Engine: api.EngineSGLang}
)

// The launchers' policy choices (argparse's "choose from" list) and the
// sources that fix them.
const (
	vllmChoices   = `\(choose from 'random', 'round_robin', 'cache_aware', 'power_of_two', 'consistent_hash'\)`
	sglangChoices = `\(choose from 'random', 'round_robin', 'cache_aware', 'power_of_two', 'manual'\)`
	// sgl-model-gateway's --prefill-policy also offers bucket.
	sglangPrefillChoices = `\(choose from 'random', 'round_robin', 'cache_aware', 'power_of_two', 'manual', 'bucket'\)`

	vllmLauncher   = "vllm-project/router@v0.1.15:py_src/vllm_router/router_args.py"
	vllmClap       = "vllm-project/router@v0.1.15:src/main.rs"
	vllmBinding    = "vllm-project/router@v0.1.15:src/lib.rs"
	sglangLauncher = "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/bindings/python/src/sglang_router/router_args.py"
	sglangClap     = "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/main.rs"
	sglangBinding  = "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/bindings/python/src/lib.rs"
	// The gateway's config validation: Regular mode under discovery needs --selector.
	sglangValidation = "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/config/validation.rs"
)

// invalidChoice is argparse's refusal of value for flag, with choices.
func invalidChoice(flag, value, choices string) Evidence {
	return Evidence{Case: flag + " " + value, Exit: 2,
		Log: `^launch_router\.py: error: argument ` + flag + `: invalid choice: '` + value + `' ` + choices + `$`}
}

// anyCase is e for every spec of its row: a claim whose one case's spec
// text does not name its router args.
func anyCase(e Evidence) Evidence { e.Case = ""; return e }

// invalidFloat is argparse's refusal of a threshold that is no number.
func invalidFloat(flag, value string) Evidence {
	return Evidence{Case: flag + "=" + value, Exit: 2,
		Log: `^launch_router\.py: error: argument ` + flag + `: invalid float value: '` + value + `'$`}
}

// Known is the one table of known differences. A row here must match
// every spec it names, in both runs, or the comparison fails.
var Known = slices.Concat([]Difference{
	{Claim: "badpolicy", Pair: vllm, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{
			invalidChoice("--policy", "roundrobin", vllmChoices),
			invalidChoice("--policy", "manual", vllmChoices),
			invalidChoice("--policy", "prefix_hash", vllmChoices),
		},
		Why: "the launcher's argparse refuses the value, exit 2 as clap, with argparse's usage and " +
			"\"launch_router.py: error: argument --policy: invalid choice: ...\" instead of clap's \"error: invalid value ... for '--policy <POLICY>'\" " +
			"with its [possible values] and tip",
		Cite: vllmLauncher + " (choices); " + vllmClap + " (value_parser)"},
	{Claim: "badpolicy", Pair: sglang, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{
			invalidChoice("--policy", "roundrobin", sglangChoices),
			invalidChoice("--policy", "consistent_hash", sglangChoices),
		},
		Why:  "as for vllm-router: argparse's usage and invalid-choice line, exit 2, instead of clap's error",
		Cite: sglangLauncher + " (choices); " + sglangClap + " (value_parser)"},
	{Claim: "pdbadpolicy", Pair: vllm, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{
			invalidChoice("--prefill-policy", "prefix_hash", vllmChoices),
			invalidChoice("--decode-policy", "roundrobin", vllmChoices),
		},
		Why:  "argparse's invalid-choice line for the pool flag, exit 2, instead of clap's error",
		Cite: vllmLauncher + "; " + vllmClap},
	{Claim: "pdbadpolicy", Pair: sglang, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{
			invalidChoice("--prefill-policy", "consistent_hash", sglangPrefillChoices),
			invalidChoice("--decode-policy", "round-robin", sglangChoices),
		},
		Why:  "argparse's invalid-choice line for the pool flag, exit 2, instead of clap's error",
		Cite: sglangLauncher + "; " + sglangClap},
	{Claim: "badthreshold", Pair: vllm, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{
			invalidFloat("--cache-threshold", "abc"),
			{Case: "--cache-threshold=1.5", Exit: 1,
				Log: `^ValueError: Configuration validation failed: Invalid value for field 'cache_threshold': 1\.5 - Must be between 0\.0 and 1\.0$`},
			{Case: "--balance-abs-threshold=-1", Exit: 1, Log: `^OverflowError: can't convert negative int to unsigned$`},
		},
		Why: "argparse parses a float (an unparsable one: exit 2 with its own line); the library's range check raises a Python " +
			"ValueError with the error's Display text and a traceback (exit 1, as clap's main returns the error's Debug form); " +
			"a negative integer passes argparse's int and fails converting to the binding's unsigned field, an OverflowError " +
			"with exit 1 where clap's u64 value parser exits 2",
		Cite: vllmLauncher + " (type=float, type=int); " + vllmBinding + " (usize fields); " + vllmClap},
	{Claim: "badthreshold", Pair: sglang, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{
			{Case: "--balance-abs-threshold=18446744073709551616", Exit: 1, Log: `^OverflowError: int too big to convert$`},
			{Case: "--balance-rel-threshold=0.5", Exit: 1,
				Log: `^ValueError: Configuration error: Invalid value for field 'balance_rel_threshold': 0\.5 - Must be >= 1\.0$`},
			invalidFloat("--balance-rel-threshold", "high"),
		},
		Why: "as for vllm-router: an integer too big for the binding's unsigned field is an OverflowError (exit 1; clap exits 2), " +
			"the range check a ValueError with the Display text (exit 1, as clap), an unparsable float argparse's line (exit 2)",
		Cite: sglangLauncher + "; " + sglangBinding + "; " + sglangClap},
	{Claim: "rendezvoushash", Pair: vllm, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{anyCase(invalidChoice("--policy", "rendezvous_hash", vllmChoices))},
		Why: "the launcher's --policy choices lack rendezvous_hash, which clap v0.1.15 and the library accept: a router " +
			"given it exits 2 and never becomes Ready (edited in, the previous router Pod keeps serving), so the policy " +
			"cannot be reached through this front end",
		Cite: vllmLauncher + " (choices); " + vllmClap + " (--policy value_parser lists rendezvous_hash)"},
	{Claim: "prefixhash", Pair: sglang, Kind: FrontEnd, Emulated: Pass, Upstream: Fail,
		Shows: []Evidence{anyCase(invalidChoice("--policy", "prefix_hash", sglangChoices))},
		Why: "the launcher's --policy choices lack prefix_hash, which clap gateway-v0.3.1 and the library accept: a " +
			"router given it exits 2 and never becomes Ready (edited in, the previous router Pod keeps serving)",
		Cite: sglangLauncher + " (choices); " + sglangClap + " (--policy value_parser lists prefix_hash)"},
}, pdBanner(vllm, StaticWorkers, pdStaticBanner, pdStaticWhy, vllmClap+"; "+vllmLauncher),
	pdBanner(sglang, FrontEnd, pdIGWBanner, pdIGWWhy,
		sglangBinding+" (mode under enable_igw); "+sglangClap+" (to_router_config); "+sglangValidation),
	[]Difference{
		staticSkipRow(vllm, "vllm-project/router@v0.1.15:src/service_discovery.rs"),
		staticSkipRow(sglang, "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/service_discovery.rs"),
	})

// pdBanner are the rows of the two P/D claims that share a deployment and
// its banner (pdpools, pdpolicies): the same difference in both.
func pdBanner(p api.Pair, kind, failure, why, cite string) []Difference {
	var out []Difference
	for _, claim := range []string{"pdpools", "pdpolicies"} {
		out = append(out, Difference{Claim: claim, Pair: p, Kind: kind, Emulated: Pass, Upstream: Fail,
			Shows: []Evidence{{Failure: failure}}, Why: why, Cite: cite})
	}
	return out
}

// staticSkipRow is killengine's row on a pair whose upstream router has a
// static worker list: skipped with the sim's reason.
func staticSkipRow(p api.Pair, cite string) Difference {
	return Difference{Claim: "killengine", Pair: p, Kind: StaticWorkers, Emulated: Pass, Upstream: Skip,
		Shows: []Evidence{{Reason: staticSkip}}, Why: upstream.StaticLimit("killengine"), Cite: cite}
}

// The P/D banner rows: the spec checks the banner's mode last, so its
// failure on the mode alone means the pools' splits and counters held.
const (
	pdStaticBanner = `(?s)^the router's startup banner\nExpected the router's startup banner to show mode VllmPrefillDecode \{ prefill_urls: \[\], decode_urls: \[\],.*\}, ` +
		`but mode\.prefill_urls is \[\("http://[0-9.]+:8000", Some\(8998\)\).*\], want \[\]; mode\.decode_urls is \["http://[0-9.]+:8000".*\], want \[\]:`
	pdStaticWhy = "with discovery the banner's mode lists no URLs (clap and launcher alike: workers come later); the static " +
		"list is given at start, so the banner names the prefill and decode URLs. Only the mode differs: the spec checks it " +
		"after the pools' splits and counters, which held"
	pdIGWBanner = `(?s)^the router's startup banner\nExpected the router's startup banner to show mode PrefillDecode \{ prefill_urls: \[\], decode_urls: \[\],.*\}, ` +
		`but mode is Regular:\n.*mode: Regular \{ worker_urls: \[\] \}`
	pdIGWWhy = "under IGW the PyO3 binding builds RoutingMode::Regular { worker_urls: [] } whatever --pd-disaggregation says, " +
		"where clap's config keeps PrefillDecode with the pool policies; with static workers IGW's router manager builds the " +
		"P/D router either way, and the pools' splits and counters (checked before the mode) held. Under the routers' own " +
		"discovery (the API-server tier) the same mode stops the launcher: \"Configuration error: Validation failed: Regular " +
		"mode with service discovery requires a non-empty selector\", exit 1, since the operator renders only the pool " +
		"selectors: through this front end the gateway cannot run the operator's P/D rendering at all"
	staticSkip = `cannot judge killengine on .*: upstream router with a static worker list`
)
