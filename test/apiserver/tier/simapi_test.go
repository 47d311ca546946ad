package tier

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/sim/apiserver/podconv"
	"github.com/gpustack/routing-conformance/test/apiserver/stack"
)

// routedMD is a two-replica vLLM deployment behind vllm-router; the kube
// target picks the InstanceType.
func routedMD(name string, routerArgs ...string) *api.ModelDeployment {
	return &api.ModelDeployment{
		Metadata: api.ObjectMeta{Name: name},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: "Qwen/Qwen2.5-0.5B-Instruct"},
			Engine: api.Engine{Name: api.EngineVLLM, Version: "0.29.0"},
			Router: &api.Router{Name: api.RouterVLLM, ExtraArgs: routerArgs},
			Roles:  []api.Role{{Name: "server", Replicas: api.Ptr[int32](2)}},
		},
	}
}

// llmdMD is routedMD with llm-d-router in front of engine.
func llmdMD(name, engine string) *api.ModelDeployment {
	md := routedMD(name)
	md.Spec.Router = &api.Router{Name: api.RouterLLMD}
	md.Spec.Engine = api.Engine{Name: engine, Version: map[string]string{api.EngineVLLM: "0.29.0", api.EngineSGLang: "0.5.18"}[engine]}
	return md
}

// deployReady connects the kube target to s, deploys md and waits until it
// is Ready; the deployment and the connection go when t ends.
func deployReady(ctx context.Context, t *testing.T, s *stack.Stack, md *api.ModelDeployment) (*kube.Cluster, clusters.Deployment) {
	t.Helper()
	k, err := kube.Connect(ctx, s.KubeOptions(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	d, err := k.Deploy(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Delete(context.WithoutCancel(ctx)) })
	if err := d.WaitReady(ctx, 100*time.Millisecond); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return k, d
}

// chat sends one chat completion through base and returns the status code.
func chat(ctx context.Context, base string) (int, error) { return chatText(ctx, base, "hello") }

// chatText is chat with content as the user's message.
func chatText(ctx context.Context, base, content string) (int, error) {
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen2.5-0.5B-Instruct", "max_tokens": 4,
		"messages": []map[string]string{{"role": "user", "content": content}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// The sim behind a real API server: the kube target deploys through the
// API server, the sim operator reconciles from it, the sim node runs the
// Pods on 10.244.0.0/16, and everything the suite reads comes back through
// the API server: status, port-forward traffic, logs (current and
// previous), Pod-proxy metrics, the extraArgs rollout, deletion.
func TestKubeTargetOnTheSim(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	_, d := deployReady(ctx, t, s, routedMD("sim-behind-api", "--policy", "round_robin"))

	t.Run("engine and router Pods run on the node, on Pod IPs of the range", func(t *testing.T) {
		pods, err := s.Kube.CoreV1().Pods(d.Namespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 3 {
			t.Fatalf("%d Pods, want 2 engines and a router: %v", len(pods.Items), podNames(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != s.Node.Name() || !strings.HasPrefix(p.Status.PodIP, "10.244.") || p.Status.Phase != corev1.PodRunning {
				t.Errorf("Pod %s: node %q IP %q phase %s", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase)
			}
			if len(p.OwnerReferences) != 1 {
				t.Errorf("Pod %s owners %v, want one (its ModelDeployment or the router's ReplicaSet)", p.Name, p.OwnerReferences)
			}
		}
	})

	t.Run("traffic through the port-forward reaches the replicas", func(t *testing.T) {
		base, err := d.OpenAIBaseURL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			code, err := chat(ctx, base)
			if err != nil || code != http.StatusOK {
				t.Fatalf("request %d through %s: %d %v", i, base, code, err)
			}
		}
		reps, err := d.Replicas(ctx)
		if err != nil || len(reps) != 2 {
			t.Fatalf("replicas %v %v", reps, err)
		}
		for _, r := range reps {
			snap, err := d.EngineMetrics(ctx, r)
			if err != nil {
				t.Fatalf("engine metrics of %s through the Pod proxy: %v", r.Name, err)
			}
			if n, _ := snap.Sum("vllm:request_success_total"); n != 2 {
				t.Errorf("replica %s served %v requests, want 2 of 4 under round_robin", r.Name, n)
			}
		}
		snap, err := d.RouterMetrics(ctx)
		if err != nil {
			t.Fatalf("router metrics through the Pod proxy: %v", err)
		}
		if len(snap.Names()) == 0 {
			t.Error("the router's /metrics came back empty")
		}
		// Per-Pod counts are keyed by the router Pod's name, as the suite
		// reads them (routerreplicas, switch).
		routers, err := d.RouterState(ctx)
		if err != nil || len(routers) != 1 {
			t.Fatalf("router Pods %v %v", routers, err)
		}
		by, err := snap.SumBy("vllm_router_requests_total", metrics.SourceLabel)
		if err != nil || by[routers[0].Name] < 4 {
			t.Errorf("router requests by %s = %v (%v), want the 4 requests under router Pod %s", metrics.SourceLabel, by, err, routers[0].Name)
		}
	})

	t.Run("router logs come through pods/log", func(t *testing.T) {
		logs, err := d.RouterLogs(ctx, clusters.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs, "RoundRobin") {
			t.Errorf("router log has no RoundRobin banner:\n%s", logs)
		}
		if _, err := d.RouterLogs(ctx, clusters.LogOptions{Previous: true}); err == nil ||
			!strings.Contains(err.Error(), "previous terminated container") {
			t.Errorf("previous logs of a router that never crashed: %v, want the kubelet's refusal", err)
		}
	})

	// Each edit, as the suite makes it: Update, then WaitReady, which must
	// mean the new router Pod alone serves (the Deployment controller
	// deletes the old one a while after the new one is Ready; a WaitReady
	// that returned in between once saw both). A refused value is a failed
	// rollout: the old Pod keeps serving and RouterReady stays True, the
	// wait stops on the refusal, and the edit back leaves the old Pod alone
	// again. No edit replaces an engine Pod.
	t.Run("an extraArgs edit rolls a new router Pod; a refused one fails its rollout and is edited back", func(t *testing.T) {
		engines := engineUIDs(ctx, t, d)
		before, _ := d.RouterState(ctx)
		for _, args := range [][]string{{"--policy", "random"}, {"--policy", "cache_aware"}, {"--policy", "random"}} {
			if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = args }); err != nil {
				t.Fatal(err)
			}
			if err := d.WaitReady(ctx, 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			after, _ := d.RouterState(ctx)
			if len(after) != 1 || len(before) != 1 || after[0].UID == before[0].UID || !after[0].Ready {
				t.Fatalf("edit to %q: router Pods %v -> %v right after WaitReady, want one new Ready Pod", args, before, after)
			}
			before = after
		}
		logs, err := d.RouterLogs(ctx, clusters.LogOptions{})
		if err != nil || !strings.Contains(logs, "Random") {
			t.Errorf("new router log: %v\n%s", err, logs)
		}

		serving := before[0]
		if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = []string{"--policy", "round_robbin"} }); err != nil {
			t.Fatal(err)
		}
		var crashed clusters.RouterPod
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			pods, _ := d.RouterState(ctx)
			// Between restarts the container waits in CrashLoopBackOff.
			if i := slices.IndexFunc(pods, func(p clusters.RouterPod) bool {
				return p.UID != serving.UID && p.LastExitCode != nil && p.Waiting == "CrashLoopBackOff"
			}); i >= 0 {
				crashed = pods[i]
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if crashed.LastExitCode == nil || *crashed.LastExitCode != 2 || crashed.Waiting != "CrashLoopBackOff" {
			t.Fatalf("router state %+v, want a new Pod in CrashLoopBackOff after exit code 2", crashed)
		}
		prev, err := d.RouterLogs(ctx, clusters.LogOptions{Previous: true})
		if err != nil || !strings.Contains(prev, "invalid value 'round_robbin'") {
			t.Errorf("previous log of the crashed router: %v\n%s", err, prev)
		}
		pods, _ := d.RouterState(ctx)
		if !slices.ContainsFunc(pods, func(p clusters.RouterPod) bool { return p.UID == serving.UID && p.Ready }) {
			t.Errorf("router Pods during the failed rollout %v: the old one (%s) must keep serving", pods, serving.Name)
		}
		obj, _ := d.Object(ctx)
		if c := obj.Status.FindCondition(api.ConditionRouterReady); c == nil || c.Status != "True" {
			t.Errorf("RouterReady during the failed rollout: %+v, want True (the old Pod is ready)", c)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = d.WaitReady(wctx, 100*time.Millisecond)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "last exit code 2") {
			t.Errorf("WaitReady with the refused args = %v, want it to stop on the refusal", err)
		}

		if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = []string{"--policy", "random"} }); err != nil {
			t.Fatal(err)
		}
		if err := d.WaitReady(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if pods, _ := d.RouterState(ctx); len(pods) != 1 || pods[0].UID != serving.UID {
			t.Errorf("router Pods after the edit back: %v, want the old one alone (%s)", pods, serving.Name)
		}
		if after := engineUIDs(ctx, t, d); !maps.Equal(engines, after) {
			t.Errorf("engine Pods %v -> %v: a router edit replaced them", engines, after)
		}
	})

	t.Run("Delete removes the deployment, its Pods and its namespace", func(t *testing.T) {
		ns := d.Namespace()
		if err := d.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			t.Errorf("namespace %s still exists", ns)
		}
		if left := s.Node.Kubelet().ListStatus(ns, nil); len(left) > 0 {
			t.Errorf("the node still runs Pods of %s: %v", ns, left)
		}
	})
}

func engineUIDs(ctx context.Context, t *testing.T, d clusters.Deployment) map[string]string {
	t.Helper()
	rs, err := d.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return clusters.ReplicaUIDs(rs)
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s(%s)", p.Name, podconv.FromStatus(&p).Phase))
	}
	return out
}

// llm-d-router behind the API server: the operator's ConfigMap is written
// through the API and mounted by the node into the two-container router
// Pod, the epp reads its selector from it through env, traffic through the
// port-forward reaches Envoy and the replicas, and the kube target reads
// the rendered config from the live ConfigMap and the epp's log by
// container.
func TestLLMDRouterOnTheSim(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	k, err := kube.Connect(t.Context(), s.KubeOptions(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	for _, engine := range []string{api.EngineVLLM, api.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			md := llmdMD("llmd-"+strings.ToLower(engine), engine)
			d, err := k.Deploy(ctx, md)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Delete(context.WithoutCancel(ctx)) })
			if err := d.WaitReady(ctx, 100*time.Millisecond); err != nil {
				t.Fatalf("WaitReady: %v\nPods: %s", err, podStates(s, d.Namespace()))
			}
			cfg, err := d.RouterConfig(ctx)
			if err != nil {
				t.Fatalf("RouterConfig: %v", err)
			}
			for _, key := range []string{"epp.yaml", "envoy.yaml", "endpoint-selector", "endpoint-target-ports", "extra-args.json"} {
				if cfg[key] == "" {
					t.Errorf("ConfigMap key %s is empty", key)
				}
			}
			pods, err := d.RouterState(ctx)
			if err != nil || len(pods) != 1 {
				t.Fatalf("router Pods %v %v", pods, err)
			}
			pod, err := s.Kube.CoreV1().Pods(d.Namespace()).Get(ctx, pods[0].Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Containers) != 2 || len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].ConfigMap == nil {
				t.Errorf("router Pod containers %d volumes %+v, want envoy and epp mounting the ConfigMap", len(pod.Spec.Containers), pod.Spec.Volumes)
			}
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if code, err := chat(ctx, base); err != nil || code != http.StatusOK {
					t.Fatalf("request %d through %s: %d %v", i, base, code, err)
				}
			}
			logs, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "epp"})
			if err != nil || !strings.Contains(logs, "Effective raw configuration") {
				t.Errorf("epp log through pods/log: %v\n%s", err, tail(logs, 20))
			}
			reps, err := d.Replicas(ctx)
			if err != nil || len(reps) != 2 {
				t.Fatalf("replicas %v %v", reps, err)
			}
			served := 0.0
			for _, r := range reps {
				snap, err := d.EngineMetrics(ctx, r)
				if err != nil {
					t.Fatalf("engine metrics of %s: %v", r.Name, err)
				}
				for _, name := range []string{"vllm:request_success_total", "sglang:num_requests_total"} {
					n, _ := snap.Sum(name)
					served += n
				}
			}
			if served < 4 {
				t.Errorf("the replicas counted %v requests, want the 4 sent through llm-d-router", served)
			}
		})
	}
}

// podStates describes the Pods of ns for a failure message: phase and each
// container's state.
func podStates(s *stack.Stack, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := s.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		line := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			state := "running"
			switch {
			case c.State.Waiting != nil:
				state = c.State.Waiting.Reason + " " + c.State.Waiting.Message
			case c.State.Terminated != nil:
				state = fmt.Sprintf("exited %d", c.State.Terminated.ExitCode)
			}
			line += fmt.Sprintf(" [%s ready=%t restarts=%d %s]", c.Name, c.Ready, c.RestartCount, state)
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}
