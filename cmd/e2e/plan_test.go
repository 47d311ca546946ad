package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/suiterun"
)

func planOptions(t *testing.T, out *bytes.Buffer, target, filter string, nodes int) suiterun.Options {
	t.Helper()
	t.Setenv("E2E_ISOLATE", "")
	t.Setenv("E2E_TARGET", target)
	return suiterun.Options{Out: out, Target: target, Config: filepath.Join("..", "..", "e2e.yaml"), LabelFilter: filter, Nodes: nodes}
}

// make plan on the sim: the deployments in order and the totals of the
// default selection, nothing created, exit 0.
func TestPlanPrintsTheDeploymentsAndTheirCost(t *testing.T) {
	var out bytes.Buffer
	if rc := plan(context.Background(), planOptions(t, &out, "sim", "", 2), nil); rc != 0 {
		t.Fatalf("plan = %d:\n%s", rc, out.String())
	}
	for _, want := range []string{
		"Plan of a run on target sim", "Nothing is created.",
		"vllm-router+vLLM       shared-vllm-router-vllm", "pd2x2-vllm-router-vllm", "2 prefill + 2 decode",
		"8 ModelDeployments, 24 engine Pods, 49 edits of spec.router.extraArgs",
		"Peak accelerators: 4 per Ginkgo process (the largest deployment), 8 in all with GINKGO_NODES=2.",
		"Projected cost: ", "GPU-minutes (72 while engine Pods load,",
		"Cost model (e2e.yaml costModel", "engine start-up 3m0s per engine Pod",
		"Target sim: it holds no accelerators",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, out.String())
		}
	}
}

// On kube the peak is checked against the chosen InstanceType's free
// accelerators: one line says what it needs and what is free.
func TestPlanChecksThePeakAgainstTheFreeAccelerators(t *testing.T) {
	free := func(n int64) func(context.Context, *config.Config) (int64, string, error) {
		return func(context.Context, *config.Config) (int64, string, error) {
			return n, "InstanceType h20 (NVIDIA H20)", nil
		}
	}
	var out bytes.Buffer
	if rc := plan(context.Background(), planOptions(t, &out, "kube", "claim:documented", 2), free(2)); rc != 1 {
		t.Errorf("plan = %d, want 1 (does not fit)", rc)
	}
	if want := "Does not fit: needs 4 accelerators at peak with GINKGO_NODES=2; 2 free on InstanceType h20 (NVIDIA H20)."; !strings.Contains(out.String(), want) {
		t.Errorf("plan output lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	if rc := plan(context.Background(), planOptions(t, &out, "kube", "claim:documented", 1), free(2)); rc != 0 ||
		!strings.Contains(out.String(), "Fits: needs 2 accelerators at peak with GINKGO_NODES=1; 2 free on InstanceType h20") {
		t.Errorf("plan = %d:\n%s", rc, out.String())
	}
	out.Reset()
	unreachable := func(context.Context, *config.Config) (int64, string, error) {
		return 0, "", errors.New("no kubeconfig")
	}
	if rc := plan(context.Background(), planOptions(t, &out, "kube", "", 1), unreachable); rc != 1 ||
		!strings.Contains(out.String(), "free accelerators not read: no kubeconfig") {
		t.Errorf("plan = %d:\n%s", rc, out.String())
	}
	out.Reset()
	if rc := plan(context.Background(), planOptions(t, &out, "sim", "a &&", 1), nil); rc != 2 || !strings.Contains(out.String(), "is not a valid label filter") {
		t.Errorf("plan = %d:\n%s", rc, out.String())
	}
}
