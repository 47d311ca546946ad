// Package suiterun runs the routing suite (suites/routing) unchanged as a
// subprocess: its test binary, built once from the repository, with the
// suite's own environment overrides (E2E_TARGET, E2E_KUBECONFIG, E2E_CONFIG,
// E2E_ROUTERS, ARTIFACTS), and reads back the qualification report it
// wrote, so two runs (the sim, and kube against the tier's API server) can
// be compared row by row.
package suiterun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
)

// Intervals are the kube intervals of the tier's suite config: the tier's
// API server and sim node answer in milliseconds where a GPU cluster takes
// minutes, so everything polls every 100 ms.
var Intervals = map[string][2]string{
	"default/wait-ready":        {"2m", "100ms"},
	"default/wait-router-crash": {"1m", "100ms"},
	"default/wait-logs":         {"1m", "100ms"},
	"default/wait-metrics":      {"1m", "100ms"},
	"default/wait-deleted":      {"2m", "100ms"},
	"default/consistently":      {"2s", "100ms"},
	// A crashing router must stay not Ready.
	"badpolicy/consistently": {"3s", "100ms"},
}

// WriteConfig writes the tier's suite config to file: the repository's
// e2e.yaml with its kube intervals replaced by Intervals. Everything else
// (model, engines, routers, traffic, the sim's intervals) stays the
// repository's.
func WriteConfig(repo, file string) error {
	b, err := os.ReadFile(filepath.Join(repo, "e2e.yaml"))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("e2e.yaml: %w", err)
	}
	iv := map[string]any{}
	for k, v := range Intervals {
		iv[k] = []any{v[0], v[1]}
	}
	cfg["intervals"] = iv
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o644)
}

// SimKnobs reads the sim: section of a suite config (WriteConfig's file),
// whose engine knobs the engines behind the tier's API server take too.
func SimKnobs(file string) (config.Sim, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return config.Sim{}, err
	}
	var cfg struct {
		Sim config.Sim `json:"sim"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return config.Sim{}, fmt.Errorf("%s: %w", file, err)
	}
	if cfg.Sim.EngineITL == 0 || cfg.Sim.EngineOutputTokens == 0 {
		return config.Sim{}, fmt.Errorf("%s: sim.engineITL and sim.engineOutputTokens must be set", file)
	}
	return cfg.Sim, nil
}

// SuitePackage is the suite this package runs, relative to the repository.
const SuitePackage = "./suites/routing"

// Repo finds the repository root (the main module's go.mod) above dir.
func Repo(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/gpustack/routing-conformance\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("suiterun: no github.com/gpustack/routing-conformance go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles the suite's test binary into dir (without -race: the
// suite's own packages are race-tested by make test) and returns its path.
func Build(ctx context.Context, repo, dir string) (string, error) {
	bin := filepath.Join(dir, "routing.test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, SuitePackage)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", SuitePackage, err, out)
	}
	return bin, nil
}

// Run is one suite run.
type Run struct {
	// Binary is Build's result; Repo the repository (the run's working
	// directory is the suite's package, as under go test).
	Binary, Repo string
	// Env is added to the environment: the suite's overrides.
	Env map[string]string
	// Artifacts is the run's ARTIFACTS directory.
	Artifacts string
	// Timeout bounds the run (the binary's -test.timeout, and a kill after
	// a minute more).
	Timeout time.Duration
	// LabelFilter selects the specs (Ginkgo's --label-filter); empty: all.
	LabelFilter string
}

// Result is what a run left.
type Result struct {
	// Output is the run's stdout and stderr.
	Output string
	// Err is the exit error (nil: the suite passed).
	Err    error
	Report *Report
	// Wall is how long the run took.
	Wall time.Duration
}

// Exec runs the suite and reads its report.json.
func (r Run) Exec(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout+time.Minute)
	defer cancel()
	// Only the Ginkgo entry: the package's unit tests read the shipped
	// selection, not this run's E2E_ROUTERS, and make test runs them.
	args := []string{"-test.v", "-test.run=^TestRouting$", "-test.timeout=" + r.Timeout.String(), "-ginkgo.no-color"}
	if r.LabelFilter != "" {
		args = append(args, "-ginkgo.label-filter="+r.LabelFilter)
	}
	cmd := exec.CommandContext(ctx, r.Binary, args...)
	cmd.Dir = filepath.Join(r.Repo, SuitePackage)
	cmd.Env = os.Environ()
	env := map[string]string{"ARTIFACTS": r.Artifacts}
	for k, v := range r.Env {
		env[k] = v
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := Result{Output: out.String(), Err: err, Wall: time.Since(start)}
	rep, rerr := ReadReport(filepath.Join(r.Artifacts, "report.json"))
	if rerr != nil && res.Err == nil {
		res.Err = rerr
	}
	res.Report = rep
	return res
}

// Report is the part of report.json the tier compares.
type Report struct {
	Result      string `json:"result"`
	Environment struct {
		Target string   `json:"target"`
		Notes  []string `json:"notes"`
	} `json:"environment"`
	Statistics struct {
		Total, Passed, Failed, Skipped int
	} `json:"statistics"`
	Claims []struct {
		Name string `json:"name"`
		Rows []struct {
			Pair    string   `json:"pair"`
			Result  string   `json:"result"`
			Reasons []string `json:"reasons"`
		} `json:"rows"`
	} `json:"claims"`
	Specs []struct {
		Name   string `json:"name"`
		Result string `json:"result"`
		Reason string `json:"reason"`
	} `json:"specs"`
}

// ReadReport reads a report.json.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := new(Report)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// row is one result of a report: a claim row or a spec.
type row struct {
	result  string
	reasons []string
}

// rows is every claim row as "claim pair" and every spec as "spec <name>".
func (r *Report) rows() map[string]row {
	out := map[string]row{}
	for _, c := range r.Claims {
		for _, x := range c.Rows {
			out[c.Name+" "+x.Pair] = row{x.Result, x.Reasons}
		}
	}
	for _, s := range r.Specs {
		out["spec "+s.Name] = row{s.Result, []string{s.Reason}}
	}
	return out
}

// Unsupported is what a skip reason carries when the target cannot inject
// a fault (clusters.ErrFaultUnsupported): the kube target makes no Pod
// answer 5xx or hang without a chaos tool in the cluster.
var Unsupported = clusters.ErrFaultUnsupported.Error()

// Compare lists the rows whose results differ between a and b, or that
// only one of them has, sorted; a row b skipped because b's target cannot
// inject the fault is listed in unsupported instead of diff.
func Compare(a, b *Report) (diff, unsupported []string) {
	ra, rb := a.rows(), b.rows()
	for k, v := range ra {
		w, ok := rb[k]
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("%s: %s in %s, absent in %s", k, v.result, a.Environment.Target, b.Environment.Target))
		case v.result == w.result:
		case isSkip(w.result) && slices.ContainsFunc(w.reasons, func(r string) bool { return strings.Contains(r, Unsupported) }):
			unsupported = append(unsupported, fmt.Sprintf("%s: %s in %s, skipped in %s (%s)", k, v.result, a.Environment.Target, b.Environment.Target, Unsupported))
		default:
			diff = append(diff, fmt.Sprintf("%s: %s in %s, %s in %s", k, v.result, a.Environment.Target, w.result, b.Environment.Target))
		}
	}
	for k, w := range rb {
		if _, ok := ra[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: absent in %s, %s in %s", k, a.Environment.Target, w.result, b.Environment.Target))
		}
	}
	sort.Strings(diff)
	sort.Strings(unsupported)
	return diff, unsupported
}

func isSkip(result string) bool {
	return strings.EqualFold(result, "SKIP") || strings.EqualFold(result, "skipped")
}

// Failures lists the failed specs with their reasons.
func (r *Report) Failures() []string {
	var out []string
	for _, s := range r.Specs {
		if strings.EqualFold(s.Result, "FAIL") || strings.EqualFold(s.Result, "failed") {
			out = append(out, s.Name+": "+firstLine(s.Reason))
		}
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
