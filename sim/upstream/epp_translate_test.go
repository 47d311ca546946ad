package upstream

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var renderedEPP = []string{"--endpoint-selector=app.kubernetes.io/name=model-deployment,!modeldeployment.gpustack.ai/router",
	"--endpoint-target-ports=8000", "--config-file=/config/epp.yaml", "--secure-serving=false", "--grpc-health-port=9003",
	"--metrics-endpoint-auth=false", "--v=4"}

const renderedConfig = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n" +
	"dataLayer:\n  sources:\n  - pluginRef: metrics-data-source\n"

// On the plain sim every row applies: free ports, the written mount, file
// discovery added beside the rendered data layer, the proxy; everything
// else (the selector, the operator's flags, extraArgs) reaches the binary.
func TestTranslateEPPOnThePlainSim(t *testing.T) {
	env := EPPEnv{ConfigDir: "/tmp/d/mounts", GRPCPort: 40001, HealthPort: 40002, MetricsPort: 40003,
		EndpointsFile: "/tmp/d/endpoints.yaml", Proxy: "http://127.0.9.9:3128"}
	plan, err := TranslateEPP(renderedEPP, []byte(renderedConfig), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{renderedEPP[0], renderedEPP[1], "--config-file=/tmp/d/mounts/config/epp.yaml", "--secure-serving=false",
		"--grpc-health-port=40002", "--metrics-endpoint-auth=false", "--v=4", "--grpc-port=40001", "--metrics-port=40003"}
	if !slices.Equal(plan.Args, want) {
		t.Errorf("argv\n got %q\nwant %q", plan.Args, want)
	}
	if !slices.Equal(plan.Rows, []string{"epp-ports", "config-mount", "file-discovery", "cluster-dns"}) {
		t.Errorf("rows %v", plan.Rows)
	}
	if plan.Env["HTTP_PROXY"] != env.Proxy || len(plan.Env) != 1 {
		t.Errorf("env %v", plan.Env)
	}
	var cfg struct {
		Plugins []struct {
			Type, Name string
			Parameters map[string]any
		}
		DataLayer struct {
			Sources   []map[string]any
			Discovery struct{ PluginRef string }
		} `json:"dataLayer"`
	}
	if err := yaml.Unmarshal(plan.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	last := cfg.Plugins[len(cfg.Plugins)-1]
	if len(cfg.Plugins) != 2 || last.Type != "file-discovery" || last.Parameters["path"] != env.EndpointsFile ||
		last.Parameters["watchFile"] != true || cfg.DataLayer.Discovery.PluginRef != last.Name || len(cfg.DataLayer.Sources) != 1 {
		t.Errorf("config:\n%s", plan.Config)
	}
}

// With a real API server (no endpoints file) the EPP discovers by the
// rendered selector: no file-discovery row, the config as rendered.
func TestTranslateEPPWithAnAPIServerKeepsTheSelector(t *testing.T) {
	plan, err := TranslateEPP(renderedEPP, []byte(renderedConfig), EPPEnv{ConfigDir: "/d", GRPCPort: 1, HealthPort: 2, MetricsPort: 3, Proxy: "http://p"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(plan.Rows, "file-discovery") || string(plan.Config) != renderedConfig {
		t.Errorf("rows %v, config:\n%s", plan.Rows, plan.Config)
	}
}

// A config that already names a discovery plugin is not silently merged.
func TestTranslateEPPRefusesASecondDiscovery(t *testing.T) {
	_, err := TranslateEPP(renderedEPP, []byte("dataLayer:\n  discovery: {pluginRef: mine}\n"),
		EPPEnv{ConfigDir: "/d", GRPCPort: 1, HealthPort: 2, MetricsPort: 3, EndpointsFile: "/e", Proxy: "http://p"})
	if err == nil || !strings.Contains(err.Error(), "file-discovery") {
		t.Fatalf("err = %v", err)
	}
}

// Every row is cited to both the operator and llm-d-router at the pinned commit.
func TestEPPTranslationsAreCited(t *testing.T) {
	for _, r := range EPPTranslations {
		if !strings.Contains(r.Cite, "llm-d/llm-d-router@71f4f099:") || !strings.Contains(r.Cite, "gpustack/gpustack-operator@") || r.Why == "" {
			t.Errorf("row %s: cite %q", r.Name, r.Cite)
		}
	}
}
