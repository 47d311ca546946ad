package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
)

func noEnv(string) (string, bool) { return "", false }

func envMap(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// testSpecs stand in for the suite's claim names, which the suite passes.
var testSpecs = []string{"defaults", "affinity", "roundrobin", "badpolicy", "admission", "metrics",
	"concurrency", "routingtext", "thresholds", "badthreshold", "random", "poweroftwo", "consistenthash", "rendezvoushash", "manual", "prefixhash"}

func parse(t *testing.T, yaml string, env LookupEnv) (*Config, error) {
	t.Helper()
	return Parse("e2e.yaml", []byte(yaml), "/cfg", env, testSpecs...)
}

// mustFail parses yaml and checks the error holds every wanted substring.
func mustFail(t *testing.T, yaml string, env LookupEnv, want ...string) {
	t.Helper()
	_, err := parse(t, yaml, env)
	if err == nil {
		t.Fatalf("parse succeeded; want an error containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

// repoSpecs are the claim names the repository's e2e.yaml keys its
// intervals and its cost model's traffic by: that they are the suite's
// claims is the suite's registry test to check (config cannot import the
// suite).
func repoSpecs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "e2e.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(testSpecs)
	keys := regexp.MustCompile(`(?m)^\s+([a-z][a-z0-9-]*)/[a-z-]+:`).FindAllStringSubmatch(string(b), -1)
	if _, traffic, ok := strings.Cut(string(b), "\n  traffic:\n"); ok {
		keys = append(keys, regexp.MustCompile(`(?m)^    ([a-z][a-z0-9-]*): `).FindAllStringSubmatch(traffic, -1)...)
	}
	for _, m := range keys {
		if m[1] != SpecDefault && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func TestRepositoryConfigLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "e2e.yaml"), repoSpecs(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if c.Target != TargetSim && os.Getenv("E2E_TARGET") == "" {
		t.Errorf("target = %q, want sim", c.Target)
	}
	if c.Traffic.Requests != 120 && os.Getenv("E2E_REQUESTS") == "" {
		t.Errorf("traffic.requests = %d, want 120", c.Traffic.Requests)
	}
	if c.Traffic.PrefixChars != 500 {
		t.Errorf("traffic.prefixChars = %d, want 500", c.Traffic.PrefixChars)
	}
	iv, err := c.Interval("badpolicy", OpConsistently)
	if err != nil {
		t.Fatal(err)
	}
	if c.Target == TargetSim && iv.Timeout.D() != time.Second {
		t.Errorf("sim badpolicy/consistently = %s, want the sim default [1s, 50ms]", iv)
	}
	if !filepath.IsAbs(c.Artifacts) && os.Getenv("ARTIFACTS") == "" {
		t.Errorf("artifacts %q was not resolved against the file's directory", c.Artifacts)
	}
}

func TestEmptyFileGivesTheDefaults(t *testing.T) {
	c, err := parse(t, "", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Target != TargetSim || c.Replicas != 2 || c.Traffic.Requests != 120 || c.Traffic.PrefixChars != 500 {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.Artifacts != "/cfg/artifacts" {
		t.Errorf("artifacts = %q, want /cfg/artifacts", c.Artifacts)
	}
}

func TestRouterNameOutsideTheEnumNamesAcceptedValues(t *testing.T) {
	mustFail(t, "routers:\n  - name: vllm-router\n  - name: vllm_router\n", noEnv,
		`e2e.yaml: routers[1].name "vllm_router" is not one of llm-d-router, vllm-router, sglang-gateway (line 3)`)
}

func TestEngineNameOutsideTheEnum(t *testing.T) {
	mustFail(t, "engines:\n  - {name: vllm, version: \"0.29.0\"}\n", noEnv,
		`e2e.yaml: engines[0].name "vllm" is not one of vLLM, SGLang (line 2)`)
}

func TestTargetOutsideTheEnum(t *testing.T) {
	mustFail(t, "target: gke\n", noEnv, `e2e.yaml: target "gke" is not one of sim, kube, kind (line 1)`)
}

func TestUnknownKeyIsRefused(t *testing.T) {
	mustFail(t, "replica: 2\n", noEnv, "e2e.yaml: replica is not a known field", "replicas", "(line 1)")
	mustFail(t, "routers:\n  - nme: vllm-router\n", noEnv,
		"e2e.yaml: routers[0].nme is not a known field; known fields here: image, name (line 2)")
	mustFail(t, "kube:\n  kubeConfig: x\n", noEnv, "kube.kubeConfig is not a known field", "kubeconfig")
}

func TestWrongTypeNamesTheExpectedType(t *testing.T) {
	mustFail(t, "replicas: two\n", noEnv, `e2e.yaml: replicas expected an integer, got the string "two" (line 1)`)
	mustFail(t, "replicas: 2.5\n", noEnv, "replicas expected an integer, got the number 2.5")
	mustFail(t, "engines:\n  - {name: vLLM, version: 0.10}\n", noEnv,
		`engines[0].version expected a string, got the number 0.10 (quote it: "0.10")`)
	mustFail(t, "routers: vllm-router\n", noEnv, `routers expected a list, got the string "vllm-router"`)
	mustFail(t, "model: qwen\n", noEnv, `model expected a mapping with keys contextLength, name, got the string "qwen"`)
	mustFail(t, "skipCleanup: yes-please\n", noEnv, "skipCleanup expected true or false")
	mustFail(t, "replicas: 99999999999\n", noEnv, "replicas expected an integer that fits in 32 bits")
}

func TestDurationsAreTyped(t *testing.T) {
	mustFail(t, "traffic:\n  requestTimeout: 30\n", noEnv,
		`traffic.requestTimeout expected a duration such as "30s" or "2m", got the integer 30 (line 2)`)
	mustFail(t, "traffic:\n  requestTimeout: soon\n", noEnv, `traffic.requestTimeout expected a duration such as "30s" or "2m", got "soon"`)
	mustFail(t, "intervals:\n  default/wait-ready: 10m\n", noEnv,
		`intervals.default/wait-ready expected [timeout, poll] such as ["10m", "10s"], got the string "10m"`)
	mustFail(t, "intervals:\n  default/wait-ready: [10m, 1s, 2s]\n", noEnv, "got a list of 3 values")
	mustFail(t, "intervals:\n  default/wait-ready: [10m, often]\n", noEnv, `intervals.default/wait-ready poll: expected a duration`)
}

func TestDuplicateKeyIsRefused(t *testing.T) {
	mustFail(t, "replicas: 2\nreplicas: 3\n", noEnv, "e2e.yaml: replicas is set twice (line 2)")
	mustFail(t, "intervals:\n  default/wait-ready: [1m, 1s]\n  default/wait-ready: [2m, 1s]\n", noEnv,
		"intervals.default/wait-ready is set twice (line 3)")
}

func TestIntervalKeysMustNameAKnownSpecAndOp(t *testing.T) {
	mustFail(t, "intervals:\n  affinty/wait-ready: [1m, 1s]\n", noEnv,
		`intervals.affinty/wait-ready names spec "affinty", which is not one of default, admission`, "(line 2)")
	mustFail(t, "intervals:\n  default/wait-redy: [1m, 1s]\n", noEnv, `names op "wait-redy", which is not one of consistently`)
	mustFail(t, "intervals:\n  wait-ready: [1m, 1s]\n", noEnv, "intervals.wait-ready must be written <spec>/<op>")
	mustFail(t, "sim:\n  intervals:\n    default/wait-ready: [1s, 2s]\n", noEnv,
		"sim.intervals.default/wait-ready polls (2s) less often than it times out (1s)")
	mustFail(t, "intervals:\n  default/wait-ready: [0s, 0s]\n", noEnv, "must have a positive timeout and poll")
}

func TestIntervalFallsBackToDefaultOp(t *testing.T) {
	c, err := parse(t, `target: kube
intervals:
  affinity/wait-ready: [45m, 15s]
sim:
  intervals:
    affinity/wait-ready: [5s, 10ms]
`, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if iv, _ := c.Interval("affinity", OpWaitReady); iv.Timeout.D() != 45*time.Minute || iv.Poll.D() != 15*time.Second {
		t.Errorf("affinity/wait-ready = %s, want [45m, 15s]", iv)
	}
	if iv, _ := c.Interval("roundrobin", OpWaitReady); iv.Timeout.D() != 30*time.Minute {
		t.Errorf("roundrobin/wait-ready = %s, want default/wait-ready [30m, 10s]", iv)
	}
	c.Target = TargetSim
	if iv, _ := c.Interval("affinity", OpWaitReady); iv.Timeout.D() != 5*time.Second {
		t.Errorf("sim affinity/wait-ready = %s, want sim.intervals [5s, 10ms]", iv)
	}
	if iv, _ := c.Interval("roundrobin", OpWaitReady); iv.Timeout.D() != 30*time.Second {
		t.Errorf("sim roundrobin/wait-ready = %s, want sim default [30s, 20ms]", iv)
	}
}

func TestIntervalForAnUnknownKeyIsAnErrorNotOneSecond(t *testing.T) {
	c, err := parse(t, "", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Interval("affinty", OpWaitReady); err == nil || !strings.Contains(err.Error(), `spec "affinty" is not one of`) {
		t.Errorf("unknown spec: err = %v", err)
	}
	if _, err := c.Interval("affinity", "wait-forever"); err == nil || !strings.Contains(err.Error(), `op "wait-forever" is not one of`) {
		t.Errorf("unknown op: err = %v", err)
	}
}

func TestIntervalArgsAreTimeoutThenPoll(t *testing.T) {
	args := Interval{Timeout: Duration(time.Minute), Poll: Duration(time.Second)}.Args()
	if args[0] != time.Minute || args[1] != time.Second {
		t.Errorf("Args() = %v", args)
	}
}

func TestEnvironmentOverridesFields(t *testing.T) {
	c, err := parse(t, "target: sim\nreplicas: 2\n", envMap(map[string]string{
		"E2E_TARGET": "kube", "E2E_REPLICAS": "3", "E2E_REQUESTS": "60", "ARTIFACTS": "/tmp/a",
		"E2E_ROUTERS": "sglang-gateway, llm-d-router", "E2E_VLLM_IMAGE": "img:1", "SKIP_RESOURCE_CLEANUP": "true",
		"E2E_TARGET_UNRELATED": "x",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Target != TargetKube || c.Replicas != 3 || c.Traffic.Requests != 60 || c.Artifacts != "/tmp/a" || !c.SkipCleanup {
		t.Errorf("overrides not applied: target=%s replicas=%d requests=%d artifacts=%s skip=%v",
			c.Target, c.Replicas, c.Traffic.Requests, c.Artifacts, c.SkipCleanup)
	}
	if len(c.Routers) != 2 || c.Routers[0].Name != "sglang-gateway" || c.Routers[1].Name != "llm-d-router" {
		t.Errorf("routers = %+v", c.Routers)
	}
	if e, _ := c.Engine("vLLM"); e.Image != "img:1" {
		t.Errorf("vLLM image = %q", e.Image)
	}
}

func TestBadEnvironmentValueNamesTheVariable(t *testing.T) {
	mustFail(t, "", envMap(map[string]string{"E2E_TARGET": "gke"}), `E2E_TARGET: target "gke" is not one of sim, kube, kind`)
	mustFail(t, "", envMap(map[string]string{"E2E_REPLICAS": "two"}), `E2E_REPLICAS: replicas expected an integer, got "two"`)
	mustFail(t, "", envMap(map[string]string{"E2E_ROUTERS": "vllm-router,nginx"}),
		`E2E_ROUTERS: routers[1].name "nginx" is not one of`)
	mustFail(t, "engines:\n  - {name: SGLang, version: \"0.5.18\"}\n", envMap(map[string]string{"E2E_VLLM_VERSION": "1"}),
		"E2E_VLLM_VERSION: engines[vLLM].version engines has no vLLM entry to override")
}

func TestEmptyEnvironmentValueCountsAsUnset(t *testing.T) {
	if _, err := parse(t, "", envMap(map[string]string{"E2E_TARGET": ""})); err != nil {
		t.Fatal(err)
	}
}

func TestPathPrefersE2E_CONFIG(t *testing.T) {
	if got := Path("e2e.yaml", envMap(map[string]string{EnvConfig: "/ci/gpu.yaml"})); got != "/ci/gpu.yaml" {
		t.Errorf("Path = %q", got)
	}
	if got := Path("e2e.yaml", noEnv); got != "e2e.yaml" {
		t.Errorf("Path = %q", got)
	}
}

func TestRelativePathsResolveAgainstTheFile(t *testing.T) {
	c, err := parse(t, "target: kind\nkind:\n  operatorChart: charts/op.tgz\n  config: kind.yaml\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind.OperatorChart != "/cfg/charts/op.tgz" || c.Kind.Config != "/cfg/kind.yaml" {
		t.Errorf("kind paths = %q, %q", c.Kind.OperatorChart, c.Kind.Config)
	}
}

func TestKindNeedsAnOperatorChart(t *testing.T) {
	mustFail(t, "target: kind\n", noEnv, "kind.operatorChart must name the gpustack-operator chart when target is kind")
}

func TestValidationReportsEveryProblemAtOnce(t *testing.T) {
	_, err := parse(t, "replicas: 1\ntraffic:\n  prefixChars: 0\n  concurrency: [0]\n", noEnv)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if len(e.Problems) != 3 {
		t.Errorf("problems = %q, want 3", e.Problems)
	}
}

func TestNotOneYAMLMappingIsRefused(t *testing.T) {
	mustFail(t, "a: 1\n---\nb: 2\n", noEnv, "e2e.yaml: holds more than one YAML document")
	mustFail(t, "- a\n", noEnv, "e2e.yaml: expected a mapping at the top level, got a list of 1 values")
	mustFail(t, "a: [\n", noEnv, "e2e.yaml: not valid YAML")
	mustFail(t, "base: &b {name: vllm-router}\n", noEnv, "base is not a known field")
	mustFail(t, "kube:\n  <<: {context: x}\n", noEnv, "kube.<< is a YAML merge key")
}

func TestAnchorsAndAliasesAreFollowed(t *testing.T) {
	c, err := parse(t, "intervals:\n  default/wait-ready: &w [1m, 1s]\n  affinity/wait-ready: *w\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Intervals["affinity/wait-ready"].Timeout.D() != time.Minute {
		t.Errorf("alias not followed: %v", c.Intervals)
	}
}

func TestPairsFollowTheOperatorCompatibilityTable(t *testing.T) {
	c, err := parse(t, "", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Pairs(); !slices.Equal(got, api.Pairs()) {
		t.Errorf("default pairs = %v, want every admitted pair %v", got, api.Pairs())
	}
	c, err = parse(t, "routers: [{name: llm-d-router}, {name: vllm-router}]\nengines: [{name: vLLM, version: \"1\"}]\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Pair{{Router: api.RouterVLLM, Engine: api.EngineVLLM}, {Router: api.RouterLLMD, Engine: api.EngineVLLM}}
	if got := c.Pairs(); !slices.Equal(got, want) {
		t.Errorf("pairs = %v, want %v in api.Matrix order", got, want)
	}
}

func TestIntervalSpecNamesAreTheOnesPassedIn(t *testing.T) {
	yaml := []byte("intervals:\n  affinity/wait-ready: [1m, 1s]\n")
	_, err := Parse("e2e.yaml", yaml, "/cfg", noEnv)
	if err == nil || !strings.Contains(err.Error(), `intervals.affinity/wait-ready names spec "affinity", which is not one of default (line 2)`) {
		t.Errorf("no names passed: err = %v", err)
	}
	c, err := Parse("e2e.yaml", yaml, "/cfg", noEnv, "roundrobin", "affinity")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Specs(), ", "); got != "default, affinity, roundrobin" {
		t.Errorf("Specs() = %s", got)
	}
	if _, err := c.Interval("metrics", OpWaitReady); err == nil || !strings.Contains(err.Error(), `spec "metrics" is not one of default, affinity, roundrobin`) {
		t.Errorf("Interval(metrics) err = %v", err)
	}
}

func TestConfigRoundTripsThroughJSON(t *testing.T) {
	c, err := parse(t, "", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"default/wait-ready":["30m0s","10s"]`) || !strings.Contains(string(b), `"requestTimeout":"2m0s"`) {
		t.Errorf("json = %s", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Intervals["default/wait-ready"] != c.Intervals["default/wait-ready"] || back.Traffic.RequestTimeout != c.Traffic.RequestTimeout {
		t.Errorf("round trip lost intervals: %+v", back.Intervals)
	}
}

func TestEmptyInstanceTypeIsLeftToTheTarget(t *testing.T) {
	c, err := parse(t, "", noEnv)
	if err != nil || c.InstanceType != SimInstanceType {
		t.Errorf("sim instanceType = %q, %v; want %q", c.InstanceType, err, SimInstanceType)
	}
	c, err = parse(t, "target: kube\n", noEnv)
	if err != nil || c.InstanceType != "" {
		t.Errorf("kube instanceType = %q, %v; want empty (the kube target picks one)", c.InstanceType, err)
	}
}

func TestHomeRelativePathsExpand(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	c, err := parse(t, "kube:\n  kubeconfig: ~/.kube/config\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".kube/config"); c.Kube.Kubeconfig != want {
		t.Errorf("kubeconfig = %q, want %q", c.Kube.Kubeconfig, want)
	}
}

func TestRelativePathsFromTheFileAndFromTheEnvironment(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Skip("no working directory")
	}
	c, err := parse(t, "artifacts: out\nkind:\n  config: kind.yaml\n", envMap(map[string]string{"E2E_KIND_CONFIG": "env/kind.yaml"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Artifacts != "/cfg/out" {
		t.Errorf("artifacts = %q, want /cfg/out (the file's directory)", c.Artifacts)
	}
	if want := filepath.Join(wd, "env/kind.yaml"); c.Kind.Config != want {
		t.Errorf("kind.config = %q, want %q (the working directory)", c.Kind.Config, want)
	}
}

// sim.routers (emulated or upstream) retired with the router emulations:
// a file that still sets it, or sim.upstreamIntervals, is refused naming
// the field, not read as something else.
func TestSimRoutersRetired(t *testing.T) {
	mustFail(t, "sim:\n  routers: emulated\n", noEnv, `sim.routers`)
	mustFail(t, "sim:\n  upstreamIntervals:\n    deleterouter/fault-window: [3s, 20ms]\n", noEnv, `sim.upstreamIntervals`)
}

func TestSimLLMDPicksTheEPP(t *testing.T) {
	c, err := parse(t, "", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sim.LLMD != SimLLMDEmulated {
		t.Errorf("sim.llmd defaults to %q, want %q", c.Sim.LLMD, SimLLMDEmulated)
	}
	c, err = parse(t, "sim:\n  llmd: upstream\n", noEnv)
	if err != nil || c.Sim.LLMD != SimLLMDUpstream {
		t.Fatalf("sim.llmd: upstream from the file: %v %+v", err, c)
	}
	c, err = parse(t, "sim:\n  llmd: upstream\n", envMap(map[string]string{"E2E_SIM_LLMD": "emulated"}))
	if err != nil || c.Sim.LLMD != SimLLMDEmulated {
		t.Fatalf("E2E_SIM_LLMD overrides sim.llmd: %v %+v", err, c)
	}
	mustFail(t, "sim:\n  llmd: real\n", noEnv, `e2e.yaml: sim.llmd "real" is not one of emulated, upstream (line 2)`)
	mustFail(t, "", envMap(map[string]string{"E2E_SIM_LLMD": "built"}), `sim.llmd "built" is not one of emulated, upstream`)
}
