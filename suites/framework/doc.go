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
// cases run on each: per pair, one deployment per shape (the configured
// servers; a prefill/decode pair of 2+2, or 1+1 where a claim needs it),
// whatever router args its cases run with. Its cases run in an order that
// keeps the edits few: those that edit or fault it (Claim.Mutates) after
// every one that does not; within each, the cases with the same router
// args side by side, in the order their args first appear in the
// registry. It is created with the first case's args, and a case that
// needs others edits spec.router.extraArgs before it runs (Step.Edit): the
// operator replaces the router Pod and leaves the engines
// (docs/operator.md#router-edits). A value the router refuses at startup
// (Deployment.Refused: badpolicy, badthreshold, pdbadpolicy) is edited in,
// the refusal confirmed on the new router Pod, and edited back until the
// router is Ready again (Spec.Refuse). Cases that need a deployment of
// their own (Deployment.Own) or none run alone. Describe executes the plan:
// each shared deployment is an Ordered, ContinueOnFailure container, the
// longest first, whose first spec creates it (after its own skips, so
// each keeps its reason) and whose BeforeAll's DeferCleanup deletes it
// after the last; each spec's failure is its own. The README's deployment
// table, make plan and the report's projected cost are read from the same
// plan.
//
// # Each edit is checked
//
// An edit waits until the deployment is Ready with a router Pod of the new
// args and none of the old one left (the target's WaitReady includes the
// end of the router rollout: the operator's readiness gate alone holds
// through the old Pod), and, for a router that prints one, for the new
// Pod's banner. Then the engine Pods' UIDs must be the ones before the
// edit. If an edit replaced one (another operator version could), the
// edit guard trips: the run says so in one line (the end-of-run summary
// and the report's environment block), switch fails with that line, and
// every process creates a deployment per router-argument set for the rest
// of the run instead of editing (a refused value then gets a deployment
// created with it). E2E_ISOLATE=1 still plans every case alone, for
// debugging one claim without the others' history.
//
// # Why shared history cannot change an outcome
//
// Sharing saves an image pull and a model load per engine Pod on a GPU
// cluster, and it is safe because no claim that shares a deployment can
// see what ran before it:
//
//   - A router Pod started by an edit runs the same argv as one started at
//     creation; it only starts later, after its engines are Ready, and
//     every case runs only once the readiness gate has confirmed every
//     replica behind the new Pod, as at creation. It starts with no state:
//     no prefix tree, no load, no counters, no open circuit. Cases that run
//     on args they did not edit in share the router Pod of the cases before
//     them with those args, exactly as they shared a deployment created
//     with them before.
//   - Banners (defaults, roundrobin, the policy claims) are printed at
//     startup, before any traffic; an edit's new Pod prints its own.
//   - Traffic claims judge engine counter deltas over their own requests,
//     whose prompts start with a fresh nonce (or fresh session ids and
//     header keys), so no earlier prefix can match them. vllm-router's
//     cache_aware routes a chat on an empty text whatever came before; 120
//     round-robin picks over two replicas are 60/60 from any starting
//     index, and 8 over two workers 4/4 (the prefill/decode pools).
//   - Series claims (metrics) ask only that series exist and name exactly
//     the replicas, which earlier traffic to the same replicas cannot
//     change; router counters are read as deltas. Engine counters only
//     rise, and every claim reads them as deltas over its own requests.
//   - admission's "admitted" check is the shared deployment brought to its
//     documented args, by its creation or by an edit: the webhook answers
//     both.
//   - Cases that hold requests (routingtext, thresholds) first wait until
//     the router shows nothing in flight, and rely on the routers'
//     candidate order, which holds while membership does; a concurrency
//     level's one-replica shape holds whichever replica its warm-up took.
//   - A refused value leaves nothing behind: its router Pod never becomes
//     Ready and is gone once the args are edited back, and the Pod that
//     served before serves on, never having seen a request of the refusal
//     (no traffic is sent during it).
//   - The claims that edit or fault a deployment (Mutates) run after every
//     claim of it that does not, so none of those sees an edit of theirs, a
//     replaced Pod or an open circuit. Each puts the deployment back as it
//     found it and whole before it ends (Spec.RestoreAfter; engineerrors
//     replaces the router Pod so that its open circuit is gone), measures
//     its own traffic only, and judges a split over a batch sent after its
//     own edit on a router Pod that started empty: their order among
//     themselves cannot change an outcome either. Only killengine starts
//     an engine Pod more (the replacement of the one it kills).
//   - A prefill/decode case never shares a server deployment: its
//     deployment has a shape, and only cases of the same shape share.
//
// A claim added later must be as indifferent to history, or give its
// cases deployments of their own.
//
// # Evidence
//
// Every spec records what it measured (Spec.Record and report entries)
// before it asserts, and every domain judgement goes through a matcher of
// package assertions, so a failure shows its evidence: splits as tables,
// series before → after, bounds with their derivation.
package framework
