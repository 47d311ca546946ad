package routing

import (
	"path/filepath"
	"testing"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

func repositoryConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "..", "e2e.yaml"), Registry.Names()...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The registry's plan on the sim's selection: one deployment per pair and
// shape, the figures issue 17 asks for (documented <= 8 engine Pods,
// documented + extended <= 20, every claim <= 24).
func TestThePlanOfTheDefaultSelection(t *testing.T) {
	t.Setenv(config.EnvIsolate, "")
	cfg := repositoryConfig(t)
	plan, err := Registry.PlanFor(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	kind := func(ks ...string) framework.Cost {
		return plan.Only(func(u framework.Use) bool {
			for _, k := range ks {
				if u.Claim.Kind == k {
					return true
				}
			}
			return false
		}).Cost(cfg.Replicas)
	}
	for _, tc := range []struct {
		what string
		got  framework.Cost
		want framework.Cost
	}{
		{"documented", kind(fixtures.KindDocumented), framework.Cost{ModelDeployments: 4, EnginePods: 8, RouterEdits: 12}},
		{"documented and extended", kind(fixtures.KindDocumented, fixtures.KindExtended), framework.Cost{ModelDeployments: 8, EnginePods: 20, RouterEdits: 49}},
		// Resilience adds killengine's replacement engine Pod on each
		// server deployment, and nothing else.
		{"every claim", plan.Cost(cfg.Replicas), framework.Cost{ModelDeployments: 8, EnginePods: 24, RouterEdits: 49}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.what, tc.got, tc.want)
		}
	}
	p, err := plan.Project(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The largest deployment is a 2+2 pair; two processes hold the two
	// largest at once.
	if p.PeakAcceleratorsPerProcess != 4 || p.PeakAccelerators != 8 || len(p.Deployments) != 8 || p.GPUMinutesReady <= 0 || p.GPUMinutesLoading != 24*3 {
		t.Errorf("projection %+v", p)
	}
	// E2E_ISOLATE: a deployment per case, as before the edits.
	t.Setenv(config.EnvIsolate, "1")
	iso, err := Registry.PlanFor(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if c := iso.Cost(cfg.Replicas); c.RouterEdits != 0 || c.ModelDeployments < 40 {
		t.Errorf("E2E_ISOLATE: %+v, want a deployment per case and no edit", c)
	}
}

// A label filter cuts the plan as Ginkgo cuts the run: the bad --policy
// values of vllm-router alone are one server deployment, created with the
// router's defaults, each value edited in and back.
func TestThePlanOfALabelFilteredSelection(t *testing.T) {
	t.Setenv(config.EnvIsolate, "")
	cfg := repositoryConfig(t)
	plan, err := Registry.PlanFor(cfg, "feature:badpolicy && router:vllm-router")
	if err != nil {
		t.Fatal(err)
	}
	if c := plan.Cost(cfg.Replicas); c != (framework.Cost{ModelDeployments: 1, EnginePods: 2, RouterEdits: 6}) {
		t.Errorf("cost %+v", c)
	}
	s := plan.Pairs[0].Shared[0]
	if s.Name != "shared-vllm-router-vllm" || len(s.RouterArgs) != 0 || len(s.Uses) != 3 {
		t.Errorf("deployment %s created with %q for %d uses", s.Name, s.RouterArgs, len(s.Uses))
	}
	p, err := plan.Project(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.PeakAccelerators != 2 || p.PeakAcceleratorsPerProcess != 2 {
		t.Errorf("one deployment of 2 engine Pods: peak %d per process, %d in all", p.PeakAcceleratorsPerProcess, p.PeakAccelerators)
	}
	if _, err := Registry.PlanFor(cfg, "feature:badpolicy &&"); err == nil {
		t.Error("a bad label filter is an error")
	}
}
