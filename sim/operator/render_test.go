package operator

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
)

func TestRenderRouterArgsExact(t *testing.T) {
	const sel = "app.kubernetes.io/instance=qwen app.kubernetes.io/name=model-deployment " +
		"modeldeployment.gpustack.ai/member-index=0"
	cases := []struct {
		name string
		md   func() *api.ModelDeployment
		want string
	}{
		{"vllm-router", func() *api.ModelDeployment { return newMD(api.RouterVLLM, api.EngineVLLM) },
			"--host=0.0.0.0 --port=8081 --prometheus-host=0.0.0.0 --prometheus-port=9090 --kv-connector=mooncake " +
				"--service-discovery --service-discovery-namespace=team-a --service-discovery-port=8000 --selector " + sel},
		{"sglang-gateway", func() *api.ModelDeployment { return newMD(api.RouterSGLang, api.EngineSGLang) },
			"--host=0.0.0.0 --port=8081 --prometheus-host=0.0.0.0 --prometheus-port=9090 " +
				"--service-discovery --service-discovery-namespace=team-a --service-discovery-port=8000 --selector " + sel},
		{"request timeout and extraArgs", func() *api.ModelDeployment {
			md := newMD(api.RouterVLLM, api.EngineVLLM)
			md.Spec.Router.RequestTimeoutSeconds = api.Ptr[int32](120)
			md.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
			return md
		}, "--host=0.0.0.0 --port=8081 --prometheus-host=0.0.0.0 --prometheus-port=9090 --request-timeout-secs=120 " +
			"--kv-connector=mooncake --service-discovery --service-discovery-namespace=team-a " +
			"--service-discovery-port=8000 --selector " + sel + " --policy round_robin"},
		{"sglang serving port", func() *api.ModelDeployment {
			md := newMD(api.RouterSGLang, api.EngineSGLang)
			md.Spec.Roles[0].Ports = []api.Port{{Port: 30000}}
			return md
		}, "--host=0.0.0.0 --port=8081 --prometheus-host=0.0.0.0 --prometheus-port=9090 " +
			"--service-discovery --service-discovery-namespace=team-a --service-discovery-port=30000 --selector " + sel},
		{"vllm-router P/D", func() *api.ModelDeployment { return pdMD(api.RouterVLLM, api.EngineVLLM) },
			"--host=0.0.0.0 --port=8081 --prometheus-host=0.0.0.0 --prometheus-port=9090 --kv-connector=mooncake " +
				"--service-discovery --service-discovery-namespace=team-a --service-discovery-port=8000 " +
				"--vllm-pd-disaggregation --prefill-selector app.kubernetes.io/component=prefill " +
				"app.kubernetes.io/instance=qwen app.kubernetes.io/name=model-deployment " +
				"modeldeployment.gpustack.ai/member-index=0 modeldeployment.gpustack.ai/role-kind=prefill " +
				"--decode-selector app.kubernetes.io/component=decode app.kubernetes.io/instance=qwen " +
				"app.kubernetes.io/name=model-deployment modeldeployment.gpustack.ai/member-index=0 " +
				"modeldeployment.gpustack.ai/role-kind=decode"},
		{"sglang-gateway P/D", func() *api.ModelDeployment { return pdMD(api.RouterSGLang, api.EngineSGLang) },
			"--host=0.0.0.0 --port=8081 --prometheus-host=0.0.0.0 --prometheus-port=9090 " +
				"--service-discovery --service-discovery-namespace=team-a --service-discovery-port=8000 " +
				"--pd-disaggregation --prefill-selector app.kubernetes.io/component=prefill " +
				"app.kubernetes.io/instance=qwen app.kubernetes.io/name=model-deployment " +
				"modeldeployment.gpustack.ai/member-index=0 modeldeployment.gpustack.ai/role-kind=prefill " +
				"--decode-selector app.kubernetes.io/component=decode app.kubernetes.io/instance=qwen " +
				"app.kubernetes.io/name=model-deployment modeldeployment.gpustack.ai/member-index=0 " +
				"modeldeployment.gpustack.ai/role-kind=decode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md := c.md()
			Default(md)
			got, err := RenderRouterArgs(md)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("argv\n got: %s\nwant: %s", strings.Join(got, " "), c.want)
			}
		})
	}
}

func TestRenderRouterCommandAndContainer(t *testing.T) {
	for router, bin := range map[string]string{api.RouterVLLM: "vllm-router", api.RouterSGLang: "sgl-model-gateway"} {
		w, err := RenderRouter(newMD(router, engineFor(router)))
		if err != nil {
			t.Fatal(err)
		}
		if w.Container != "router" || !slices.Equal(w.Command, []string{bin}) || w.Name != "qwen-router" {
			t.Errorf("%s: container %q command %v name %q", router, w.Container, w.Command, w.Name)
		}
		wantLabels := map[string]string{"app.kubernetes.io/name": "model-deployment",
			"app.kubernetes.io/instance": "qwen", "modeldeployment.gpustack.ai/router": router,
			"pod-template-hash": w.TemplateHash}
		if !maps.Equal(w.Labels, wantLabels) {
			t.Errorf("%s: labels %v", router, w.Labels)
		}
		wantAnn := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/path": "/metrics",
			"prometheus.io/port": "9090", "prometheus.io/scheme": "http"}
		if !maps.Equal(w.Annotations, wantAnn) {
			t.Errorf("%s: annotations %v", router, w.Annotations)
		}
	}
}

func TestRouterTemplateHashMovesOnlyWithTheTemplate(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	a, _ := RenderRouter(md)
	md.Spec.Roles[0].Replicas = api.Ptr[int32](7) // scaling a role does not roll the router
	b, _ := RenderRouter(md)
	md.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
	c, _ := RenderRouter(md)
	if a.TemplateHash != b.TemplateHash {
		t.Errorf("role replicas moved the router hash")
	}
	if a.TemplateHash == c.TemplateHash {
		t.Errorf("extraArgs must move the router hash")
	}
	for _, ch := range c.TemplateHash {
		if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", ch) { // the API server's safe alphabet
			t.Fatalf("hash %q leaves the safe alphabet", c.TemplateHash)
		}
	}
}

func TestRouterContractSelectors(t *testing.T) {
	md := pdMD(api.RouterVLLM, api.EngineVLLM)
	Default(md)
	rs := RouterContract(md)
	if rs.Name != api.RouterVLLM || rs.Endpoint != "http://qwen-router.team-a.svc:8081" || len(rs.Roles) != 2 {
		t.Fatalf("contract: %+v", rs)
	}
	want := map[string]string{
		"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "qwen",
		"app.kubernetes.io/component": "decode", "modeldeployment.gpustack.ai/role-kind": "decode",
		"modeldeployment.gpustack.ai/member-index": "0",
	}
	if !maps.Equal(rs.Roles[1].Selector, want) || rs.Roles[1].Kind != api.RoleKindDecode {
		t.Fatalf("decode selector: %v", rs.Roles[1].Selector)
	}
	if rs.Roles[0].Endpoint != "http://qwen-prefill.team-a.svc:8000" {
		t.Fatalf("role endpoint: %s", rs.Roles[0].Endpoint)
	}
}

func TestRenderEngineArgs(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Roles[0].ExtraArgs = []string{"--max-num-seqs", "4"}
	Default(md)
	w, err := RenderEngine(md, &md.Spec.Roles[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Command, " "); got !=
		"vllm serve Qwen/Qwen2.5-0.5B-Instruct --max-num-seqs 4 --host 0.0.0.0 --port 8000" {
		t.Fatalf("vllm argv: %s", got)
	}
	if !slices.Equal(w.Program, []string{"vllm"}) || w.Args[0] != "serve" {
		t.Fatalf("program split: %v %v", w.Program, w.Args)
	}

	sg := newMD(api.RouterSGLang, api.EngineSGLang)
	sg.Spec.Roles[0].ExtraArgs = []string{"--port=30000", "--max-running-requests", "8"}
	sg.Spec.Roles[0].Ports = []api.Port{{Port: 30000}}
	Default(sg)
	w, err = RenderEngine(sg, &sg.Spec.Roles[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Command, " "); got != "python3 -m sglang.launch_server --model-path "+
		"Qwen/Qwen2.5-0.5B-Instruct --enable-metrics --port=30000 --max-running-requests 8 --host 0.0.0.0" {
		t.Fatalf("sglang argv (a role's --port is kept, only --host is filled): %s", got)
	}
	if w.Annotations["prometheus.io/port"] != "30000" || w.Port != 30000 {
		t.Fatalf("metrics port follows the serving port: %v", w.Annotations)
	}
}

func TestRenderEngineLabels(t *testing.T) {
	md := pdMD(api.RouterVLLM, api.EngineVLLM)
	Default(md)
	w, err := RenderEngine(md, &md.Spec.Roles[1], 3)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "qwen",
		"app.kubernetes.io/component": "decode", "modeldeployment.gpustack.ai/role-kind": "decode",
		"modeldeployment.gpustack.ai/pod-ordinal": "3", "modeldeployment.gpustack.ai/member-index": "0",
		"app.kubernetes.io/part-of": "gpustack-operator-worker", "kueue.x-k8s.io/queue-name": "gpu-h100",
	} {
		if w.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, w.Labels[k], v)
		}
	}
	if !strings.HasPrefix(w.Labels[LabelPodGroupName], "gpustack-fnv64-") {
		t.Errorf("pod group label: %q", w.Labels[LabelPodGroupName])
	}
	if w.GenerateName != "qwen-decode-" || w.Container != "main" {
		t.Errorf("generateName %q container %q", w.GenerateName, w.Container)
	}
	if !slices.Contains(w.Args, `{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}`) {
		t.Errorf("decode transfer leg: %v", w.Args)
	}
	// Every selector the router discovers by must match the Pods it renders.
	for _, role := range RouterContract(md).Roles {
		r := md.Spec.Roles[slices.IndexFunc(md.Spec.Roles, func(x api.Role) bool { return x.Name == role.Name })]
		pw, _ := RenderEngine(md, &r, 0)
		for k, v := range role.Selector {
			if pw.Labels[k] != v {
				t.Errorf("role %s: selector %s=%s does not match Pod label %q", role.Name, k, v, pw.Labels[k])
			}
		}
	}
}

func TestEngineSpecHashMovesWithArgs(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	Default(md)
	a, _ := RenderEngine(md, &md.Spec.Roles[0], 0)
	md.Spec.Roles[0].ExtraArgs = []string{"--max-num-seqs", "2"}
	b, _ := RenderEngine(md, &md.Spec.Roles[0], 0)
	if a.PodSpecHash == b.PodSpecHash {
		t.Fatal("role extraArgs must change the spec hash")
	}
}

func TestRenderEPPConfigScorers(t *testing.T) {
	md := pdMD(api.RouterLLMD, api.EngineSGLang)
	Default(md)
	doc, err := RenderEPPConfig(md)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Kind     string `json:"kind"`
		Profiles []struct {
			Name    string `json:"name"`
			Plugins []struct {
				PluginRef string `json:"pluginRef"`
				Weight    int    `json:"weight"`
			} `json:"plugins"`
		} `json:"schedulingProfiles"`
	}
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Kind != "EndpointPickerConfig" || len(cfg.Profiles) != 2 {
		t.Fatalf("config: %s", doc)
	}
	weights := func(i int) map[string]int {
		m := map[string]int{}
		for _, p := range cfg.Profiles[i].Plugins {
			m[p.PluginRef] = p.Weight
		}
		return m
	}
	if d := weights(0); cfg.Profiles[0].Name != "decode" || d["queue-scorer"] != 2 ||
		d["kv-cache-utilization-scorer"] != 2 {
		t.Fatalf("decode profile: %v", d)
	} else if _, ok := d["prefix-cache-scorer"]; ok {
		t.Fatalf("decode has no prefix scorer")
	}
	if p := weights(1); p["prefix-cache-scorer"] != 3 || p["queue-scorer"] != 2 {
		t.Fatalf("prefill profile: %v", p)
	}
	if !strings.Contains(doc, "nonCachedTokens: 8") || !strings.Contains(doc, "approx-prefix-cache-producer") {
		t.Fatalf("P/D decider default and SGLang producer: %s", doc)
	}
}

func TestRenderLLMDArgs(t *testing.T) {
	md := newMD(api.RouterLLMD, api.EngineVLLM)
	md.Spec.Router.ExtraArgs = []string{"--v=3"}
	w, err := RenderRouter(md)
	if err != nil {
		t.Fatal(err)
	}
	want := "--endpoint-selector=$(ENDPOINT_SELECTOR) --endpoint-target-ports=$(ENDPOINT_TARGET_PORTS) " +
		"--config-file=/config/epp.yaml --secure-serving=false --grpc-health-port=9003 " +
		"--metrics-endpoint-auth=false --v=3"
	if got := strings.Join(w.Args, " "); got != want || w.Container != "epp" {
		t.Fatalf("epp argv: %s", got)
	}
	if w.Config["endpoint-selector"] != "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,"+
		"modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router" {
		t.Fatalf("endpoint selector: %s", w.Config["endpoint-selector"])
	}
	if w.Annotations[AnnotationRouterConfig] == "" {
		t.Fatalf("llm-d rolls by config hash")
	}
}

func TestRenderEngineArgsFillsBindFlagsOnlyWhenAbsent(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Roles[0].ExtraArgs = []string{"--host=127.0.0.1"}
	Default(md)
	got, err := RenderEngineArgs(md, &md.Spec.Roles[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "vllm serve Qwen/Qwen2.5-0.5B-Instruct --host=127.0.0.1 --port 8000" {
		t.Fatalf("%v", got)
	}
	md.Spec.Roles[0].Command = []string{"python3", "-m", "sglang.launch_server", "--model-path", "x"}
	got, _ = RenderEngineArgs(md, &md.Spec.Roles[0])
	if strings.Join(got, " ") != "python3 -m sglang.launch_server --model-path x" {
		t.Fatalf("a take-over command is used verbatim: %v", got)
	}
}

// A prefill Pod of a pair carries the bootstrap port its argv router reads;
// no other Pod does, and llm-d-router reads none.
func TestRenderPrefillBootstrapAnnotation(t *testing.T) {
	for _, c := range []struct {
		router, engine, key string
	}{
		{api.RouterVLLM, api.EngineVLLM, AnnotationVLLMBootstrapPort},
		{api.RouterSGLang, api.EngineSGLang, AnnotationSGLangBootstrapPort},
		{api.RouterLLMD, api.EngineVLLM, ""},
	} {
		md := pdMD(c.router, c.engine)
		Default(md)
		for i := range md.Spec.Roles {
			role := &md.Spec.Roles[i]
			w, err := RenderEngine(md, role, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, k := range []string{AnnotationVLLMBootstrapPort, AnnotationSGLangBootstrapPort} {
				if v, ok := w.Annotations[k]; ok {
					got[k] = v
				}
			}
			want := map[string]string{}
			if c.key != "" && role.RoleKind() == api.RoleKindPrefill {
				want[c.key] = "8998"
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s %s role: bootstrap annotations %v, want %v", c.router, role.Name, got, want)
			}
		}
	}
	server := newMD(api.RouterVLLM, api.EngineVLLM)
	Default(server)
	if w, _ := RenderEngine(server, &server.Spec.Roles[0], 0); w.Annotations[AnnotationVLLMBootstrapPort] != "" {
		t.Errorf("a server Pod carries %v", w.Annotations)
	}
}

func TestRenderLLMDPodConfigMapAndEnvoy(t *testing.T) {
	md := newMD(api.RouterLLMD, api.EngineVLLM)
	md.Spec.Router.RequestTimeoutSeconds = api.Ptr(int32(90))
	w, err := RenderRouter(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Containers) != 2 || w.Containers[0].Name != "envoy" || w.Containers[1].Name != "epp" {
		t.Fatalf("containers: %+v", w.Containers)
	}
	envoy, epp := w.Containers[0], w.Containers[1]
	if strings.Join(envoy.Args, " ") != "-c /config/envoy.yaml" || envoy.Command != nil || envoy.ReadinessTCP != 8081 ||
		envoy.ConfigMount != "/config" || envoy.Image != DefaultRouterProxyImage {
		t.Errorf("envoy: %+v", envoy)
	}
	var ports []int
	for _, p := range epp.Ports {
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, []int{9002, 9003, 9090}) || epp.ReadinessGRPC != 9003 || !epp.WatchPods {
		t.Errorf("epp ports and probe: %+v", epp)
	}
	env := map[string]string{}
	for _, e := range epp.Env {
		env[e.Name] = e.ConfigMapKey + e.FieldPath
	}
	if env["ENDPOINT_SELECTOR"] != "endpoint-selector" || env["ENDPOINT_TARGET_PORTS"] != "endpoint-target-ports" ||
		env["NAMESPACE"] != "metadata.namespace" || env["POD_NAME"] != "metadata.name" {
		t.Errorf("epp env: %v", env)
	}
	if !strings.Contains(w.Config["envoy.yaml"], "timeout: 90s}") || w.Config["endpoint-target-ports"] != "8000" ||
		w.Config["extra-args.json"] != "null" && w.Config["extra-args.json"] != "[]" {
		t.Errorf("config: envoy timeout, ports, extra args: %q %q", w.Config["endpoint-target-ports"], w.Config["extra-args.json"])
	}
	if !strings.Contains(RenderEnvoyConfig(nil), "timeout: 86400s}") {
		t.Error("without requestTimeoutSeconds the route timeout is a day")
	}
	// An extraArgs edit changes only extra-args.json and the argv: the hash and the Pod roll.
	before := w.Annotations[AnnotationRouterConfig]
	md.Spec.Router.ExtraArgs = []string{"--v=4"}
	w2, _ := RenderRouter(md)
	if w2.Annotations[AnnotationRouterConfig] == before || w2.TemplateHash == w.TemplateHash ||
		w2.Config["extra-args.json"] != `["--v=4"]` {
		t.Fatalf("extraArgs edit: hash %s -> %s, template %s -> %s", before, w2.Annotations[AnnotationRouterConfig],
			w.TemplateHash, w2.TemplateHash)
	}
}

func TestKVEventsConfigOnProducingVLLMRolesUnderLLMD(t *testing.T) {
	const doc = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":"kv@"}`
	for _, c := range []struct {
		router, engine, kind string
		want                 bool
	}{
		{api.RouterLLMD, api.EngineVLLM, api.RoleKindServer, true},
		{api.RouterLLMD, api.EngineVLLM, api.RoleKindDecode, false},
		{api.RouterLLMD, api.EngineSGLang, api.RoleKindServer, false},
		{api.RouterVLLM, api.EngineVLLM, api.RoleKindServer, false},
	} {
		md := newMD(c.router, c.engine)
		md.Spec.Roles[0].Kind = c.kind
		Default(md)
		w, err := RenderEngine(md, &md.Spec.Roles[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(w.Args, "--kv-events-config")
		got := i >= 0 && w.Args[i+1] == doc && slices.Equal(w.ExtraPorts, []int32{5557, 5558})
		if got != c.want {
			t.Errorf("%s+%s %s: --kv-events-config rendered %t, want %t (%v)", c.router, c.engine, c.kind, got, c.want, w.Args)
		}
	}
}

// Only a prefill/decode pair gets the decider and the disagg handler, with
// nonCachedTokens from disaggregationThresholdTokens, else 8
// (docs/operator.md#llm-d-scoring-configuration).
func TestRenderEPPConfigDisaggregationThreshold(t *testing.T) {
	decider := func(md *api.ModelDeployment) (params map[string]any, handler bool) {
		t.Helper()
		doc, err := RenderEPPConfig(md)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Plugins []struct {
				Type       string         `json:"type"`
				Parameters map[string]any `json:"parameters"`
			} `json:"plugins"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			t.Fatal(err)
		}
		for _, p := range cfg.Plugins {
			switch p.Type {
			case "prefix-based-pd-decider":
				params = p.Parameters
			case "disagg-profile-handler":
				handler = true
			}
		}
		return params, handler
	}
	for _, c := range []struct {
		threshold *int32
		want      float64
	}{{nil, 8}, {api.Ptr[int32](16), 16}, {api.Ptr[int32](0), 0}} {
		md := pdMD(api.RouterLLMD, api.EngineSGLang)
		md.Spec.Router.DisaggregationThresholdTokens = c.threshold
		p, handler := decider(md)
		if p["nonCachedTokens"] != c.want || p["promptTokens"] != float64(0) || !handler {
			t.Errorf("threshold %v: decider %v, handler %v; want nonCachedTokens %v", c.threshold, p, handler, c.want)
		}
	}
	if p, handler := decider(newMD(api.RouterLLMD, api.EngineVLLM)); p != nil || handler {
		t.Errorf("a server deployment renders decider %v, handler %v", p, handler)
	}
}
