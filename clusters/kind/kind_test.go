package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/clusters/kube"
)

// No Docker here, so no test creates a cluster. Fake docker, kind and helm
// binaries (shell scripts) record their argv; e2e-framework's kind support
// runs the fake kind exactly as it would run the real one.

type fakeTools struct {
	dir, log, state string
}

const fakeKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: kind-x, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: kind-x, user: {token: test}}]
contexts: [{name: kind-x, context: {cluster: kind-x, user: kind-x}}]
current-context: kind-x
`

// newFakeTools writes docker, kind and helm into a fresh dir. dockerDown makes
// `docker info` fail as with a stopped daemon; helmFails makes helm fail.
func newFakeTools(t *testing.T, dockerDown, helmFails bool, existing ...string) *fakeTools {
	t.Helper()
	f := &fakeTools{dir: t.TempDir()}
	f.log = filepath.Join(f.dir, "calls.log")
	f.state = filepath.Join(f.dir, "clusters")
	if err := os.WriteFile(f.state, []byte(strings.Join(existing, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(f.dir, "kubeconfig.fixture")
	if err := os.WriteFile(kc, []byte(fakeKubeconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	dockerExit := "0"
	if dockerDown {
		dockerExit = "1"
	}
	helmExit := "0"
	if helmFails {
		helmExit = "1"
	}
	scripts := map[string]string{
		"docker": fmt.Sprintf(`#!/bin/sh
echo "docker $*" >> %[1]s
if [ %[2]s -ne 0 ]; then echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1; fi
echo 28.2.2
`, f.log, dockerExit),
		"kind": fmt.Sprintf(`#!/bin/sh
echo "kind $*" >> %[1]s
case "$1 $2" in
"get clusters") grep -v '^$' %[2]s || true ;;
"create cluster") echo "$4" >> %[2]s; echo "Creating cluster \"$4\" ..." >&2 ;;
"get kubeconfig") cat %[3]s ;;
"delete cluster") grep -v "^$4\$" %[2]s > %[2]s.tmp; mv %[2]s.tmp %[2]s ;;
*) echo "unknown command $*" >&2; exit 2 ;;
esac
`, f.log, f.state, kc),
		"helm": fmt.Sprintf(`#!/bin/sh
echo "helm $*" >> %[1]s
if [ %[2]s -ne 0 ]; then echo "Release \"gpustack-operator\" does not exist. Installing it now." >&2; echo "Error: INSTALLATION FAILED: context deadline exceeded" >&2; exit 1; fi
`, f.log, helmExit),
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", f.dir+":/usr/bin:/bin")
	return f
}

func (f *fakeTools) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return out
}

func (f *fakeTools) called(t *testing.T, prefix string) bool {
	for _, c := range f.calls(t) {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// noPreflight stands in for the kube preflight (there is no API server).
func noPreflight(t *testing.T, err error) {
	old := preflightFunc
	preflightFunc = func(context.Context, *kube.Cluster, time.Duration) error { return err }
	t.Cleanup(func() { preflightFunc = old })
}

func kindConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "kind-config.yaml")
	if err := os.WriteFile(p, []byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCreateRunsKindAndHelmThenDeletesOnClose(t *testing.T) {
	f := newFakeTools(t, false, false)
	noPreflight(t, nil)
	cfg := kindConfig(t)
	c, err := Create(context.Background(), Options{
		Name: "rc-test", Config: cfg, NodeImage: "kindest/node:v1.35.0",
		Chart: "oci://ghcr.io/gpustack/charts/gpustack-operator", ChartVersion: "0.9.0",
		HelmSet: []string{"image.tag=dev"}, Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := "kind create cluster --name rc-test --config " + cfg + " --image kindest/node:v1.35.0"
	if !f.called(t, want) {
		t.Errorf("no %q in\n%s", want, strings.Join(f.calls(t), "\n"))
	}
	helm := "helm upgrade --install gpustack-operator oci://ghcr.io/gpustack/charts/gpustack-operator --namespace gpustack-system --create-namespace --kubeconfig " +
		c.Kubeconfig() + " --wait --timeout 10m0s --version 0.9.0 --set image.tag=dev"
	if !f.called(t, helm) {
		t.Errorf("no %q in\n%s", helm, strings.Join(f.calls(t), "\n"))
	}
	if b, err := os.ReadFile(c.Kubeconfig()); err != nil || !strings.Contains(string(b), "127.0.0.1:6443") {
		t.Errorf("kubeconfig %s: %v", c.Kubeconfig(), err)
	}
	if c.RESTConfig() == nil || c.RESTConfig().Host != "https://127.0.0.1:6443" {
		t.Errorf("the kube target does not use the kind kubeconfig: %+v", c.RESTConfig())
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !f.called(t, "kind delete cluster --name rc-test") {
		t.Errorf("cluster not deleted:\n%s", strings.Join(f.calls(t), "\n"))
	}
}

func TestKeepClusterSkipsTheDelete(t *testing.T) {
	f := newFakeTools(t, false, false)
	noPreflight(t, nil)
	c, err := Create(context.Background(), Options{Name: "rc-keep", Chart: "./chart", Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.called(t, "kind delete") {
		t.Error("Keep is set but the cluster was deleted")
	}
}

func TestAnExistingClusterIsReusedAndNeverDeleted(t *testing.T) {
	f := newFakeTools(t, false, false, "rc-mine")
	noPreflight(t, nil)
	c, err := Create(context.Background(), Options{Name: "rc-mine", Chart: "./chart"})
	if err != nil {
		t.Fatal(err)
	}
	if f.called(t, "kind create") {
		t.Error("created a cluster that already existed")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.called(t, "kind delete") {
		t.Error("deleted a cluster this run did not create")
	}
}

func TestHelmFailureNamesTheErrorAndRemovesTheCluster(t *testing.T) {
	f := newFakeTools(t, false, true)
	noPreflight(t, nil)
	_, err := Create(context.Background(), Options{Name: "rc-h", Chart: "/charts/gpustack-operator"})
	if err == nil {
		t.Fatal("Create succeeded with a failing helm")
	}
	msg := err.Error()
	for _, w := range []string{"helm install of /charts/gpustack-operator failed", "INSTALLATION FAILED: context deadline exceeded", "rerun by hand: helm upgrade --install"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q lacks %q", msg, w)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("multi-line error: %q", msg)
	}
	if !f.called(t, "kind delete cluster --name rc-h") {
		t.Error("the half-made cluster was left behind")
	}
}

func TestPreflightFailureAfterInstallRemovesTheCluster(t *testing.T) {
	f := newFakeTools(t, false, false)
	noPreflight(t, errors.New("preflight: the operator's admission webhook is not answering"))
	_, err := Create(context.Background(), Options{Name: "rc-p", Chart: "./chart"})
	if err == nil || !strings.Contains(err.Error(), "webhook is not answering") {
		t.Fatalf("Create = %v", err)
	}
	if !f.called(t, "kind delete cluster --name rc-p") {
		t.Error("cluster left behind")
	}
}

func TestMissingToolsAreOneClearLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove string
		opts   Options
		wants  []string
	}{
		{"docker missing", "docker", Options{Chart: "c"}, []string{"kind target needs docker", "not found in PATH", "E2E_TARGET=kube"}},
		{"kind missing", "kind", Options{Chart: "c"}, []string{"needs the kind binary", "go install sigs.k8s.io/kind@v0.33.0"}},
		{"helm missing", "helm", Options{Chart: "c"}, []string{"needs helm", "install Helm 3"}},
		{"explicit path missing", "", Options{Chart: "c", KindPath: "/nowhere/kind"}, []string{"kind not found at /nowhere/kind"}},
		{"no chart", "", Options{}, []string{"no operator chart", "E2E_OPERATOR_CHART"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTools(t, false, false)
			if tc.remove != "" {
				if err := os.Remove(filepath.Join(f.dir, tc.remove)); err != nil {
					t.Fatal(err)
				}
			}
			noPreflight(t, nil)
			_, err := Create(context.Background(), tc.opts)
			if err == nil {
				t.Fatal("Create succeeded")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line: %q", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if f.called(t, "kind create") {
				t.Error("went on to create a cluster")
			}
		})
	}
}

func TestDockerDaemonDownIsOneClearLine(t *testing.T) {
	f := newFakeTools(t, true, false)
	noPreflight(t, nil)
	_, err := Create(context.Background(), Options{Chart: "c"})
	if err == nil || !strings.Contains(err.Error(), "needs a running Docker daemon") || !strings.Contains(err.Error(), "Is the docker daemon running?") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Create = %q", err)
	}
	if f.called(t, "kind create") {
		t.Error("went on to create a cluster")
	}
}

func TestConfigPathWithSpacesIsRefused(t *testing.T) {
	newFakeTools(t, false, false)
	dir := filepath.Join(t.TempDir(), "my configs")
	_ = os.MkdirAll(dir, 0o755)
	cfg := filepath.Join(dir, "kind.yaml")
	_ = os.WriteFile(cfg, []byte("kind: Cluster\n"), 0o644)
	_, err := Create(context.Background(), Options{Chart: "c", Config: cfg})
	if err == nil || !strings.Contains(err.Error(), "contains whitespace") {
		t.Fatalf("Create = %v", err)
	}
}

func TestHelmArgsWithValuesFiles(t *testing.T) {
	got := strings.Join(HelmArgs(Options{Chart: "./chart.tgz", Release: "op", HelmValuesFiles: []string{"a.yaml", "b.yaml"},
		HelmSet: []string{"x=1"}, HelmTimeout: 3 * time.Minute, Kube: kube.Options{OperatorNamespace: "ops"}}, "/tmp/kc"), " ")
	want := "upgrade --install op ./chart.tgz --namespace ops --create-namespace --kubeconfig /tmp/kc --wait --timeout 3m0s -f a.yaml -f b.yaml --set x=1"
	if got != want {
		t.Errorf("helm %s\nwant %s", got, want)
	}
}

func TestShippedKindConfigsAreValid(t *testing.T) {
	for _, f := range []string{"kind-config.yaml", "kind-gpu.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c v1alpha4.Cluster
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if c.Kind != "Cluster" || len(c.Nodes) != 2 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole || c.Nodes[1].Role != v1alpha4.WorkerRole {
			t.Errorf("%s: %+v", f, c)
		}
		if !strings.Contains(c.Nodes[0].KubeadmConfigPatches[0], `enable-aggregator-routing: "true"`) {
			t.Errorf("%s: the aggregator-routing flag the operator's CI sets is missing", f)
		}
	}
	var gpu v1alpha4.Cluster
	b, _ := os.ReadFile("kind-gpu.yaml")
	_ = yaml.Unmarshal(b, &gpu)
	if len(gpu.Nodes[1].ExtraMounts) != 1 || gpu.Nodes[1].ExtraMounts[0].ContainerPath != "/var/run/nvidia-container-devices/all" {
		t.Errorf("kind-gpu.yaml worker mounts %+v", gpu.Nodes[1].ExtraMounts)
	}
}
