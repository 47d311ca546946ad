// Package difftest is the differential test of the sim's router emulations
// against the routers' upstream code: for each case it deploys one
// ModelDeployment's engines (the sim's own vLLM or SGLang emulators, as the
// operator renders them) on a sim kubelet, puts the emulated router and the
// upstream router (the PyPI wheel, clusters/sim/upstream) in front of the
// same engines from the same rendered argv, sends each the same request
// sequence, and compares, with a side by side table of whatever differs:
//
//   - picks: which engine each request reached, read from the engines
//     (their finished plus in-flight requests, before and after each
//     request), never from the routers; as candidate positions (compare.go
//     says where each router's candidate order comes from), or as the
//     engine itself for the hash policies, which pick by URL;
//   - answers: each request's status, and the body when the router wrote
//     it (not 2xx);
//   - the startup banner's fields (assertions/routerlog), the worker URL
//     lists aside;
//   - /metrics: the families (TYPE and HELP), the series' label sets with
//     engine URLs as candidate positions, the counters' and histogram
//     counts' change over the sequence and the gauges' values after it
//     (timings and the few series of the static-workers translation are
//     left out: Exclusions).
//
// Requests are sent one at a time, each once the previous one has reached
// its engines. A held request (Step.Held) generates HoldTokens tokens with
// ignore_eos, a few seconds at the engines' 1 ms per token, so the routers'
// in-flight accounting decides the picks that follow it; a held request
// answered before its Drain fails the run as a harness limit.
//
// Random policies cannot match request by request: their cases (Drawn)
// compare the answers and the metric series summed over workers, and
// assert a distribution (binomial bounds at a 1e-6 chance of a false
// failure) or stickiness. Where the upstream launcher refuses the argv
// (its argparse choices lack a policy the operator's clap binary has), the
// case asserts the refusal and compares nothing: that is a front-end
// difference, as are the banner fields listed in FrontEnds.
//
// The sim's SGLang engines answer /server_info with model_path and
// tokenizer_path, as SGLang does; sgl-model-gateway then tries to download
// that tokenizer from the Hugging Face hub, which is out of reach here: its
// register_tokenizer step logs "Failed to load tokenizer ..." within a
// fraction of a second and registration goes on (the step may fail; the
// worker is activated beside it). Its HTTP routers pass no token ids in
// gateway-v0.3.1, so with a tokenizer loaded they would route the same.
//
// TestDifferential runs under `make unit`; without `make upstream-routers`
// it skips, except under CI=true, where it fails with the reason. One
// case: go test ./clusters/sim/upstream/difftest -run 'TestDifferential/vllm-router/cache_aware$' -v
package difftest
