package kube

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
)

// Secrets planted in every kind of input an artifact is made from.
var planted = []string{
	"hf_supersecretvalue",              // engine env HF_TOKEN
	"sk-live-0123456789",               // router --api-key in args and logs
	"eyJhbGciOiJSUzI1NiJ9.payload.sig", // bearer token in a log line
	"s3cr3t-pw",                        // DB_PASSWORD in a log line
	"vllm-key-xyz",                     // role env VLLM_API_KEY on the object
}

func TestCollectArtifactsWritesEverythingAndNoSecret(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	md := twoServerMD("md")
	md.Spec.Roles[0].Env = []api.EnvVar{{Name: "VLLM_API_KEY", Value: "vllm-key-xyz"}, {Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}}
	md.Spec.Roles[0].ExtraArgs = []string{"--max-num-batched-tokens", "8192"}
	dep, err := e.cluster.Deploy(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	d := dep.(*Deployment)
	e.setStatus(d.ns, d.name, readyStatus(d.name, true, 2), 0)
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1", crashLooping(2), func(p *corev1.Pod) {
		p.Spec.Containers[0].Args = append(p.Spec.Containers[0].Args, "--api-key", "sk-live-0123456789")
	}))
	e.addPod(enginePod(d.ns, d.name, "md-server-a", "10.0.1.1"))
	e.podAPI.setLog(d.ns, "md-router-a", "router", false, "INFO request Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig\n")
	e.podAPI.setLog(d.ns, "md-router-a", "router", true, "error: invalid value for '--policy'\nstarting with --api-key sk-live-0123456789 DB_PASSWORD=s3cr3t-pw\n")
	e.podAPI.setLog(d.ns, "md-server-a", "main", false, "INFO vLLM API server version 0.29.0\nHF_TOKEN=hf_supersecretvalue\n")
	e.podAPI.setProxy(d.ns, "md-server-a:8000", "/metrics", engineMetrics)
	e.podAPI.setProxy(d.ns, "md-router-a:9090", "/metrics", routerMetricsA)
	_, _ = e.kube.CoreV1().Events(d.ns).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "ev1", Namespace: d.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "md-router-a"},
		Reason:         "BackOff", Type: "Warning", Message: "Back-off restarting failed container router", Count: 4,
		LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})

	dir := filepath.Join(t.TempDir(), "artifacts")
	if err := d.CollectArtifacts(context.Background(), dir); err != nil {
		t.Fatalf("CollectArtifacts: %v", err)
	}
	for _, f := range []string{
		"modeldeployment.yaml", "events.txt",
		"pods/md-router-a.yaml", "pods/md-server-a.yaml",
		"logs/md-router-a/router.log", "logs/md-router-a/router.previous.log", "logs/md-server-a/main.log",
		"metrics/md-server-a.txt",
	} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing artifact %s: %v", f, err)
		}
	}
	all := readTree(t, dir)
	for _, secret := range planted {
		for path, body := range all {
			if strings.Contains(body, secret) {
				t.Errorf("%s leaks %q", path, secret)
			}
		}
	}
	// What must survive redaction for the artifacts to be useful.
	for path, want := range map[string]string{
		"modeldeployment.yaml":                 "phase: Ready",
		"events.txt":                           "Back-off restarting failed container router (x4)",
		"logs/md-router-a/router.previous.log": "invalid value for '--policy'",
		"logs/md-server-a/main.log":            "vLLM API server version 0.29.0",
		"metrics/md-server-a.txt":              "vllm:request_success_total",
		"pods/md-server-a.yaml":                "VLLM_LOGGING_LEVEL",
	} {
		if !strings.Contains(all[path], want) {
			t.Errorf("%s lost %q:\n%s", path, want, all[path])
		}
	}
	// Redaction must leave the YAML parseable, with the secret's place kept.
	for path, body := range all {
		if !strings.HasSuffix(path, ".yaml") {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(body), &obj); err != nil {
			t.Errorf("%s is not YAML after redaction: %v\n%s", path, err, body)
		}
	}
	if !strings.Contains(all["pods/md-router-a.yaml"], "- --api-key\n    - '[REDACTED]'") {
		t.Errorf("router Pod args:\n%s", all["pods/md-router-a.yaml"])
	}
	if !strings.Contains(all["modeldeployment.yaml"], "8192") {
		t.Error("a token count (--max-num-batched-tokens 8192) was redacted as if it were a token")
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRedactText(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{"Authorization: Bearer abc.def", "Authorization: [REDACTED]"},
		{`{"authorization": "Basic dXNlcjpwYXNz"}`, `{"authorization": "[REDACTED]"}`},
		{"curl -H 'authorization: bearer xyz'", "curl -H 'authorization: [REDACTED]'"},
		{"token is Bearer abc123", "token is Bearer [REDACTED]"},
		{"HF_TOKEN=hf_abc other=1", "HF_TOKEN=[REDACTED] other=1"},
		{"AWS_SECRET_ACCESS_KEY='x y'", "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
		{"export OPENAI_API_KEY=sk-1", "export OPENAI_API_KEY=[REDACTED]"},
		{"--api-key sk-1 --port 8000", "--api-key [REDACTED] --port 8000"},
		{"--hf-token=hf_x", "--hf-token=[REDACTED]"},
		{`"api_key": "sk-2"`, `"api_key": "[REDACTED]"`},
		{"password: hunter2", `password: "[REDACTED]"`},
		// Counts that mention tokens are not secrets.
		{"--max-num-batched-tokens 8192", "--max-num-batched-tokens 8192"},
		{`"max_tokens": 16, "prompt_tokens": 20`, `"max_tokens": 16, "prompt_tokens": 20`},
		{"MAX_TOKENS=16", "MAX_TOKENS=16"},
		{"policy: CacheAware { cache_threshold: 0.3 }", "policy: CacheAware { cache_threshold: 0.3 }"},
	} {
		if got := RedactText(tc.in); got != tc.out {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tc.in, got, tc.out)
		}
	}
}

func TestRedactObject(t *testing.T) {
	obj := map[string]any{
		"env": []any{
			map[string]any{"name": "HF_TOKEN", "value": "hf_abc"},
			map[string]any{"name": "DB_PASSWORD", "value": "pw"},
			map[string]any{"name": "VLLM_PORT", "value": "8000"},
			map[string]any{"name": "TOKEN_SECRET", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "hf", "key": "token"}}},
		},
		"args":       []any{"--api-key", "sk-1", "--token=t2", "--max-num-batched-tokens", "8192", "--policy", "round_robin"},
		"secretName": "hf-credentials",
		"apiKey":     "sk-3",
	}
	RedactObject(obj)
	env := obj["env"].([]any)
	if env[0].(map[string]any)["value"] != Redacted || env[1].(map[string]any)["value"] != Redacted {
		t.Errorf("credential env not redacted: %v", env)
	}
	if env[2].(map[string]any)["value"] != "8000" {
		t.Errorf("VLLM_PORT redacted: %v", env[2])
	}
	ref := env[3].(map[string]any)["valueFrom"].(map[string]any)["secretKeyRef"].(map[string]any)
	if ref["name"] != "hf" || ref["key"] != "token" {
		t.Errorf("a Secret reference (no value) was blanked: %v", ref)
	}
	args := obj["args"].([]any)
	want := []any{"--api-key", Redacted, "--token=" + Redacted, "--max-num-batched-tokens", "8192", "--policy", "round_robin"}
	for i := range want {
		if args[i] != want[i] {
			t.Errorf("args[%d] = %v, want %v", i, args[i], want[i])
		}
	}
	if obj["secretName"] != "hf-credentials" || obj["apiKey"] != Redacted {
		t.Errorf("secretName %v apiKey %v", obj["secretName"], obj["apiKey"])
	}
}
