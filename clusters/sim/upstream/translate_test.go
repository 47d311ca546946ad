package upstream

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/proc"
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

// pods is a Pods lister over fixed Pods, matching every selector label.
func pods(ps ...proc.Pod) func(string, map[string]string) []proc.Pod {
	return func(ns string, sel map[string]string) []proc.Pod {
		var out []proc.Pod
		for _, p := range ps {
			ok := p.Namespace == ns
			for k, v := range sel {
				ok = ok && p.Labels[k] == v
			}
			if ok {
				out = append(out, p)
			}
		}
		return out
	}
}

func pod(name, ip, role string, annotations map[string]string) proc.Pod {
	return proc.Pod{PodInfo: proc.PodInfo{Name: name, Namespace: "ns", IP: ip,
		Labels: map[string]string{"app": "md", "role": role}, Annotations: annotations}}
}

// hub is the closed hub address a container's Program hands Translate.
const hub = "http://127.0.2.9:40001"

func TestTranslateTable(t *testing.T) {
	servers := pods(pod("md-server-1", "127.0.3.2", "server", nil), pod("md-server-0", "127.0.3.1", "server", nil),
		pod("other", "127.0.9.9", "prefill", nil))
	pd := pods(pod("md-prefill-0", "127.0.4.1", "prefill", map[string]string{"vllm.ai/bootstrap-port": "8998", "sglang.ai/bootstrap-port": "8999"}),
		pod("md-decode-0", "127.0.4.2", "decode", nil))
	cases := []struct {
		name     string
		env      Env
		argv     []string
		want     string
		wantRows []string
		// wantRegister are the URLs (worker type, bootstrap port) posted.
		wantRegister string
	}{{
		name: "vllm-router, static workers in Pod name order, policy passed through",
		env:  Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Discover: servers},
		argv: rendered(api.RouterVLLM, "--policy", "round_robin"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 --kv-connector=mooncake " +
			"--worker-urls http://127.0.3.1:8000 http://127.0.3.2:8000 --policy round_robin --worker-startup-check-interval=1",
		wantRows: []string{"launcher", "bind-address", "startup-check-interval", "hub-offline", "static-workers"},
	}, {
		name: "vllm-router with a Kubernetes API keeps its discovery flags",
		env:  Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h"},
		argv: rendered(api.RouterVLLM),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 --kv-connector=mooncake " +
			"--service-discovery --service-discovery-namespace=ns --service-discovery-port=8000 --selector app=md role=server " +
			"--worker-startup-check-interval=1",
		wantRows: []string{"launcher", "bind-address", "startup-check-interval", "hub-offline"},
	}, {
		name: "sglang-gateway: IGW as clap implies it, clap's eviction default, workers registered as discovery would",
		env:  Env{Router: api.RouterSGLang, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Discover: servers, Vocab: "/v"},
		argv: rendered(api.RouterSGLang),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 " +
			"--eviction-interval-secs=120 --enable-igw",
		wantRows:     []string{"launcher", "bind-address", "eviction-interval", "igw", "harmony-vocab", "hub-offline", "static-workers"},
		wantRegister: "http://127.0.3.1:8000 http://127.0.3.2:8000",
	}, {
		name: "sglang-gateway: a user's --eviction-interval is respelled, not defaulted",
		env:  Env{Router: api.RouterSGLang, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Vocab: "/v"},
		argv: rendered(api.RouterSGLang, "--eviction-interval", "30"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 " +
			"--service-discovery --service-discovery-namespace=ns --service-discovery-port=8000 --selector app=md role=server " +
			"--eviction-interval-secs 30 --enable-igw",
		wantRows: []string{"launcher", "bind-address", "eviction-interval", "igw", "harmony-vocab", "hub-offline"},
	}, {
		name: "vllm-router P/D: prefill with its bootstrap port annotation, then decode",
		env:  Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Discover: pd},
		argv: renderedPD(api.RouterVLLM, "--prefill-policy", "round_robin"),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 --kv-connector=mooncake " +
			"--prefill http://127.0.4.1:8000 8998 --decode http://127.0.4.2:8000 --vllm-pd-disaggregation " +
			"--prefill-policy round_robin --worker-startup-check-interval=1",
		wantRows: []string{"launcher", "bind-address", "startup-check-interval", "hub-offline", "static-workers"},
	}, {
		name: "sglang-gateway P/D registers prefill with its own annotation, then decode",
		env:  Env{Router: api.RouterSGLang, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Discover: pd, Vocab: "/v"},
		argv: renderedPD(api.RouterSGLang),
		want: "--host=127.0.2.9 --port=8081 --prometheus-host=127.0.2.9 --prometheus-port=9090 " +
			"--pd-disaggregation --eviction-interval-secs=120 --enable-igw",
		wantRows:     []string{"launcher", "bind-address", "eviction-interval", "igw", "harmony-vocab", "hub-offline", "static-workers"},
		wantRegister: "http://127.0.4.1:8000(prefill,8999) http://127.0.4.2:8000(decode)",
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
			var reg []string
			for _, r := range plan.Register {
				s := r.URL
				switch {
				case r.WorkerType != nil && r.BootstrapPort != nil:
					s += fmt.Sprintf("(%s,%d)", *r.WorkerType, *r.BootstrapPort)
				case r.WorkerType != nil:
					s += "(" + *r.WorkerType + ")"
				}
				reg = append(reg, s)
				if r.HealthCheckTimeoutSecs != 5 || r.HealthCheckIntervalSecs != 60 || r.HealthSuccessThreshold != 2 ||
					r.HealthFailureThreshold != 3 || r.MaxConnectionAttempts != 40 {
					t.Errorf("%s: health settings %+v, want clap's defaults 5/60/2/3 and 40 attempts", r.URL, r)
				}
			}
			if strings.Join(reg, " ") != tc.wantRegister {
				t.Errorf("registered\n got: %s\nwant: %s", strings.Join(reg, " "), tc.wantRegister)
			}
			if plan.Env["HF_ENDPOINT"] != hub || plan.Env["HF_HOME"] != "/h" {
				t.Errorf("env %v lacks HF_ENDPOINT=%s HF_HOME=/h", plan.Env, hub)
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
		{"no upstream code for llm-d", `no upstream code for router "llm-d-router"`,
			Env{Router: api.RouterLLMD}, nil},
		{"an empty static list", `no Pod in namespace "ns" matches --selector app=md,role=server`,
			Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h", Discover: pods()}, rendered(api.RouterVLLM)},
		{"a host other than the rendered wildcard", "--host=10.0.0.1",
			Env{Router: api.RouterVLLM, Loopback: "127.0.2.9", HubEndpoint: hub, HubHome: "/h"}, []string{"--host=10.0.0.1"}},
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
