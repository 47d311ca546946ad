package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/internal/yamlbind"
)

// LookupEnv is os.LookupEnv's shape, so tests can pass a map.
type LookupEnv func(key string) (string, bool)

// The environment variables of the table (Overrides) that code outside
// this package names: the suite, make e2e's runner and the tests read or
// set them by these constants, so each name is written once.
const (
	// EnvConfig overrides the config path (Path).
	EnvConfig = "E2E_CONFIG"
	// EnvTarget and EnvArtifacts set target and artifacts; make e2e's
	// runner passes its -target and -artifacts to the suite through them.
	EnvTarget    = "E2E_TARGET"
	EnvArtifacts = "ARTIFACTS"
	// EnvRoutersDir and EnvLLMDDir set sim.routersDir and sim.llmdDir; the
	// build scripts (hack/routers.sh, hack/upstream-llmd.sh) write there.
	EnvRoutersDir = "E2E_ROUTERS_DIR"
	EnvLLMDDir    = "E2E_LLMD_DIR"
	// EnvIsolate is read by Isolated.
	EnvIsolate = "E2E_ISOLATE"
	// EnvTestOnlyReplaceEngines sets sim.TestOnlyReplaceEnginesOnRouterEdit.
	EnvTestOnlyReplaceEngines = "E2E_SIM_TEST_ONLY_REPLACE_ENGINES_ON_ROUTER_EDIT"
	// EnvReliability turns on cmd/e2e's tests that run make e2e on the sim
	// (make reliability sets it).
	EnvReliability = "E2E_RELIABILITY"
	// EnvProgressFIFO names the FIFO through which the suite's processes
	// send make e2e's runner their traffic progress (internal/progress).
	EnvProgressFIFO = "E2E_PROGRESS_FIFO"
	// EnvDriverOverhead names the file in which make e2e's runner left the
	// traffic driver's measured overhead for the report.
	EnvDriverOverhead = "E2E_DRIVER_OVERHEAD"
)

// Path returns the config file to read: $E2E_CONFIG if set, else flagValue.
func Path(flagValue string, env LookupEnv) string {
	if v, ok := env(EnvConfig); ok && v != "" {
		return v
	}
	return flagValue
}

// Load reads path, applies the process environment's overrides and checks
// the result. Relative paths inside the file are taken from the file's
// directory, relative paths from the environment from the working directory.
// specs are the names accepted before the slash of an interval key besides
// default (the suite passes its claims' names).
func Load(path string, specs ...string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read the suite config: %w (set -e2e.config or %s)", path, err, EnvConfig)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(path, data, filepath.Dir(abs), os.LookupEnv, specs...)
}

// Parse decodes data (named name in errors) over Default(), applies env
// overrides, resolves relative paths against baseDir and validates; specs
// are as for Load.
func Parse(name string, data []byte, baseDir string, env LookupEnv, specs ...string) (*Config, error) {
	c := Default()
	c.file = name
	c.specs = slices.Sorted(slices.Values(specs))
	c.lines = map[string]int{}
	c.fromEnv = map[string]string{}

	root, err := yamlbind.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if root != nil {
		d := &yamlbind.Decoder{Lines: c.lines}
		d.Decode(root, c, "")
		if len(d.Errs) > 0 {
			e := &Error{}
			for _, msg := range d.Errs {
				e.Problems = append(e.Problems, name+": "+msg)
			}
			return nil, e
		}
	}
	if err := c.applyEnv(env); err != nil {
		return nil, err
	}
	// A path from the file is relative to the file, one from the environment
	// to the working directory (left as given if that is unknown).
	wd, wdErr := os.Getwd()
	for field, p := range map[string]*string{"artifacts": &c.Artifacts, "kube.kubeconfig": &c.Kube.Kubeconfig,
		"kind.config": &c.Kind.Config, "kind.operatorChart": &c.Kind.OperatorChart,
		"sim.routersDir": &c.Sim.RoutersDir, "sim.llmdDir": &c.Sim.LLMDDir} {
		base := baseDir
		if _, ok := c.fromEnv[field]; ok {
			if wdErr != nil {
				continue
			}
			base = wd
		}
		if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(*p, "~/") {
			*p = filepath.Join(home, (*p)[2:])
		}
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	if c.InstanceType == "" && c.Target == TargetSim {
		c.InstanceType = SimInstanceType
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Use says what an environment variable of the table is for.
type Use string

const (
	// UseSetting sets Field, which the config file may set too; the
	// environment wins.
	UseSetting Use = "setting"
	// UseEnvOnly is a setting read from the environment only, by the code
	// its Help names; it is no field of the file.
	UseEnvOnly Use = "environment only"
	// UseTestOnly is a switch the project's own tests set; a run never
	// needs it.
	UseTestOnly Use = "test only"
	// UseInternal passes a value from make e2e's runner to the suite's
	// processes; the runner sets it, a user never does.
	UseInternal Use = "internal"
)

// Override is one environment variable the suite or its runner reads: one
// row of the table every E2E_* knob is in.
type Override struct {
	Env string
	// Field is the config field it sets ("" for a row that sets none).
	Field string
	Help  string
	Use   Use
	// set applies the value; nil for a row that Load does not apply.
	set func(c *Config, v string) error
}

// Overrides lists the environment variables the suite and make e2e's
// runner read, settings first, in the order they are applied. CI permutes
// versions and targets with them without editing e2e.yaml. The README's
// table of them is generated from this one (make docs).
func Overrides() []Override {
	str := func(f func(c *Config) *string) func(*Config, string) error {
		return func(c *Config, v string) error { *f(c) = v; return nil }
	}
	return []Override{
		{Env: EnvTarget, Field: "target", Help: "sim, kube or kind", set: str(func(c *Config) *string { return &c.Target })},
		{Env: "E2E_MODEL", Field: "model.name", Help: "served model name", set: str(func(c *Config) *string { return &c.Model.Name })},
		{Env: "E2E_INSTANCE_TYPE", Field: "instanceType", Help: "InstanceType for every role", set: str(func(c *Config) *string { return &c.InstanceType })},
		{Env: "E2E_REPLICAS", Field: "replicas", Help: "engine replicas", set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("expected an integer, got %q", v)
			}
			c.Replicas = int32(n)
			return nil
		}},
		{Env: "E2E_REQUESTS", Field: "traffic.requests", Help: "serial requests per split", set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("expected an integer, got %q", v)
			}
			c.Traffic.Requests = n
			return nil
		}},
		{Env: "E2E_ROUTERS", Field: "routers", Help: "comma-separated router names to qualify", set: func(c *Config, v string) error {
			var list []Router
			for _, name := range strings.Split(v, ",") {
				name = strings.TrimSpace(name)
				r, ok := c.Router(name)
				if !ok {
					r = Router{Name: name}
				}
				list = append(list, r)
			}
			c.Routers = list
			return nil
		}},
		{Env: "E2E_ROUTER_IMAGE", Field: "routerImage", Help: "spec.router.image", set: str(func(c *Config) *string { return &c.RouterImage })},
		{Env: "E2E_VLLM_VERSION", Field: "engines[vLLM].version", Help: "vLLM spec.engine.version", set: engineField(api.EngineVLLM, func(e *Engine) *string { return &e.Version })},
		{Env: "E2E_VLLM_IMAGE", Field: "engines[vLLM].image", Help: "vLLM roles[].image", set: engineField(api.EngineVLLM, func(e *Engine) *string { return &e.Image })},
		{Env: "E2E_SGLANG_VERSION", Field: "engines[SGLang].version", Help: "SGLang spec.engine.version", set: engineField(api.EngineSGLang, func(e *Engine) *string { return &e.Version })},
		{Env: "E2E_SGLANG_IMAGE", Field: "engines[SGLang].image", Help: "SGLang roles[].image", set: engineField(api.EngineSGLang, func(e *Engine) *string { return &e.Image })},
		{Env: EnvArtifacts, Field: "artifacts", Help: "artifacts directory", set: str(func(c *Config) *string { return &c.Artifacts })},
		{Env: "E2E_COLLECT_ARTIFACTS", Field: "collectArtifacts", Help: "onFailure, always or never", set: str(func(c *Config) *string { return &c.CollectArtifacts })},
		{Env: "SKIP_RESOURCE_CLEANUP", Field: "skipCleanup", Help: "true keeps what specs created", set: boolField(func(c *Config) *bool { return &c.SkipCleanup })},
		{Env: "E2E_KUBECONFIG", Field: "kube.kubeconfig", Help: "kubeconfig file", set: str(func(c *Config) *string { return &c.Kube.Kubeconfig })},
		{Env: "E2E_KUBE_CONTEXT", Field: "kube.context", Help: "kubeconfig context", set: str(func(c *Config) *string { return &c.Kube.Context })},
		{Env: "E2E_NAMESPACE_PREFIX", Field: "kube.namespacePrefix", Help: "per-spec namespace prefix", set: str(func(c *Config) *string { return &c.Kube.NamespacePrefix })},
		{Env: "E2E_KIND_CLUSTER", Field: "kind.clusterName", Help: "kind cluster name", set: str(func(c *Config) *string { return &c.Kind.ClusterName })},
		{Env: "E2E_KIND_CONFIG", Field: "kind.config", Help: "kind cluster config file", set: str(func(c *Config) *string { return &c.Kind.Config })},
		{Env: "E2E_KIND_NODE_IMAGE", Field: "kind.nodeImage", Help: "kindest/node image", set: str(func(c *Config) *string { return &c.Kind.NodeImage })},
		{Env: "E2E_OPERATOR_CHART", Field: "kind.operatorChart", Help: "gpustack-operator chart", set: str(func(c *Config) *string { return &c.Kind.OperatorChart })},
		{Env: "E2E_SIM_LLMD", Field: "sim.llmd", Help: "emulated or upstream: the llm-d-router pairs' EPP", set: str(func(c *Config) *string { return &c.Sim.LLMD })},
		{Env: EnvRoutersDir, Field: "sim.routersDir", Help: "another make routers build to run vllm-router and sglang-gateway from on the sim; empty: .routers", set: str(func(c *Config) *string { return &c.Sim.RoutersDir })},
		{Env: EnvLLMDDir, Field: "sim.llmdDir", Help: "another make upstream-llmd build for sim.llmd: upstream; empty: .upstream-llmd", set: str(func(c *Config) *string { return &c.Sim.LLMDDir })},
		{Env: "E2E_KEEP_CLUSTER", Field: "kind.keepCluster", Help: "true keeps the kind cluster", set: boolField(func(c *Config) *bool { return &c.Kind.KeepCluster })},
		{Env: EnvConfig, Use: UseEnvOnly, Help: "another config file than e2e.yaml (wins over the suite's -e2e.config flag)"},
		{Env: EnvIsolate, Use: UseEnvOnly, Help: "1: a deployment per case instead of one per pair and shape (read when the spec tree is built, before the file)"},
		{Env: EnvTestOnlyReplaceEngines, Use: UseTestOnly, Help: "1: the sim's router edits replace engine Pods (cmd/e2e's edit-guard test)",
			set: boolField(func(c *Config) *bool { return &c.Sim.TestOnlyReplaceEnginesOnRouterEdit })},
		{Env: EnvReliability, Use: UseTestOnly, Help: "1: cmd/e2e's tests that run make e2e on the sim run (make reliability)"},
		{Env: EnvProgressFIFO, Use: UseInternal, Help: "the FIFO the suite's processes send make e2e their traffic progress through"},
		{Env: EnvDriverOverhead, Use: UseInternal, Help: "the file holding the traffic driver's overhead make e2e measured, for the report"},
	}
}

// Isolated reads E2E_ISOLATE from env (unset or empty: false). The suite
// reads it when it builds its spec tree, before it loads the config, so it
// is no field of the file.
func Isolated(env LookupEnv) (bool, error) {
	v, ok := env(EnvIsolate)
	if !ok || v == "" {
		return false, nil
	}
	b, err := parseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %w", EnvIsolate, err)
	}
	return b, nil
}

// OverridesTable is the README's table of Overrides, in Markdown.
func OverridesTable() string {
	var b strings.Builder
	b.WriteString("| variable | sets | for |\n| --- | --- | --- |\n")
	for _, o := range Overrides() {
		sets := "`" + o.Field + "`"
		if o.Field == "" {
			sets = "(" + string(o.use()) + ")"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", o.Env, sets, o.Help)
	}
	return b.String()
}

// use is o's Use, UseSetting when unset.
func (o Override) use() Use {
	if o.Use == "" {
		return UseSetting
	}
	return o.Use
}

// Internal reports whether o passes a value from make e2e's runner to the
// suite rather than setting anything a user chooses.
func (o Override) Internal() bool { return o.use() == UseInternal }

func engineField(engine string, f func(*Engine) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		for i := range c.Engines {
			if c.Engines[i].Name == engine {
				*f(&c.Engines[i]) = v
				return nil
			}
		}
		return fmt.Errorf("engines has no %s entry to override; add one to the config file", engine)
	}
}

func boolField(f func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := parseBool(v)
		*f(c) = b
		return err
	}
}

// parseBool reads an environment variable's boolean (1, true, 0, false).
func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("expected true or false, got %q", v)
	}
	return b, nil
}

// applyEnv sets every override present in env (an empty value counts as unset).
func (c *Config) applyEnv(env LookupEnv) error {
	var p problems
	for _, o := range Overrides() {
		v, ok := env(o.Env)
		if !ok || v == "" || o.set == nil {
			continue
		}
		if err := o.set(c, v); err != nil {
			p.list = append(p.list, strings.TrimSpace(fmt.Sprintf("%s: %s", o.Env, o.Field))+" "+err.Error())
			continue
		}
		c.markEnv(o)
	}
	return p.err(c)
}

// markEnv attributes the overridden field (by its real path) to the env var.
func (c *Config) markEnv(o Override) {
	field := o.Field
	if field == "" {
		return
	}
	if name, rest, ok := strings.Cut(strings.TrimPrefix(field, "engines["), "]"); ok && strings.HasPrefix(field, "engines[") {
		for i, e := range c.Engines {
			if e.Name == name {
				field = fmt.Sprintf("engines[%d]%s", i, rest)
			}
		}
	}
	c.fromEnv[field] = o.Env
}
