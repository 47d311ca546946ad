package operator

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
)

// A managed decoder under llm-d-router gets the routing proxy on its
// serving port and its engine moves to 8200; nothing else gets one.
func TestRenderRoutingProxyOnLLMDDirectDecoders(t *testing.T) {
	for _, c := range []struct {
		engine, connector string
		env               map[string]string
	}{
		{api.EngineVLLM, "--kv-connector=mooncake --mooncake-bootstrap-port=8998", map[string]string{"POD_IP": "status.podIP"}},
		{api.EngineSGLang, "--kv-connector=sglang", map[string]string{"POD_IP": "status.podIP", "SGLANG_BOOTSTRAP_PORT": "8998"}},
	} {
		md := pdMD(api.RouterLLMD, c.engine)
		Default(md)
		dec, err := RenderEngine(md, &md.Spec.Roles[1], 0)
		if err != nil {
			t.Fatal(err)
		}
		p := dec.Sidecar
		if p == nil {
			t.Fatalf("%s decoder: no routing proxy", c.engine)
		}
		want := "--port=8000 --model-server-port=8200 " + c.connector + " --secure-proxy=false"
		if got := strings.Join(p.Args, " "); got != want || p.Name != "routing-proxy" || p.Command != nil ||
			!slices.Equal(p.Program, []string{"/app/pd-sidecar"}) || p.Image != DefaultRoutingSidecarImage ||
			len(p.Ports) != 1 || p.Ports[0].Port != 8000 {
			t.Errorf("%s proxy: %q %+v, want args %q", c.engine, got, p, want)
		}
		env := map[string]string{}
		for _, e := range p.Env {
			env[e.Name] = e.Value + e.FieldPath
		}
		if !maps.Equal(env, c.env) {
			t.Errorf("%s proxy env %v, want %v", c.engine, env, c.env)
		}
		i := slices.Index(dec.Args, "--port")
		if dec.Port != 8200 || i < 0 || dec.Args[i+1] != "8200" || dec.Annotations[api.AnnotationPromPort] != "8200" ||
			dec.ProbePort != 8000 || dec.ProbePath != "/v1/models" {
			t.Errorf("%s decoder engine: port %d, args %v, scrape %s, probe %s on %d", c.engine, dec.Port, dec.Args,
				dec.Annotations[api.AnnotationPromPort], dec.ProbePath, dec.ProbePort)
		}
		pre, _ := RenderEngine(md, &md.Spec.Roles[0], 0)
		if pre.Sidecar != nil || pre.Port != 8000 || pre.ProbePath != "/health" || pre.ProbePort != 8000 {
			t.Errorf("%s prefill: sidecar %v, port %d, probe %s on %d", c.engine, pre.Sidecar, pre.Port, pre.ProbePath, pre.ProbePort)
		}
	}
	for _, r := range []string{api.RouterVLLM, api.RouterSGLang} {
		md := pdMD(r, engineFor(r))
		Default(md)
		if w, _ := RenderEngine(md, &md.Spec.Roles[1], 0); w.Sidecar != nil || w.Port != 8000 {
			t.Errorf("%s decoder: sidecar %v, port %d", r, w.Sidecar, w.Port)
		}
	}
	md := pdMD(api.RouterLLMD, api.EngineVLLM)
	md.Spec.Roles[1].Command = []string{"vllm", "serve", "x"}
	Default(md)
	if w, _ := RenderEngine(md, &md.Spec.Roles[1], 0); w.Sidecar != nil {
		t.Errorf("a take-over decoder gets a proxy: %+v", w.Sidecar)
	}
}

// The model server port moves past declared ports, a role's own --port
// wins, and one on a declared port is refused.
func TestRenderRoutingProxyModelServerPort(t *testing.T) {
	md := pdMD(api.RouterLLMD, api.EngineVLLM)
	dec := &md.Spec.Roles[1]
	dec.Ports = []api.Port{{Port: 8000}, {Port: 8200}}
	if w, err := RenderEngine(md, dec, 0); err != nil || w.Port != 8201 || w.Sidecar.Args[1] != "--model-server-port=8201" {
		t.Errorf("declared 8200: %v %d %v", err, w.Port, w.Sidecar)
	}
	dec.ExtraArgs = []string{"--port=9100"}
	if w, err := RenderEngine(md, dec, 0); err != nil || w.Port != 9100 || w.Sidecar.Args[1] != "--model-server-port=9100" {
		t.Errorf("--port=9100: %v %d %v", err, w.Port, w.Sidecar)
	}
	dec.ExtraArgs = []string{"--port", "8200"}
	if _, err := RenderEngine(md, dec, 0); err == nil || !strings.Contains(err.Error(), "places its model server on port 8200") {
		t.Errorf("--port on a declared port: %v", err)
	}
}
