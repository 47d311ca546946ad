// Package config reads the suite's one configuration file (e2e.yaml): the
// target, model, engine and router versions and images, request counts and
// every wait's [timeout, poll] keyed <spec>/<op>. The file is decoded
// strictly and checked before any spec runs; an error names the file, the
// field path and what is accepted, e.g.
//
//	e2e.yaml: routers[1].name "vllm_router" is not one of llm-d-router, vllm-router, sglang-gateway (line 14)
//
// Environment variables override single fields for CI (see Overrides).
package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/api"
)

// DefaultFile is the suite config's name at the repository root.
const DefaultFile = "e2e.yaml"

// Targets the suite can run on.
const (
	TargetSim  = "sim"
	TargetKube = "kube"
	TargetKind = "kind"
)

// Targets lists the accepted values of target.
var Targets = []string{TargetSim, TargetKube, TargetKind}

// Artifact collection modes.
const (
	CollectOnFailure = "onFailure"
	CollectAlways    = "always"
	CollectNever     = "never"
)

// CollectModes lists the accepted values of collectArtifacts.
var CollectModes = []string{CollectOnFailure, CollectAlways, CollectNever}

// Config is the whole e2e.yaml.
type Config struct {
	// Target is where the suite runs: sim (default), kube or kind.
	Target string `json:"target"`
	// Model is the served model.
	Model Model `json:"model"`
	// Engines lists the engine versions and images to qualify.
	Engines []Engine `json:"engines"`
	// Routers lists the routers to qualify; a pair runs for each engine a router fronts.
	Routers []Router `json:"routers"`
	// RouterImage is spec.router.image; empty leaves the operator's setting in force.
	RouterImage string `json:"routerImage,omitempty"`
	// InstanceType is spec.roles[].instanceType. Empty: on kube and kind the
	// Active accelerated InstanceType with the most free accelerators; on the
	// sim, SimInstanceType (the sim accepts any name).
	InstanceType string `json:"instanceType"`
	// Replicas is the engine replica count of every routed deployment (>= 2).
	Replicas int32 `json:"replicas"`
	// Traffic holds request counts and prompt shapes.
	Traffic Traffic `json:"traffic"`
	// Intervals maps <spec>/<op> to [timeout, poll]; default/<op> is the fallback.
	// These apply to kube and kind; the sim has its own under sim.intervals.
	Intervals map[string]Interval `json:"intervals"`
	// Artifacts is the directory for reports and per-spec dumps.
	Artifacts string `json:"artifacts"`
	// CollectArtifacts says when a spec dumps logs, status and metrics: onFailure, always or never.
	CollectArtifacts string `json:"collectArtifacts"`
	// SkipCleanup keeps what specs created (for a human to inspect).
	SkipCleanup bool `json:"skipCleanup,omitempty"`
	// CostModel is make plan's GPU-cost model (cost.go).
	CostModel CostModel `json:"costModel"`
	// Sim, Kube and Kind hold per-target options.
	Sim  Sim  `json:"sim"`
	Kube Kube `json:"kube"`
	Kind Kind `json:"kind"`

	// file is the path the config was read from, for error messages.
	file string
	// specs are the names accepted before the slash of an interval key
	// besides default, sorted: the suite's claims.
	specs []string
	// sources records where each field path came from: a file line or an
	// environment variable.
	lines   map[string]int
	fromEnv map[string]string
}

// Model is the served model.
type Model struct {
	// Name is spec.model.name, the string clients send as "model".
	Name string `json:"name"`
	// ContextLength is passed to every engine with its own flag:
	// vLLM --max-model-len, SGLang --context-length.
	ContextLength int `json:"contextLength"`
}

// Engine is one engine under qualification.
type Engine struct {
	// Name is vLLM or SGLang (spec.engine.name).
	Name string `json:"name"`
	// Version is spec.engine.version.
	Version string `json:"version"`
	// Image is spec.roles[].image; empty lets the operator synthesize the runner image.
	Image string `json:"image,omitempty"`
	// ExtraArgs are appended to every role's extraArgs after the context-length flag.
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// Router is one router under qualification.
type Router struct {
	// Name is spec.router.name.
	Name string `json:"name"`
	// Image overrides routerImage for this router.
	Image string `json:"image,omitempty"`
}

// Traffic holds the request counts and prompt shape the specs use.
type Traffic struct {
	// Requests is the number of serial requests per measured split (120).
	Requests int `json:"requests"`
	// Concurrency lists the concurrency levels for concurrent specs.
	Concurrency []int `json:"concurrency"`
	// PrefixChars is the length of the prefix shared by affinity prompts (500).
	PrefixChars int `json:"prefixChars"`
	// MaxTokens is max_tokens of every request.
	MaxTokens int `json:"maxTokens"`
	// RequestTimeout bounds one request.
	RequestTimeout Duration `json:"requestTimeout"`
}

// Sim holds options of the embedded target.
type Sim struct {
	// Intervals override the top-level ones on the sim (same keys and fallbacks).
	Intervals map[string]Interval `json:"intervals,omitempty"`
	// EngineTTFT, EngineITL and EngineOutputTokens become the engines'
	// SIM_ENGINE_TTFT, SIM_ENGINE_ITL and SIM_ENGINE_OUTPUT_TOKENS.
	EngineTTFT         Duration `json:"engineTTFT"`
	EngineITL          Duration `json:"engineITL"`
	EngineOutputTokens int      `json:"engineOutputTokens"`
	// LLMD says what runs as the llm-d-router pairs' epp container:
	// SimLLMDEmulated (this project's emulation of v0.10.0, the default) or
	// SimLLMDUpstream (llm-d-router's own EPP, built by make upstream-llmd;
	// docs/upstream-llmd.md).
	LLMD string `json:"llmd,omitempty"`
	// RoutersDir is the make routers build the sim runs vllm-router and
	// sglang-gateway from (its manifest.json's directory); empty: the
	// repository's own (.routers, sim/upstream's default).
	RoutersDir string `json:"routersDir,omitempty"`
	// LLMDDir is the make upstream-llmd build sim.llmd: upstream runs;
	// empty: the repository's own (.upstream-llmd).
	LLMDDir string `json:"llmdDir,omitempty"`
	// TestOnlyReplaceEnginesOnRouterEdit makes the sim replace a
	// deployment's engine Pods on every router edit, as a real operator may:
	// the project's own tests of the suite's edit guard set it
	// (E2E_SIM_TEST_ONLY_REPLACE_ENGINES_ON_ROUTER_EDIT); no file can.
	TestOnlyReplaceEnginesOnRouterEdit bool `json:"-"`
}

// The sim.llmd values.
const (
	SimLLMDEmulated = "emulated"
	SimLLMDUpstream = "upstream"
)

// SimLLMDModes are the accepted sim.llmd values.
var SimLLMDModes = []string{SimLLMDEmulated, SimLLMDUpstream}

// Kube holds options of an existing cluster.
type Kube struct {
	// Kubeconfig is the file to use; empty falls back to $KUBECONFIG, then in-cluster.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context selects a kubeconfig context; empty uses the current one.
	Context string `json:"context,omitempty"`
	// NamespacePrefix starts every per-spec namespace: <prefix><spec>-<rand>-p<N>.
	NamespacePrefix string `json:"namespacePrefix"`
	// OperatorNamespace is where gpustack-operator runs.
	OperatorNamespace string `json:"operatorNamespace"`
}

// Kind holds options for a throwaway kind cluster (then run as kube).
type Kind struct {
	// ClusterName is the kind cluster name.
	ClusterName string `json:"clusterName"`
	// Config is a kind cluster config file.
	Config string `json:"config,omitempty"`
	// NodeImage is the kindest/node image; empty uses kind's default.
	NodeImage string `json:"nodeImage,omitempty"`
	// OperatorChart is the gpustack-operator Helm chart (directory or .tgz).
	OperatorChart string `json:"operatorChart,omitempty"`
	// KeepCluster leaves the cluster running after the suite.
	KeepCluster bool `json:"keepCluster,omitempty"`
}

// SpecDefault is the name before the slash of the fallback interval keys,
// default/<op>. The other names are the suite's claims: the suite passes
// them to Load, so a key naming no claim is refused (config cannot import
// the suite).
const SpecDefault = "default"

// Ops that may appear after the slash of an interval key.
const (
	// OpWaitReady waits for a deployment to become Ready.
	OpWaitReady = "wait-ready"
	// OpWaitRouterCrash waits for a router to exit and restart.
	OpWaitRouterCrash = "wait-router-crash"
	// OpWaitLogs waits for a line in router logs.
	OpWaitLogs = "wait-logs"
	// OpWaitMetrics waits for a series or a counter to reach a value.
	OpWaitMetrics = "wait-metrics"
	// OpWaitDeleted waits for a deployment's objects to be gone.
	OpWaitDeleted = "wait-deleted"
	// OpConsistently is how long a "never happens" check watches.
	OpConsistently = "consistently"
	// OpTraffic bounds one traffic run of a spec, however many requests it
	// has: a router that never answers fails the spec within it.
	OpTraffic = "traffic"
	// OpFaultWindow is how long requests may keep failing after a fault or
	// an edit before the target has routed around it (a resilience bound's
	// window: the rate of the spec's traffic times this many seconds).
	OpFaultWindow = "fault-window"
	// OpRecover is how long a deployment may take to be whole again after
	// a fault (a replaced engine Pod loads its model).
	OpRecover = "recover"
)

// Ops lists the op names accepted in interval keys.
var Ops = []string{OpConsistently, OpFaultWindow, OpRecover, OpTraffic, OpWaitDeleted, OpWaitLogs, OpWaitMetrics, OpWaitReady, OpWaitRouterCrash}

// SimInstanceType is the InstanceType name used on the sim when none is set.
const SimInstanceType = "sim-gpu"

// File is the path the config was read from ("" for Default()).
func (c *Config) File() string { return c.file }

// Specs lists the names accepted before the slash of an interval key:
// default, then the names the config was loaded with.
func (c *Config) Specs() []string { return append([]string{SpecDefault}, c.specs...) }

// Interval returns the [timeout, poll] for op in spec: <spec>/<op>, then
// default/<op>; on the sim, sim.intervals is searched before the top level.
// An unknown spec or op is an error, never a silent default.
func (c *Config) Interval(spec, op string) (Interval, error) {
	if !slices.Contains(c.Specs(), spec) {
		return Interval{}, fmt.Errorf("interval %s/%s: spec %q is not one of %s", spec, op, spec, strings.Join(c.Specs(), ", "))
	}
	if !slices.Contains(Ops, op) {
		return Interval{}, fmt.Errorf("interval %s/%s: op %q is not one of %s", spec, op, op, strings.Join(Ops, ", "))
	}
	var tables []map[string]Interval
	if c.Target == TargetSim {
		tables = append(tables, c.Sim.Intervals)
	}
	tables = append(tables, c.Intervals)
	for _, t := range tables {
		for _, key := range []string{spec + "/" + op, SpecDefault + "/" + op} {
			if iv, ok := t[key]; ok {
				return iv, nil
			}
		}
	}
	return Interval{}, fmt.Errorf("%s: intervals has neither %s/%s nor %s/%s", c.name(), spec, op, SpecDefault, op)
}

// Engine returns the configured engine by name.
func (c *Config) Engine(name string) (Engine, bool) {
	for _, e := range c.Engines {
		if e.Name == name {
			return e, true
		}
	}
	return Engine{}, false
}

// Router returns the configured router by name.
func (c *Config) Router(name string) (Router, bool) {
	for _, r := range c.Routers {
		if r.Name == name {
			return r, true
		}
	}
	return Router{}, false
}

// RouterImageFor is the image for router name: its own, else routerImage.
func (c *Config) RouterImageFor(name string) string {
	if r, ok := c.Router(name); ok && r.Image != "" {
		return r.Image
	}
	return c.RouterImage
}

func (c *Config) name() string {
	if c.file == "" {
		return DefaultFile
	}
	return c.file
}

// validate checks every field and returns all problems at once.
func (c *Config) validate() error {
	var p problems
	c.oneOf(&p, "target", c.Target, Targets)
	if c.Model.Name == "" {
		p.add(c, "model.name", "must be set to the served model name (spec.model.name)")
	}
	if c.Model.ContextLength <= 0 {
		p.add(c, "model.contextLength", fmt.Sprintf("must be a positive token count, got %d", c.Model.ContextLength))
	}
	if len(c.Engines) == 0 {
		p.add(c, "engines", "must list at least one engine ("+strings.Join(api.Engines, ", ")+")")
	}
	seen := map[string]bool{}
	for i, e := range c.Engines {
		path := fmt.Sprintf("engines[%d]", i)
		if c.oneOf(&p, path+".name", e.Name, api.Engines) {
			if seen[e.Name] {
				p.add(c, path+".name", fmt.Sprintf("%q is listed twice", e.Name))
			}
			seen[e.Name] = true
		}
		if e.Version == "" {
			p.add(c, path+".version", "must be set (spec.engine.version, e.g. \"0.29.0\")")
		}
	}
	if len(c.Routers) == 0 {
		p.add(c, "routers", "must list at least one router ("+strings.Join(api.Routers, ", ")+")")
	}
	seen = map[string]bool{}
	for i, r := range c.Routers {
		path := fmt.Sprintf("routers[%d].name", i)
		if c.oneOf(&p, path, r.Name, api.Routers) {
			if seen[r.Name] {
				p.add(c, path, fmt.Sprintf("%q is listed twice", r.Name))
			}
			seen[r.Name] = true
		}
	}
	if c.Replicas < 2 || c.Replicas > 16 {
		p.add(c, "replicas", fmt.Sprintf("must be between 2 and 16 (a split needs two replicas), got %d", c.Replicas))
	}
	t := c.Traffic
	if t.Requests < int(max(c.Replicas, 1)) {
		p.add(c, "traffic.requests", fmt.Sprintf("must be at least replicas (%d), got %d", c.Replicas, t.Requests))
	}
	if len(t.Concurrency) == 0 {
		p.add(c, "traffic.concurrency", "must list at least one concurrency level")
	}
	for i, n := range t.Concurrency {
		if n < 1 {
			p.add(c, fmt.Sprintf("traffic.concurrency[%d]", i), fmt.Sprintf("must be at least 1, got %d", n))
		}
	}
	if t.PrefixChars < 1 {
		p.add(c, "traffic.prefixChars", fmt.Sprintf("must be at least 1, got %d", t.PrefixChars))
	}
	if t.MaxTokens < 1 {
		p.add(c, "traffic.maxTokens", fmt.Sprintf("must be at least 1, got %d", t.MaxTokens))
	}
	if t.RequestTimeout <= 0 {
		p.add(c, "traffic.requestTimeout", "must be a positive duration such as \"60s\"")
	}
	c.checkIntervals(&p, "intervals", c.Intervals, true)
	c.checkCostModel(&p)
	c.checkIntervals(&p, "sim.intervals", c.Sim.Intervals, false)
	if c.Artifacts == "" {
		p.add(c, "artifacts", "must name a directory for reports (or set ARTIFACTS)")
	}
	c.oneOf(&p, "collectArtifacts", c.CollectArtifacts, CollectModes)
	c.oneOf(&p, "sim.llmd", c.Sim.LLMD, SimLLMDModes)
	if c.Sim.EngineOutputTokens < 1 {
		p.add(c, "sim.engineOutputTokens", fmt.Sprintf("must be at least 1, got %d", c.Sim.EngineOutputTokens))
	}
	if !dnsPrefix(c.Kube.NamespacePrefix) {
		p.add(c, "kube.namespacePrefix", fmt.Sprintf("%q must be 1-40 characters of a-z, 0-9 and '-', starting with a letter", c.Kube.NamespacePrefix))
	}
	if c.Kube.OperatorNamespace == "" {
		p.add(c, "kube.operatorNamespace", "must be set (gpustack-system in the operator's chart)")
	}
	if c.Target == TargetKind {
		if c.Kind.ClusterName == "" {
			p.add(c, "kind.clusterName", "must be set when target is kind")
		}
		if c.Kind.OperatorChart == "" {
			p.add(c, "kind.operatorChart", "must name the gpustack-operator chart when target is kind (or set E2E_OPERATOR_CHART)")
		}
	}
	return p.err(c)
}

func (c *Config) checkIntervals(p *problems, field string, m map[string]Interval, requireDefaults bool) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		path := field + "." + key
		spec, op, ok := strings.Cut(key, "/")
		switch {
		case !ok:
			p.add(c, path, "must be written <spec>/<op>, e.g. default/"+OpWaitReady)
			continue
		case !slices.Contains(c.Specs(), spec):
			p.add(c, path, fmt.Sprintf("names spec %q, which is not one of %s", spec, strings.Join(c.Specs(), ", ")))
		case !slices.Contains(Ops, op):
			p.add(c, path, fmt.Sprintf("names op %q, which is not one of %s", op, strings.Join(Ops, ", ")))
		}
		iv := m[key]
		if iv.Timeout <= 0 || iv.Poll <= 0 {
			p.add(c, path, fmt.Sprintf("must have a positive timeout and poll, got %s", iv))
		} else if iv.Poll > iv.Timeout {
			p.add(c, path, fmt.Sprintf("polls (%s) less often than it times out (%s)", iv.Poll, iv.Timeout))
		}
	}
	if requireDefaults {
		for _, op := range Ops {
			if _, ok := m[SpecDefault+"/"+op]; !ok {
				p.add(c, field, fmt.Sprintf("must set %s/%s (the fallback for every spec)", SpecDefault, op))
			}
		}
	}
}

// oneOf reports value not in accepted; it returns whether value was accepted.
func (c *Config) oneOf(p *problems, path, value string, accepted []string) bool {
	if slices.Contains(accepted, value) {
		return true
	}
	p.add(c, path, fmt.Sprintf("%q is not one of %s", value, strings.Join(accepted, ", ")))
	return false
}

func dnsPrefix(s string) bool {
	if len(s) < 1 || len(s) > 40 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Pairs lists the configured router/engine pairs the operator admits
// (api.Matrix), in Matrix order: the pairs the suite qualifies.
func (c *Config) Pairs() []api.Pair {
	var out []api.Pair
	for _, p := range api.Pairs() {
		_, rok := c.Router(p.Router)
		_, eok := c.Engine(p.Engine)
		if rok && eok {
			out = append(out, p)
		}
	}
	return out
}
