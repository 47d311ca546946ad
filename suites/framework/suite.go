package framework

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/report"
)

var (
	flagConfig    = flag.String("e2e.config", "", "the suite config (default: e2e.yaml at the repository root; $E2E_CONFIG wins)")
	flagArtifacts = flag.String("e2e.artifacts", "", "artifacts directory (default: $ARTIFACTS, then e2e.yaml's artifacts)")
)

// targetReached is set once this process's preflight reached the target;
// the run-namespace cleanup of a run that never did has nothing to delete.
var targetReached atomic.Bool

// shared is what process 1 hands every process after the one-time setup.
type shared struct {
	// RunID labels every namespace of the run (kube, kind).
	RunID string `json:"runID"`
	// Kubeconfig is the kind cluster's kubeconfig path (kind only).
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// Suite defines a whole suite run over the registry: the one-time setup
// (the registry checked against expect.yaml, the config and E2E_ISOLATE
// read, a kind cluster created), a target per process, the spec tree
// (Describe) and the qualification report written at the end. A suite's
// test file calls it once from a package-level var and runs RunSpecs.
func (r *Registry) Suite() bool {
	// suite is set by SynchronizedBeforeSuite on every process; specs read
	// it through their input getters, never at tree construction.
	var suite Target

	SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
		// Process 1: check the registry, the spec inputs, the config and
		// E2E_ISOLATE before any spec runs, then create what is created
		// once per run.
		Expect(r.Check()).To(Succeed(), "the claim registry and %s disagree", "fixtures/expect.yaml")
		Expect(r.CheckInputs()).To(Succeed(), "the spec inputs built with the tree")
		_, err := Isolated()
		Expect(err).NotTo(HaveOccurred())
		cfg := r.mustLoadConfig()
		s := shared{RunID: newRunID()}
		if cfg.Target == config.TargetKind {
			s.Kubeconfig = createKindCluster(ctx, cfg, s)
		}
		if cfg.Target != config.TargetSim && !cfg.SkipCleanup {
			// Runs after every process is done: the safety net for specs that
			// were interrupted before their own cleanup.
			DeferCleanup(func(ctx SpecContext) error {
				if !targetReached.Load() {
					// The preflight said why in one line; nothing was created.
					GinkgoWriter.Println("the target was never reached: no run namespaces to delete")
					return nil
				}
				return deleteRunNamespaces(ctx, cfg, s)
			}, NodeTimeout(IntervalOf(cfg, config.SpecDefault, config.OpWaitDeleted).Timeout.D()))
		}
		b, err := json.Marshal(s)
		Expect(err).NotTo(HaveOccurred())
		return b
	}, func(ctx SpecContext, data []byte) {
		// Every process: connect to the target.
		cfg := r.mustLoadConfig()
		var s shared
		Expect(json.Unmarshal(data, &s)).To(Succeed())
		cluster, err := newCluster(ctx, cfg, s)
		if err != nil {
			Fail(fmt.Sprintf("cannot reach the %s target: %v", cfg.Target, err))
		}
		targetReached.Store(true)
		DeferCleanup(func(ctx SpecContext) error { return cluster.Close(ctx) }, NodeTimeout(IntervalOf(cfg, config.SpecDefault, config.OpWaitDeleted).Timeout.D()))
		env, err := cluster.Describe(ctx)
		if err != nil {
			Fail(fmt.Sprintf("cannot describe the %s target: %v", cfg.Target, err))
		}
		suite = Target{Config: cfg, Cluster: cluster, Env: env, RunID: s.RunID}
		GinkgoWriter.Printf("target %s: %d pairs supported\n", env.Target, countSupported(env))
	})

	ReportAfterSuite("qualification report", func(rep Report) {
		// Runs once, on process 1, over every process's specs.
		dir := artifactsDir(suite.Config)
		env := suite.Env
		if env.Target == "" && suite.Config != nil {
			env.Target = suite.Config.Target
		}
		// E2E_TARGET names the target when the config did not load.
		files, err := report.Write(dir, rep, report.Meta{Environment: env, Config: suite.Config, Target: os.Getenv(config.EnvTarget),
			RepoRoot: filepath.Dir(repositoryConfig()), Projection: r.projection(suite.Config, rep)})
		for _, f := range files {
			fmt.Fprintf(GinkgoWriter, "wrote %s\n", f)
		}
		Expect(err).NotTo(HaveOccurred(), "writing the qualification report")
		fmt.Printf("qualification report: %s\n", filepath.Join(dir, report.FileHTML))
	})

	return r.Describe(func() Target { return suite })
}

// projection is the run's projected cost, as make plan prints it for the
// same config, label filter and processes (nil when the config did not
// load; a plan that cannot be projected says why in the suite's output).
func (r *Registry) projection(cfg *config.Config, rep Report) *report.CostProjection {
	if cfg == nil {
		return nil
	}
	plan, err := r.PlanFor(cfg, rep.SuiteConfig.LabelFilter)
	if err == nil {
		var p report.CostProjection
		if p, err = plan.Project(cfg, rep.SuiteConfig.ParallelTotal); err == nil {
			return &p
		}
	}
	fmt.Fprintf(GinkgoWriter, "no cost projection: %v\n", err)
	return nil
}

// mustLoadConfig reads the config (flag, $E2E_CONFIG, or the repository's
// e2e.yaml) and fails the suite with the config's own message when it is bad.
func (r *Registry) mustLoadConfig() *config.Config {
	path := config.Path(*flagConfig, os.LookupEnv)
	if path == "" {
		path = repositoryConfig()
	}
	cfg, err := config.Load(path, r.Names()...)
	if err != nil {
		Fail("config error: " + err.Error())
	}
	if *flagArtifacts != "" {
		abs, err := filepath.Abs(*flagArtifacts)
		Expect(err).NotTo(HaveOccurred())
		cfg.Artifacts = abs
	}
	return cfg
}

// RepositoryFile finds name (e2e.yaml, README.md) in the working directory
// or above it (go test runs in the package directory).
func RepositoryFile(name string) string {
	dir, err := os.Getwd()
	if err != nil {
		return name
	}
	for {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return name
		}
		dir = parent
	}
}

// repositoryConfig is the repository's e2e.yaml.
func repositoryConfig() string { return RepositoryFile(config.DefaultFile) }

// artifactsDir is where reports go, even when the config failed to load.
func artifactsDir(cfg *config.Config) string {
	switch {
	case cfg != nil:
		return cfg.Artifacts
	case *flagArtifacts != "":
		return *flagArtifacts
	case os.Getenv(config.EnvArtifacts) != "":
		return os.Getenv(config.EnvArtifacts)
	}
	return filepath.Join(filepath.Dir(repositoryConfig()), "artifacts")
}

func countSupported(env clusters.Environment) int {
	n := 0
	for _, p := range env.Pairs {
		if p.Supported {
			n++
		}
	}
	return n
}
