// Package policy holds the worker-selection policies of the two argv routers
// the sim emulates: vllm-router v0.1.15 (FlavorVR) and sgl-model-gateway
// gateway-v0.3.1 (FlavorSG). Each policy is a port of the behaviour described
// in docs/routers.md#routing (read from the routers' Rust source); where the
// two routers differ, the flavor picks the variant.
//
// A policy only chooses. The router owns everything around the choice: the
// candidate list and its order (VR: random per process, SG: registration
// order), health, the in-flight load counters (kept only under cache_aware),
// the routing text per endpoint, retries (each attempt calls Select again) and
// the Prometheus series. Select reports what the router needs to record.
//
// Every Policy is safe for concurrent use.
package policy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// Flavor selects which router's variant of a policy to run.
type Flavor int

const (
	// FlavorVR is vllm-router v0.1.15.
	FlavorVR Flavor = iota + 1
	// FlavorSG is sgl-model-gateway gateway-v0.3.1.
	FlavorSG
)

// String names the router the flavor emulates.
func (f Flavor) String() string {
	switch f {
	case FlavorVR:
		return "vllm-router"
	case FlavorSG:
		return "sgl-model-gateway"
	default:
		return fmt.Sprintf("Flavor(%d)", int(f))
	}
}

// Policy names, exactly as the routers' --policy flag spells them.
const (
	CacheAware     = "cache_aware"
	RoundRobin     = "round_robin"
	Random         = "random"
	PowerOfTwo     = "power_of_two"
	ConsistentHash = "consistent_hash" // VR only
	RendezvousHash = "rendezvous_hash" // VR only
	PrefixHash     = "prefix_hash"     // SG only
	Manual         = "manual"          // SG only
)

// Names lists the --policy values a router accepts, in the order clap prints
// them in its "[possible values: …]" line.
func Names(f Flavor) []string {
	switch f {
	case FlavorVR:
		return []string{Random, RoundRobin, CacheAware, PowerOfTwo, ConsistentHash, RendezvousHash}
	case FlavorSG:
		return []string{Random, RoundRobin, CacheAware, PowerOfTwo, PrefixHash, Manual}
	default:
		return nil
	}
}

// Worker is what a policy reads of a candidate worker. A Worker that also
// implements ModelWorker gives SG cache_aware its tree key.
type Worker interface {
	// URL is the worker's base URL, e.g. http://127.3.0.7:8000.
	URL() string
	// Healthy reports whether the router currently considers it healthy.
	Healthy() bool
	// Load is the router's in-flight count for the worker. The router keeps it
	// only under cache_aware; under every other policy it stays 0.
	Load() int64
}

// ModelWorker is optionally implemented by a Worker: its model id. SG
// cache_aware keys its tree by the first healthy candidate's model id (the
// router pre-filters candidates by model); without it Request.Model is used.
type ModelWorker interface {
	Model() string
}

// Request is what a policy sees of one request.
type Request struct {
	// Text is the routing text the router extracted (docs/routers.md#routing-text). It
	// may be empty (VR chat without session_id).
	Text string
	// Headers are the client's request headers (consistent_hash,
	// rendezvous_hash and manual read them). May be nil.
	Headers http.Header
	// Model is the model id the router resolved for the request. SG
	// cache_aware keys its tree by it when the workers do not implement
	// ModelWorker; VR always uses the key "default".
	Model string
	// TokenIDs are pre-tokenised input ids. The HTTP routers never pass them,
	// so prefix_hash finds no worker over HTTP.
	TokenIDs []uint32
}

// Decision is the outcome of one Select.
type Decision struct {
	// Index is the chosen worker's position in the slice given to Select,
	// or -1 when the policy found no worker.
	Index int
	// Record is false when the router must not record its per-pick metrics
	// for this choice (VR power_of_two with a single healthy worker returns it
	// without recording processed_requests/policy_decisions).
	Record bool
	// Branch is the policy's branch label for the branch counters:
	// smg_manual_policy_branch_total (vacant, occupied_hit, occupied_miss,
	// no_routing_id, no_healthy_workers) and
	// smg_prefix_hash_policy_branch_total (no_tokens, …). Empty for policies
	// without a branch counter.
	Branch string
	// Imbalanced is true when cache_aware took its load-balancing path. VR
	// then records vllm_router_load_balancing_events_total and sets
	// vllm_router_max_load/vllm_router_min_load to MaxLoad/MinLoad; SG
	// records nothing for it.
	Imbalanced bool
	// MaxLoad and MinLoad are the loads cache_aware compared (max and min
	// over all candidates, healthy or not); set whenever cache_aware ran its
	// imbalance check.
	MaxLoad, MinLoad int64
}

// None is the decision "no worker".
func None() Decision { return Decision{Index: -1, Record: false} }

// Policy chooses a worker for a request.
type Policy interface {
	// Name is the --policy value, e.g. "cache_aware"; routers use it as the
	// metrics `policy` label and to decide whether to count in-flight load.
	Name() string
	// Select picks one of workers for req. The order of workers is the
	// router's candidate order and decides ties and round-robin positions;
	// policies never reorder it. Unhealthy workers are skipped.
	Select(workers []Worker, req Request) Decision
	// AddWorker tells the policy a worker joined (cache_aware seeds its tree
	// with insert("", url) under the model's key; the hash policies rebuild
	// their ring lazily). model is the worker's model id ("" for VR).
	AddWorker(url, model string)
	// RemoveWorker tells the policy a worker left (cache_aware drops the
	// tenant from every tree; manual forgets nothing until its idle eviction).
	RemoveWorker(url string)
	// Run does the policy's background work (cache_aware tree eviction every
	// EvictionInterval; manual idle-key eviction) until ctx is done, then
	// returns ctx's error. Policies without background work just wait for
	// ctx. Call it at most once per policy, in its own goroutine.
	Run(ctx context.Context) error
}

// CacheEntries is implemented by the manual policy: the number of routing
// keys it remembers (gauge smg_manual_policy_cache_entries).
type CacheEntries interface {
	CacheEntries() int
}

// TreeSizes is implemented by cache_aware: characters held per worker URL in
// the tree of the given model key (VR: "default"), for the tree-size gauge.
type TreeSizes interface {
	TreeSizes(modelKey string) map[string]int
}

// Config holds every policy knob of both routers (docs/routers.md#command-line-flags).
// New uses every field as given, because zero is a real setting
// (--cache-threshold 0, --balance-abs-threshold 0, --eviction-interval 0
// disables eviction): start from DefaultConfig and override what the argv
// sets.
type Config struct {
	// CacheThreshold is --cache-threshold (f32 in Rust; default 0.3).
	CacheThreshold float32
	// BalanceAbsThreshold is --balance-abs-threshold (default 64).
	BalanceAbsThreshold int64
	// BalanceRelThreshold is --balance-rel-threshold (f32; default 1.5).
	BalanceRelThreshold float32
	// EvictionInterval is --eviction-interval (default 120s): cache_aware
	// tree eviction and, on SG, manual idle-key eviction. 0 disables the
	// background task, as in the routers.
	EvictionInterval time.Duration
	// MaxTreeSize is --max-tree-size, characters per tenant (default 2^26).
	MaxTreeSize int
	// MaxIdle is SG --max-idle-secs for manual (default 14400s); 0 disables
	// idle eviction, as in the router.
	MaxIdle time.Duration
	// PrefixTokenCount is SG --prefix-token-count (default 256).
	PrefixTokenCount int
	// PrefixHashLoadFactor is SG --prefix-hash-load-factor (default 1.25).
	PrefixHashLoadFactor float32
	// LoadCheckInterval is power_of_two's load_check_interval_secs, hard-coded
	// to 5s in both routers' PolicyConfig (the SG poller itself runs every
	// --worker-startup-check-interval).
	LoadCheckInterval time.Duration
	// VirtualNodes is VR consistent_hash's ring size per worker (160).
	VirtualNodes int
}

// Router defaults (docs/routers.md#vllm-router-flags, docs/routers.md#sgl-model-gateway-flags).
const (
	DefaultCacheThreshold       float32 = 0.3
	DefaultBalanceAbsThreshold  int64   = 64
	DefaultBalanceRelThreshold  float32 = 1.5
	DefaultEvictionInterval             = 120 * time.Second
	DefaultMaxTreeSize                  = 1 << 26
	DefaultMaxIdle                      = 14400 * time.Second
	DefaultPrefixTokenCount             = 256
	DefaultPrefixHashLoadFactor float32 = 1.25
	DefaultLoadCheckInterval            = 5 * time.Second
	DefaultVirtualNodes                 = 160
)

// DefaultConfig returns the routers' defaults.
func DefaultConfig() Config {
	return Config{
		CacheThreshold:       DefaultCacheThreshold,
		BalanceAbsThreshold:  DefaultBalanceAbsThreshold,
		BalanceRelThreshold:  DefaultBalanceRelThreshold,
		EvictionInterval:     DefaultEvictionInterval,
		MaxTreeSize:          DefaultMaxTreeSize,
		MaxIdle:              DefaultMaxIdle,
		PrefixTokenCount:     DefaultPrefixTokenCount,
		PrefixHashLoadFactor: DefaultPrefixHashLoadFactor,
		LoadCheckInterval:    DefaultLoadCheckInterval,
		VirtualNodes:         DefaultVirtualNodes,
	}
}

// LoadUpdater is implemented by power_of_two: the router's load monitor
// pushes every poll's result (SG LoadMonitor: url -> sum of num_tokens from
// SGLang GET /get_load, -1 for a worker whose poll failed, as in the source;
// the map replaces the previous one). Ignored when a LoadSource was given.
type LoadUpdater interface {
	UpdateLoads(loads map[string]int64)
}

// WorkerIniter is implemented by cache_aware: VR's router calls
// init_workers with all of the model's workers after every worker it adds,
// which seeds each with insert("", url) and logs "Initializing workers for
// cache-aware policy: …" and "Creating tree for model key: '…' with N
// workers" (through WithInfoLogger).
type WorkerIniter interface {
	InitWorkers(urls []string, model string)
}

// LoadSource reports a worker's load as polled from the engine (SG's
// LoadMonitor sums num_tokens of SGLang GET /get_load). ok is false while no
// poll has answered for url.
type LoadSource interface {
	PolledLoad(url string) (load int64, ok bool)
}

// LoadSourceFunc adapts a function to LoadSource.
type LoadSourceFunc func(url string) (int64, bool)

// PolledLoad calls f.
func (f LoadSourceFunc) PolledLoad(url string) (int64, bool) { return f(url) }

// Option customises New.
type Option func(*options)

type options struct {
	rand  rand.Source
	loads LoadSource
	now   func() time.Time
	log   func(LogRecord)
}

// LogRecord is one info-level message the real policy logs with tracing.
// Target is the Rust module path (e.g. vllm_router_rs::policies::power_of_two),
// File and Line the source location tracing prints, read at VR e667ebb and
// SG 7c3502c6 (v0.1.15's lines may differ; docs/routers.md#not-established).
type LogRecord struct {
	Target  string
	File    string
	Line    int
	Message string
}

// WithInfoLogger receives the policy's info-level log messages (VR
// power_of_two, consistent_hash, rendezvous_hash picks and cache_aware
// init; SG manual's idle eviction). Without it they are dropped.
func WithInfoLogger(f func(LogRecord)) Option { return func(o *options) { o.log = f } }

// WithRandSource makes the policy's random choices come from src (tests pass
// a seeded source for determinism). The policy serialises access to src.
func WithRandSource(src rand.Source) Option { return func(o *options) { o.rand = src } }

// WithLoadSource gives SG power_of_two its polled loads.
func WithLoadSource(ls LoadSource) Option { return func(o *options) { o.loads = ls } }

// WithClock replaces time.Now (manual's idle eviction) for tests.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// ErrUnknownPolicy is wrapped by New's error for a name the flavor does not
// accept.
var ErrUnknownPolicy = errors.New("unknown policy")

// New builds the named policy for the flavor from cfg as given. It fails
// (wrapping ErrUnknownPolicy) for a name the flavor's --policy does not accept
// (e.g. consistent_hash on SG) and for knobs the routers' types reject
// (negative counts or durations).
func New(flavor Flavor, name string, cfg Config, opts ...Option) (Policy, error) {
	return newPolicy(flavor, name, cfg, opts...)
}
