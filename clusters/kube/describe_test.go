package kube

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpustack/routing-conformance/api"
)

func operatorDeployment(image string, env ...corev1.EnvVar) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gpustack-operator", Namespace: DefaultOperatorNamespace},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "manager", Image: image, Env: env}}}}},
	}
}

func gpuNode(name, product string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelGPUProduct: product}}}
}

func routerImageSetting(value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gpustack.ai/v1", "kind": "Setting",
		"metadata": map[string]any{"name": SettingRouterImage, "namespace": DefaultOperatorNamespace},
		"status":   map[string]any{"value": value, "editable": true, "sensitive": false},
	}}
}

func TestDescribeReportsVersionsGPUAndCapacity(t *testing.T) {
	e := newFakeEnv(t,
		operatorDeployment("ghcr.io/gpustack/gpustack-operator:v0.9.0"),
		gpuNode("n1", "NVIDIA-H20"), gpuNode("n2", "NVIDIA-H20"), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}},
		routerImageSetting("registry.local/gpustack/llm-router:v0.2.0"),
		instanceTypeObj(h20, PhaseActive, true, "6", "q"),
		instanceTypeObj("cpu-only", PhaseActive, false, "0", "q2"))
	e.cluster.opts.EngineImages = nil
	env, err := e.cluster.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if env.Target != "kube" || env.KubernetesVersion != "v1.35.2" || env.OperatorVersion != "v0.9.0" {
		t.Errorf("versions %+v", env)
	}
	if env.RouterImage != "registry.local/gpustack/llm-router:v0.2.0" {
		t.Errorf("router image %q", env.RouterImage)
	}
	if env.GPUProduct != "NVIDIA-H20" {
		t.Errorf("GPU product %q", env.GPUProduct)
	}
	if len(env.Accelerators) != 1 || env.Accelerators[h20] != 6 {
		t.Errorf("accelerators %v", env.Accelerators)
	}
	for _, tc := range []struct {
		router, engine string
		ok             bool
	}{
		{api.RouterVLLM, api.EngineVLLM, true}, {api.RouterSGLang, api.EngineSGLang, true},
		{api.RouterLLMD, api.EngineVLLM, true}, {api.RouterLLMD, api.EngineSGLang, true},
		{api.RouterVLLM, api.EngineSGLang, false}, {api.RouterSGLang, api.EngineVLLM, false},
	} {
		ok, reason := env.Supports(tc.router, tc.engine)
		if ok != tc.ok {
			t.Errorf("Supports(%s, %s) = %v %q", tc.router, tc.engine, ok, reason)
		}
		if !ok && !strings.Contains(reason, "does not front engine") {
			t.Errorf("reason %q", reason)
		}
	}
}

func TestDescribeFallsBackToOperatorEnvThenDefaultRouterImage(t *testing.T) {
	e := newFakeEnv(t, operatorDeployment("gpustack/gpustack-operator:v0.9.1",
		corev1.EnvVar{Name: EnvRouterImage, Value: "mirror/llm-router:v0.1.0"}))
	env, err := e.cluster.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if env.RouterImage != "mirror/llm-router:v0.1.0" || env.OperatorVersion != "v0.9.1" {
		t.Errorf("%+v", env)
	}
	e2 := newFakeEnv(t)
	env, _ = e2.cluster.Describe(context.Background())
	if env.RouterImage != DefaultRouterImage || env.OperatorVersion != "" {
		t.Errorf("%+v", env)
	}
	joined := strings.Join(env.Notes, " | ")
	if !strings.Contains(joined, "operator version unknown") {
		t.Errorf("notes %q", joined)
	}
	// No accelerators: every pair is unsupported, with the reason.
	if ok, reason := env.Supports(api.RouterVLLM, api.EngineVLLM); ok || !strings.Contains(reason, "free accelerator") {
		t.Errorf("CPU-only cluster: %v %q", ok, reason)
	}
}

func TestImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"gpustack/gpustack-operator:v0.9.0":           "v0.9.0",
		"registry:5000/gpustack/gpustack-operator:v1": "v1",
		"registry:5000/gpustack/gpustack-operator":    "",
		"gpustack/llm-router:v0.2.0@sha256:98e70d94":  "v0.2.0",
		"gpustack/llm-router@sha256:98e70d94":         "sha256:98e70d94",
	} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}
