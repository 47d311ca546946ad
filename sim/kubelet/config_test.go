package kubelet

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/proc"
)

func TestExpandVarsFollowsKubernetesExpansion(t *testing.T) {
	env := map[string]string{"A": "x", "EMPTY": "", "SEL": "a=b,!c"}
	for in, want := range map[string]string{
		"--endpoint-selector=$(SEL)": "--endpoint-selector=a=b,!c",
		"$(A)$(A)":                   "xx",
		"$(MISSING)":                 "$(MISSING)",
		"$$(A)":                      "$(A)",
		"$$":                         "$",
		"cost $5":                    "cost $5",
		"tail $":                     "tail $",
		"$(A":                        "$(A",
		"[$(EMPTY)]":                 "[]",
		"plain":                      "plain",
	} {
		if got := ExpandVars(in, env); got != want {
			t.Errorf("ExpandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

// seen records what each start of a container saw.
type seen struct {
	mu    sync.Mutex
	args  [][]string
	env   []map[string]string
	files []string
}

func (s *seen) main(ctx context.Context, c *proc.Container) int {
	var file string
	if c.Files != nil {
		b, _ := fs.ReadFile(c.Files, "config/epp.yaml")
		file = string(b)
	}
	s.mu.Lock()
	s.args = append(s.args, c.Args)
	s.env = append(s.env, c.Env)
	s.files = append(s.files, file)
	s.mu.Unlock()
	<-ctx.Done()
	return 0
}

func (s *seen) starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.args)
}

func TestContainerStartsWithConfigMapEnvDownwardAPIExpandedArgsAndMountedFiles(t *testing.T) {
	var mu sync.Mutex
	cms := map[string]map[string]string{}
	k := newKubelet(t, Options{BackoffInitial: 10 * time.Millisecond, ConfigMaps: func(ns, name string) (map[string]string, bool) {
		mu.Lock()
		defer mu.Unlock()
		d, ok := cms[ns+"/"+name]
		return d, ok
	}})
	var s seen
	spec := PodSpec{Name: "r-abc-xyz", Namespace: "ns", Containers: []ContainerSpec{{
		Name: "epp", Main: s.main, Args: []string{"--endpoint-selector=$(ENDPOINT_SELECTOR)", "--pod=$(POD_NAME)", "--x=$(UNSET)"},
		EnvFrom: []EnvSource{
			{Name: "ENDPOINT_SELECTOR", ConfigMap: "md-router", Key: "endpoint-selector"},
			{Name: "POD_NAME", FieldPath: "metadata.name"},
			{Name: "NAMESPACE", FieldPath: "metadata.namespace"},
		},
		Mounts: []ConfigMapMount{{Path: "/config", ConfigMap: "md-router"}},
	}}}
	if _, err := k.Create(spec); err != nil {
		t.Fatal(err)
	}
	// Without the ConfigMap the container waits in CreateContainerConfigError.
	eventually(t, 5*time.Second, "CreateContainerConfigError", func() bool {
		st, _ := k.Get("ns", "r-abc-xyz")
		cs, _ := st.Container("epp")
		return cs.Waiting == ReasonCreateContainerConfigError
	})
	if s.starts() != 0 {
		t.Fatal("a container whose ConfigMap is missing must not start")
	}
	var failed bool
	for _, e := range k.Events("ns", "r-abc-xyz") {
		failed = failed || (e.Reason == "Failed" && strings.Contains(e.Message, `configmap "md-router" not found`))
	}
	if !failed {
		t.Fatalf("no Failed event naming the ConfigMap: %+v", k.Events("ns", "r-abc-xyz"))
	}
	mu.Lock()
	cms["ns/md-router"] = map[string]string{"endpoint-selector": "app=x,!r", "epp.yaml": "kind: EndpointPickerConfig\n"}
	mu.Unlock()
	eventually(t, 5*time.Second, "start once the ConfigMap exists", func() bool { return s.starts() == 1 })
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := strings.Join(s.args[0], " "); got != "--endpoint-selector=app=x,!r --pod=r-abc-xyz --x=$(UNSET)" {
		t.Errorf("args %q", got)
	}
	if s.env[0]["NAMESPACE"] != "ns" || s.env[0]["POD_NAME"] != "r-abc-xyz" {
		t.Errorf("downward API env %v", s.env[0])
	}
	if s.files[0] != "kind: EndpointPickerConfig\n" {
		t.Errorf("mounted /config/epp.yaml = %q", s.files[0])
	}
	st, _ := k.Get("ns", "r-abc-xyz")
	if cs, _ := st.Container("epp"); cs.RestartCount != 0 || cs.Waiting != "" {
		t.Errorf("waiting for config is not a restart: %+v", cs)
	}
}
