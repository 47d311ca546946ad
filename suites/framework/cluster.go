package framework

// Building the configured target for a run: the sim, a cluster, or a
// throwaway kind cluster.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/kind"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/config"
)

// newCluster builds the configured target for this process.
func newCluster(ctx context.Context, cfg *config.Config, s shared) (clusters.Cluster, error) {
	switch cfg.Target {
	case config.TargetSim:
		versions := map[string]string{}
		for _, e := range cfg.Engines {
			versions[e.Name] = e.Version
		}
		opts := sim.Options{
			Engine: sim.EngineKnobs{
				TTFT:         cfg.Sim.EngineTTFT.D(),
				ITL:          cfg.Sim.EngineITL.D(),
				OutputTokens: cfg.Sim.EngineOutputTokens,
			},
			EngineVersions: versions,
			// The llm-d EPPs' tie-break follows the run's seed (--seed).
			PickerSeed: uint64(GinkgoRandomSeed()),
			// A test of the edit guard (cmd/e2e) runs the suite against an
			// operator whose router edits replace engine Pods.
			TestOnlyReplaceEnginesOnRouterEdit: cfg.Sim.TestOnlyReplaceEnginesOnRouterEdit,
		}
		// vllm-router and sglang-gateway run as their built binaries (make
		// routers, or the build sim.routersDir names); a run that qualifies
		// neither needs no build. sim.llmd: upstream runs llm-d-router's own
		// EPP (make upstream-llmd, or the build sim.llmdDir names) as the
		// llm-d-router pairs' epp container.
		builds := sim.Builds{
			Routers:    slices.ContainsFunc(cfg.Routers, func(r config.Router) bool { return sim.RunsBuiltRouter(r.Name) }),
			RoutersDir: cfg.Sim.RoutersDir,
			LLMD: cfg.Sim.LLMD == config.SimLLMDUpstream &&
				slices.ContainsFunc(cfg.Routers, func(r config.Router) bool { return r.Name == api.RouterLLMD }),
			LLMDDir: cfg.Sim.LLMDDir,
		}
		c, err := sim.Open(opts, builds)
		if err != nil {
			return nil, fmt.Errorf("%s (sim.routersDir or %s, sim.llmdDir or %s name other builds): %w",
				cfg.File(), config.EnvRoutersDir, config.EnvLLMDDir, err)
		}
		return c, nil
	case config.TargetKube, config.TargetKind:
		return kube.Connect(ctx, kubeOptions(cfg, s))
	}
	return nil, fmt.Errorf("%s: target %q is not one of %v", cfg.File(), cfg.Target, config.Targets)
}

// kubeOptions are the kube target's options for this run. On kind they
// point at the throwaway cluster (s.Kubeconfig, empty until process 1 has
// created it) instead of the configured kubeconfig and context.
func kubeOptions(cfg *config.Config, s shared) kube.Options {
	images := map[string]string{}
	for _, e := range cfg.Engines {
		if e.Image != "" {
			images[e.Name] = e.Image
		}
	}
	opts := kube.Options{
		Kubeconfig:        cfg.Kube.Kubeconfig,
		Context:           cfg.Kube.Context,
		RunID:             s.RunID,
		NamespacePrefix:   cfg.Kube.NamespacePrefix,
		NamespaceSuffix:   fmt.Sprintf("p%d", GinkgoParallelProcess()),
		OperatorNamespace: cfg.Kube.OperatorNamespace,
		InstanceType:      cfg.InstanceType,
		EngineImages:      images,
		Intervals:         kubeIntervals(cfg),
		Logf:              GinkgoWriter.Printf,
	}
	if cfg.Target == config.TargetKind {
		opts.Kubeconfig, opts.Context, opts.Target = s.Kubeconfig, "", config.TargetKind
	}
	return opts
}

// kubeIntervals are the kube target's own waits from the config: its polls
// (a deletion, a router rollout) at default/wait-deleted's poll and the
// deletion bounded by its timeout; the rest keep kube.DefaultIntervals.
// Without them every delete of a run polled at the target's 5 s default.
func kubeIntervals(cfg *config.Config) kube.Intervals {
	deleted, err := cfg.Interval(config.SpecDefault, config.OpWaitDeleted)
	if err != nil {
		return kube.Intervals{}
	}
	return kube.Intervals{Poll: deleted.Poll.D(), Delete: deleted.Timeout.D()}
}

// createKindCluster creates the throwaway cluster on process 1 (kind, then
// the operator chart with helm, then the kube preflight) and returns its
// kubeconfig path. The cluster is deleted after every process is done,
// unless kind.keepCluster (E2E_KEEP_CLUSTER) keeps it.
func createKindCluster(ctx context.Context, cfg *config.Config, s shared) string {
	GinkgoHelper()
	c, err := kind.Create(ctx, kind.Options{
		Name:       cfg.Kind.ClusterName,
		Config:     cfg.Kind.Config,
		NodeImage:  cfg.Kind.NodeImage,
		Chart:      cfg.Kind.OperatorChart,
		Keep:       cfg.Kind.KeepCluster,
		KeepReason: "kind.keepCluster is set in " + cfg.Origin("kind.keepCluster"),
		Kube:       kubeOptions(cfg, s),
		Logf:       GinkgoWriter.Printf,
	})
	if err != nil {
		Fail(fmt.Sprintf("creating the kind cluster: %v", err))
	}
	deleted := IntervalOf(cfg, config.SpecDefault, config.OpWaitDeleted)
	DeferCleanup(func(ctx SpecContext) error { return c.Close(ctx) }, NodeTimeout(deleted.Timeout.D()))
	return c.Kubeconfig()
}

// deleteRunNamespaces removes every namespace labelled with this run's id.
func deleteRunNamespaces(ctx context.Context, cfg *config.Config, s shared) error {
	c, err := kube.New(kubeOptions(cfg, s))
	if err != nil {
		// Without a connection no spec could have created anything.
		GinkgoWriter.Printf("no run namespaces to delete: %v\n", err)
		return nil
	}
	return c.DeleteRunNamespaces(ctx)
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FreeAccelerators reads, without creating anything, the InstanceType a
// kube or kind run of cfg would use (e2e.yaml's, else the Active
// accelerated one with the most free) and its free accelerators: what
// make plan checks the projected peak against.
func FreeAccelerators(ctx context.Context, cfg *config.Config) (kube.InstanceType, error) {
	c, err := kube.New(kubeOptions(cfg, shared{}))
	if err != nil {
		return kube.InstanceType{}, err
	}
	return c.Capacity(ctx, 0)
}
