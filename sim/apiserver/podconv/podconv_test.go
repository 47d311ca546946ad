package podconv

import (
	"reflect"
	"testing"

	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// llm-d's router Pod crosses the API server and back: ConfigMap env keys,
// downward-API fields and the ConfigMap volume as the kubelet resolves them.
func TestRouterPodWithConfigMapRoundTrips(t *testing.T) {
	spec := kubelet.PodSpec{
		Name: "m-router-abc-x", Namespace: "ns", Labels: map[string]string{"a": "b"},
		Containers: []kubelet.ContainerSpec{
			{Name: "envoy", Image: operator.DefaultRouterProxyImage, Command: []string{"-c", "/config/envoy.yaml"},
				Args: []string{"-c", "/config/envoy.yaml"}, Env: map[string]string{}, Ports: []int{8081},
				Mounts:         []kubelet.ConfigMapMount{{Path: "/config", ConfigMap: "m-router"}},
				ReadinessProbe: &kubelet.Probe{TCPPort: 8081, Period: 10 * Second, FailureThreshold: 3}},
			{Name: "epp", Image: "epp:1", Command: []string{"epp", "--endpoint-selector", "$(ENDPOINT_SELECTOR)"},
				Args: []string{"--endpoint-selector", "$(ENDPOINT_SELECTOR)"}, Env: map[string]string{"K": "v"},
				Ports: []int{9002, 9003, 9090},
				EnvFrom: []kubelet.EnvSource{
					{Name: "ENDPOINT_SELECTOR", ConfigMap: "m-router", Key: "endpoint-selector"},
					{Name: "POD_NAME", FieldPath: "metadata.name"},
				},
				Mounts: []kubelet.ConfigMapMount{{Path: "/config", ConfigMap: "m-router"}}},
		},
	}
	pod := ToPod(spec)
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].ConfigMap == nil || pod.Spec.Volumes[0].ConfigMap.Name != "m-router" {
		t.Fatalf("volumes %+v, want the one ConfigMap volume both containers mount", pod.Spec.Volumes)
	}
	epp := pod.Spec.Containers[1]
	if ref := epp.Env[1].ValueFrom; ref == nil || ref.ConfigMapKeyRef == nil || ref.ConfigMapKeyRef.Key != "endpoint-selector" {
		t.Errorf("epp env %+v, want a configMapKeyRef", epp.Env)
	}
	if ref := epp.Env[2].ValueFrom; ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("epp env %+v, want a fieldRef", epp.Env)
	}
	if !reflect.DeepEqual(epp.Command, []string{"epp"}) {
		t.Errorf("epp command %q, want the program alone", epp.Command)
	}
	if envoy := pod.Spec.Containers[0]; len(envoy.Command) != 0 || len(envoy.Args) != 2 {
		t.Errorf("envoy command %q args %q, want the image's entrypoint and the args", envoy.Command, envoy.Args)
	}
	pod.UID = "uid-1"
	back := FromPod(pod, programs.Default())
	for i, want := range spec.Containers {
		got := back.Containers[i]
		if !reflect.DeepEqual(got.EnvFrom, want.EnvFrom) || !reflect.DeepEqual(got.Mounts, want.Mounts) ||
			!reflect.DeepEqual(got.Env, want.Env) || !reflect.DeepEqual(got.Args, want.Args) ||
			!reflect.DeepEqual(got.Command, want.Command) || !reflect.DeepEqual(got.Ports, want.Ports) {
			t.Errorf("container %s came back as %+v, want %+v", want.Name, got, want)
		}
		if got.Main == nil || reflect.ValueOf(got.Main).Pointer() == reflect.ValueOf(programs.NotFound(nil)).Pointer() {
			t.Errorf("container %s: no program resolved for %q", want.Name, got.Command)
		}
	}
	if p := back.Containers[0].ReadinessProbe; p == nil || p.TCPPort != 8081 || p.Period != 10*Second {
		t.Errorf("envoy readiness probe %+v", p)
	}
}

// A decoder's routing proxy, like envoy, renders no command: its image's
// entrypoint runs.
func TestEntrypointOfCommandlessImages(t *testing.T) {
	for _, image := range []string{operator.DefaultRouterProxyImage, operator.DefaultRoutingSidecarImage} {
		spec := kubelet.PodSpec{Name: "p", Namespace: "ns", Containers: []kubelet.ContainerSpec{
			{Name: "c", Image: image, Command: []string{"--port", "8000"}, Args: []string{"--port", "8000"}, Env: map[string]string{}}}}
		back := FromPod(ToPod(spec), programs.Default())
		if m := back.Containers[0].Main; m == nil || reflect.ValueOf(m).Pointer() == reflect.ValueOf(programs.NotFound(nil)).Pointer() {
			t.Errorf("%s: no program for its entrypoint", image)
		}
	}
}
