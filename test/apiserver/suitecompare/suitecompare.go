// Package suitecompare is the tier's comparison of suite runs: it runs the
// routing suite (suites/routing) unchanged as a subprocess, its test binary
// built once from the repository, with the suite's own environment
// overrides (E2E_TARGET, E2E_KUBECONFIG, E2E_CONFIG, E2E_ROUTERS,
// ARTIFACTS), reads back the qualification report it wrote (report.Load),
// and compares two runs (the sim, and kube against the tier's API server)
// row by row. make e2e's way of running the suite (the Ginkgo CLI, the live
// progress line, Ctrl-C) is internal/suiterun's; this package runs the
// binary directly, several runs at once, and compares them.
package suitecompare

import (
	"bytes"
	"context"
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
	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/report"
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
	b, err := os.ReadFile(filepath.Join(repo, config.DefaultFile))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", config.DefaultFile, err)
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
			return "", errors.New("suitecompare: no github.com/gpustack/routing-conformance go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles the suite's test binary into dir (without -race: the
// suite's own packages are race-tested by make test) and returns its path.
func Build(ctx context.Context, repo, dir string) (string, error) {
	bin := filepath.Join(dir, suiterun.SuiteBinary)
	if err := suiterun.BuildSuite(ctx, "go", repo, bin); err != nil {
		return "", err
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
	Report *report.Report
	// Wall is how long the run took.
	Wall time.Duration
}

// Exec runs the suite and reads its report.json.
func (r Run) Exec(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout+time.Minute)
	defer cancel()
	// Only the Ginkgo entry: the package's unit tests read the shipped
	// selection, not this run's E2E_ROUTERS, and make test runs them.
	args := []string{"-test.v", suiterun.SuiteRunFlag, "-test.timeout=" + r.Timeout.String(), "-ginkgo.no-color"}
	if r.LabelFilter != "" {
		args = append(args, "-ginkgo.label-filter="+r.LabelFilter)
	}
	cmd := exec.CommandContext(ctx, r.Binary, args...)
	cmd.Dir = filepath.Join(r.Repo, suiterun.SuitePackage)
	cmd.Env = os.Environ()
	env := map[string]string{config.EnvArtifacts: r.Artifacts}
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
	rep, rerr := report.Load(filepath.Join(r.Artifacts, report.FileJSON))
	if rerr != nil && res.Err == nil {
		res.Err = rerr
	}
	res.Report = rep
	return res
}

// Unsupported is what a skip reason carries when the target cannot inject
// a fault (clusters.ErrFaultUnsupported): the kube target makes no Pod
// answer 5xx or hang without a chaos tool in the cluster.
var Unsupported = clusters.ErrFaultUnsupported.Error()

// Compare lists the rows (claim cells "claim / pair" and specs "spec
// name") whose results differ between a and b, or that only one of them
// has, sorted; a row b skipped because b's target cannot inject the fault
// is listed in unsupported instead of diff. The rows are report.Compare's.
func Compare(a, b *report.Report) (diff, unsupported []string) {
	d := report.Compare(a, b, a.Environment.Target)
	reasons := map[string][]string{}
	for _, c := range b.Claims {
		for _, row := range c.Rows {
			reasons[report.CellName(c.Name, row.Pair)] = row.Reasons
		}
	}
	for _, s := range b.Specs {
		reasons[specRow(s.Name)] = []string{s.Reason}
	}
	changes := slices.Clone(d.Claims)
	for _, c := range d.Specs {
		c.Name = specRow(c.Name)
		changes = append(changes, c)
	}
	ta, tb := a.Environment.Target, b.Environment.Target
	for _, c := range changes {
		if c.After == report.ResultSkip && slices.ContainsFunc(reasons[c.Name], func(r string) bool { return strings.Contains(r, Unsupported) }) {
			unsupported = append(unsupported, fmt.Sprintf("%s: %s in %s, skipped in %s (%s)", c.Name, c.Before, ta, tb, Unsupported))
			continue
		}
		diff = append(diff, fmt.Sprintf("%s: %s in %s, %s in %s", c.Name, c.Before, ta, c.After, tb))
	}
	sort.Strings(diff)
	sort.Strings(unsupported)
	return diff, unsupported
}

// specRow is a spec's row name in Compare's lists.
func specRow(name string) string { return "spec " + name }

// Failures lists the failed specs of r with their reasons.
func Failures(r *report.Report) []string {
	var out []string
	for _, s := range r.Specs {
		if s.Result == report.ResultFail {
			out = append(out, s.Name+": "+firstLine(s.Reason))
		}
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
