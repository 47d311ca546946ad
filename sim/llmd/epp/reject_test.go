package epp_test

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/llmd/epp"
	"github.com/gpustack/routing-conformance/sim/llmd/llmdtest"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// runEPP runs the program with argv and a mounted epp.yaml and returns its
// exit code and stderr once it exits (or fails the test after 5 s).
func runEPP(t *testing.T, args []string, config string, env map[string]string) (int, string) {
	t.Helper()
	files := llmdtest.Files(map[string]string{"config/epp.yaml": config})
	if env == nil {
		env = map[string]string{"POD_NAME": "qwen-router-7d9f8-abcde", "NAMESPACE": "team-a"}
	}
	c, _, errw := llmdtest.Container(newIP(), "qwen-router-7d9f8-abcde", args, env)
	r := llmdtest.Run(epp.Main(epp.Deps{
		Files: func(*proc.Container) fs.FS { return files },
		Pods:  func(*proc.Container) datalayer.PodSource { return llmdtest.NewPods() },
	}), c)
	code, ok := r.Wait(5 * time.Second)
	if !ok {
		r.Stop()
		t.Fatalf("epp kept running; stderr:\n%s", errw.String())
	}
	return code, errw.String()
}

var operatorArgs = []string{
	"--endpoint-selector=" + llmdtest.Selector("qwen"), "--endpoint-target-ports=8000",
	"--config-file=/config/epp.yaml", "--secure-serving=false", "--grpc-health-port=9003", "--metrics-endpoint-auth=false",
}

func lastError(t *testing.T, stderr string) map[string]any {
	t.Helper()
	for _, l := range logLines(t, stderr) {
		if l["level"] == "error" {
			return l
		}
	}
	t.Fatalf("no error line in:\n%s", stderr)
	return nil
}

func TestRejectedConfigStopsWithTheLoadersError(t *testing.T) {
	good, err := os.ReadFile("testdata/sglang-server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, config, msg, err string
	}{
		{"unknown plugin type", strings.Replace(string(good), "type: queue-scorer", "type: queue-scorrer", 1),
			"Failed to parse configuration",
			"failed to load the configuration - configuration validation failed: plugin type 'queue-scorrer' is not registered"},
		{"unknown profile plugin ref", strings.Replace(string(good), "pluginRef: server-pods", "pluginRef: decode-pods", 1),
			"Failed to parse configuration",
			"failed to load the configuration - configuration validation failed: scheduling profile validation failed: schedulingProfiles[server] references undefined plugin 'decode-pods'"},
		{"bad weight", strings.Replace(string(good), "weight: 2", "weight: heavy", 1),
			"Failed to parse configuration", "failed to parse config - failed to decode configuration JSON/YAML: "},
		{"unknown field", string(good) + "scorers: []\n",
			"Failed to parse configuration", `failed to parse config - failed to decode configuration JSON/YAML: strict decoding error: unknown field "scorers"`},
		{"unknown scorer parameter", strings.Replace(string(good), "- type: prefix-cache-scorer", "- type: prefix-cache-scorer\n  parameters: {matchLengthWieght: 1}", 1),
			"Failed to parse configuration",
			`failed to load the configuration - plugin instantiation failed: failed to create plugin 'prefix-cache-scorer' (type: prefix-cache-scorer): failed to decode prefix cache scorer parameters: json: unknown field "matchLengthWieght"`},
		{"registered type the sim does not emulate", strings.Replace(string(good), "- type: queue-scorer", "- type: queue-scorer\n- type: multicluster-queue-scorer", 1),
			"Failed to parse configuration",
			`failed to load the configuration - plugin instantiation failed: failed to create plugin 'multicluster-queue-scorer' (type: multicluster-queue-scorer): plugin type "multicluster-queue-scorer" is registered in llm-d-router v0.10.0 but not emulated by the sim`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runEPP(t, operatorArgs, tc.config, nil)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (Run's error); stderr:\n%s", code, stderr)
			}
			e := lastError(t, stderr)
			if e["msg"] != tc.msg || !strings.HasPrefix(e["error"].(string), tc.err) || e["logger"] != "setup" {
				t.Fatalf("error line %v\nwant msg %q error starting %q", e, tc.msg, tc.err)
			}
			if strings.Contains(stderr, "Controller manager starting") {
				t.Fatal("a rejected config must not start the EPP")
			}
		})
	}
}

func TestFlagErrorsUseTheEPPsTextAndExitCodes(t *testing.T) {
	good, _ := os.ReadFile("testdata/sglang-server.yaml")
	t.Run("unknown flag exits 2 with pflag's usage and error", func(t *testing.T) {
		code, stderr := runEPP(t, append(append([]string{}, operatorArgs...), "--poll-interval=5"), string(good), nil)
		if code != 2 || !strings.Contains(stderr, "Usage of epp:\n") || !strings.HasSuffix(stderr, "unknown flag: --poll-interval\n") {
			t.Fatalf("exit %d stderr:\n%s", code, stderr)
		}
	})
	t.Run("config-file and config-text together", func(t *testing.T) {
		code, stderr := runEPP(t, append(append([]string{}, operatorArgs...), "--config-text=plugins: []"), string(good), nil)
		e := lastError(t, stderr)
		if code != 1 || e["msg"] != "Failed to validate flags" || e["error"] != `both the "config-file" and "config-text" flags cannot be set at the same time` {
			t.Fatalf("exit %d line %v", code, e)
		}
	})
	t.Run("deprecated metric flag is rejected", func(t *testing.T) {
		code, stderr := runEPP(t, append(append([]string{}, operatorArgs...), "--kv-cache-usage-percentage-metric=x"), string(good), nil)
		e := lastError(t, stderr)
		if code != 1 || !strings.Contains(stderr, "Flag --kv-cache-usage-percentage-metric has been deprecated, use engineConfigs in EndpointPickerConfig instead\n") ||
			e["error"] != `flag "kv-cache-usage-percentage-metric" is deprecated and cannot be used; configure metrics via engineConfigs in EndpointPickerConfig instead` {
			t.Fatalf("exit %d stderr:\n%s", code, stderr)
		}
	})
	t.Run("invalid selector exits 1 silently after the build line", func(t *testing.T) {
		args := append([]string{"--endpoint-selector=a=b=c"}, operatorArgs[1:]...)
		code, stderr := runEPP(t, args, string(good), nil)
		lines := logLines(t, stderr)
		if code != 1 || len(lines) != 1 || lines[0]["msg"] != "GIE build" {
			t.Fatalf("exit %d stderr:\n%s", code, stderr)
		}
	})
	t.Run("missing POD_NAME", func(t *testing.T) {
		code, stderr := runEPP(t, operatorArgs, string(good), map[string]string{"NAMESPACE": "team-a"})
		e := lastError(t, stderr)
		if code != 1 || e["msg"] != "Failed to extract GKNN" || e["error"] != "failed to get environment variable POD_NAME" {
			t.Fatalf("exit %d line %v", code, e)
		}
	})
	t.Run("missing config file", func(t *testing.T) {
		args := append(append([]string{}, operatorArgs[:2]...), "--config-file=/config/nope.yaml")
		code, stderr := runEPP(t, args, string(good), nil)
		e := lastError(t, stderr)
		if code != 1 || e["error"] != "failed to load config from a file '/config/nope.yaml' - open /config/nope.yaml: no such file or directory" {
			t.Fatalf("exit %d line %v", code, e)
		}
	})
}
