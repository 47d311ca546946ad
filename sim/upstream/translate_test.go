package upstream

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
)

// rendered is the argv the operator renders for a server deployment in
// namespace ns (docs/operator.md#router-argv), then extra.
func rendered(router string, extra ...string) []string {
	args := []string{"--host=0.0.0.0", "--port=8081", "--prometheus-host=0.0.0.0", "--prometheus-port=9090"}
	if router == api.RouterVLLM {
		args = append(args, "--kv-connector=mooncake")
	}
	args = append(args, "--service-discovery", "--service-discovery-namespace=ns", "--service-discovery-port=8000",
		"--selector", "app=md", "role=server")
	return append(args, extra...)
}

func renderedPD(router string, extra ...string) []string {
	args := []string{"--host=0.0.0.0", "--port=8081", "--prometheus-host=0.0.0.0", "--prometheus-port=9090"}
	flag := "--pd-disaggregation"
	if router == api.RouterVLLM {
		args = append(args, "--kv-connector=mooncake")
		flag = "--vllm-pd-disaggregation"
	}
	args = append(args, "--service-discovery", "--service-discovery-namespace=ns", "--service-discovery-port=8000",
		flag, "--prefill-selector", "app=md", "role=prefill", "--decode-selector", "app=md", "role=decode")
	return append(args, extra...)
}

// hub is the closed hub address a container's Program hands Translate.
const hub = "http://127.0.2.9:40001"

// kc is the kubeconfig a container's Program hands Translate.
const kc = "/run/kubeconfig"

func TestTranslateTable(t *testing.T) {
	base := Env{Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Kubeconfig: kc, Vocab: "/v"}
	with := func(router string) Env { e := base; e.Router = router; return e }
	cases := []struct {
		name     string
		env      Env
		argv     []string
		want     string
		wantRows []string
	}{{
		name: "vllm-router: its discovery flags and policy as rendered, on the Pod's address",
		env:  with(api.RouterVLLM),
		argv: rendered(api.RouterVLLM, "--policy", "round_robin"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 --kv-connector=mooncake " +
			"--service-discovery --service-discovery-namespace=ns --service-discovery-port=8000 --selector app=md role=server " +
			"--policy round_robin --worker-startup-check-interval=1",
		wantRows: []string{"bind-address", "startup-check-interval", "hub-offline", "kube-api"},
	}, {
		name: "vllm-router: a rendered startup check interval is kept",
		env:  with(api.RouterVLLM),
		argv: rendered(api.RouterVLLM, "--worker-startup-check-interval", "5"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 --kv-connector=mooncake " +
			"--service-discovery --service-discovery-namespace=ns --service-discovery-port=8000 --selector app=md role=server " +
			"--worker-startup-check-interval 5",
		wantRows: []string{"bind-address", "hub-offline", "kube-api"},
	}, {
		name: "sglang-gateway: its flags as rendered (clap implies IGW under discovery)",
		env:  with(api.RouterSGLang),
		argv: rendered(api.RouterSGLang, "--eviction-interval", "30"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 " +
			"--service-discovery --service-discovery-namespace=ns --service-discovery-port=8000 --selector app=md role=server " +
			"--eviction-interval 30",
		wantRows: []string{"bind-address", "harmony-vocab", "hub-offline", "kube-api"},
	}, {
		name: "vllm-router P/D: the pool selectors as rendered",
		env:  with(api.RouterVLLM),
		argv: renderedPD(api.RouterVLLM, "--prefill-policy", "round_robin"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 --kv-connector=mooncake " +
			"--service-discovery --service-discovery-namespace=ns --service-discovery-port=8000 --vllm-pd-disaggregation " +
			"--prefill-selector app=md role=prefill --decode-selector app=md role=decode --prefill-policy round_robin " +
			"--worker-startup-check-interval=1",
		wantRows: []string{"bind-address", "startup-check-interval", "hub-offline", "kube-api"},
	}}
	used := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Translate(tc.argv, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(plan.Args, " ") != tc.want {
				t.Errorf("argv\n got: %s\nwant: %s", strings.Join(plan.Args, " "), tc.want)
			}
			if !slices.Equal(plan.Rows, tc.wantRows) {
				t.Errorf("rows applied: got %v, want %v", plan.Rows, tc.wantRows)
			}
			if plan.Env["HF_ENDPOINT"] != hub || plan.Env["HF_HOME"] != "/h" || plan.Env["KUBECONFIG"] != kc {
				t.Errorf("env %v lacks HF_ENDPOINT=%s HF_HOME=/h KUBECONFIG=%s", plan.Env, hub, kc)
			}
			if tc.env.Router == api.RouterSGLang && plan.Env["TIKTOKEN_ENCODINGS_BASE"] != "/v" {
				t.Errorf("env %v lacks TIKTOKEN_ENCODINGS_BASE=/v", plan.Env)
			}
			for _, r := range plan.Rows {
				used[r] = true
			}
		})
	}
	for _, row := range Translations {
		if !used[row.Name] {
			t.Errorf("translation %q is exercised by no case", row.Name)
		}
		if row.Why == "" || row.Cite == "" || row.Rendered == "" || row.Upstream == "" || len(row.Routers) == 0 {
			t.Errorf("translation %q must say what it changes, why, and cite its source", row.Name)
		}
	}
}

func TestTranslateRefusals(t *testing.T) {
	cases := []struct {
		name, want string
		env        Env
		argv       []string
	}{
		{"no binary for llm-d", `make routers builds no binary for router "llm-d-router"`,
			Env{Router: api.RouterLLMD}, nil},
		{"no Kubernetes API to discover through", "no kubeconfig to give the process",
			Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h"}, rendered(api.RouterVLLM)},
		{"a host other than the rendered wildcard", "--host=10.0.0.1",
			Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Kubeconfig: kc}, []string{"--host=10.0.0.1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Translate(tc.argv, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseArgsRoundTrips(t *testing.T) {
	argv := []string{"--a=1", "--list", "x", "y", "--flag", "--neg", "-1", "--eq=k=v"}
	if got := render(parseArgs(argv)); !slices.Equal(got, argv) {
		t.Fatalf("render(parseArgs(%q)) = %q", argv, got)
	}
}
