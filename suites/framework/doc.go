// Package framework runs a suite of claims: it reads each claim's
// fixtures/expect.yaml rows into the claim's own row type, plans which
// deployments the claims of each pair share, builds the Ginkgo spec tree
// from that plan, and gives every spec its input (in.Expect is its row)
// and its helpers: shared deployments, held requests, background traffic
// under a disruption, router crashes, splits, series, banners. A suite
// (suites/routing) holds claims only; its test file calls Registry.Suite.
//
// # The plan
//
// Registry.Plan computes, from the registry and expect.yaml alone and
// without creating anything, the ModelDeployments a run creates and which
// cases run on each: per pair, the cases that need a deployment of their
// own (Deployment.Own: a router that never starts, a setting no other case
// uses) or none run alone; every other deployment, one per router args
// and shape, is shared by the cases that need it, in registry order, those
// that edit or fault it (Claim.Mutates) last. Describe executes the plan:
// each shared deployment is an Ordered, ContinueOnFailure container whose
// first spec that needs it creates it (after its own skips, so each keeps
// its reason) and whose BeforeAll's DeferCleanup deletes it after the
// last; each spec's failure is its own. The README's deployment table and
// the cost figures are read from the same plan.
//
// # Why shared history cannot change an outcome
//
// Sharing saves an image pull and a model load per engine Pod on a GPU
// cluster, and it is safe because no claim that shares a deployment can
// see what ran before it:
//
//   - Banners (defaults, roundrobin, the policy claims) are printed at
//     startup, before any traffic.
//   - Traffic claims judge engine counter deltas over their own requests,
//     whose prompts start with a fresh nonce (or fresh session ids and
//     header keys), so no earlier prefix can match them. vllm-router's
//     cache_aware routes a chat on an empty text whatever came before; 120
//     round-robin picks over two replicas are 60/60 from any starting
//     index, and 8 over two workers 4/4 (the prefill/decode pools).
//   - Series claims (metrics) ask only that series exist and name exactly
//     the replicas, which earlier traffic to the same replicas cannot
//     change; router counters are read as deltas.
//   - admission's "admitted" check is the creation of the deployment it
//     shares (the one with its documented args), which the webhook admitted.
//   - Cases that hold requests (routingtext, thresholds) first wait until
//     the router shows nothing in flight, and rely on the routers'
//     candidate order, which holds while membership does; a concurrency
//     level's one-replica shape holds whichever replica its warm-up took.
//   - The claims that edit or fault a deployment (Mutates) run after every
//     claim of it that does not, so none of those sees an edit, a replaced
//     Pod or an open circuit. Each puts the deployment back as created and
//     whole before it ends (Spec.RestoreAfter; engineerrors replaces the
//     router Pod so that its open circuit is gone), measures its own
//     traffic only, and judges a split over a batch sent after its own edit
//     on a router Pod that started empty: their order among themselves
//     cannot change an outcome either. Only killengine starts an engine Pod
//     more (the replacement of the one it kills).
//   - A prefill/decode case never shares a server deployment: its
//     deployment has a shape, and only cases of the same shape and args
//     share.
//
// A claim added later must be as indifferent to history, or give its
// cases deployments of their own. E2E_ISOLATE=1 plans every case alone,
// for debugging one claim without the others' history.
//
// # Evidence
//
// Every spec records what it measured (Spec.Record and report entries)
// before it asserts, and every domain judgement goes through a matcher of
// package assertions, so a failure shows its evidence: splits as tables,
// series before → after, bounds with their derivation.
package framework
