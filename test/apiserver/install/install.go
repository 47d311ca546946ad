// Package install puts on an API server what gpustack-operator and Kueue would
// have installed for the suite: the ModelDeployment and InstanceType CRDs with
// the operator's schema, Kueue's LocalQueue CRD, and one accelerated, Active
// InstanceType. The operator's objects are YAML data under manifests/, written
// by this project from the facts docs/operator.md records, each citing its
// source. Kueue's CRD is Kueue's own file, read from the sigs.k8s.io/kueue
// module this module requires (go.mod pins its version, go.sum its hash), so
// no copy of it lives here.
package install

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// Manifest files, in install order.
const (
	ModelDeploymentCRD = "manifests/modeldeployments.yaml"
	InstanceTypeCRD    = "manifests/instancetypes.yaml"
	SimInstanceType    = "manifests/instancetype-sim-gpu.yaml"
)

// LocalQueueCRD names Kueue's LocalQueue CRD: a file of the KueueModule.
// It serves v1beta1 and v1beta2 (storage); without Kueue's conversion
// webhook the API server converts between them by apiVersion alone, which is
// all the tier needs: the kube target creates LocalQueues and the operator's
// Pods name them.
const (
	KueueModule   = "sigs.k8s.io/kueue"
	LocalQueueCRD = "config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml"
)

// CRDs lists the CustomResourceDefinitions All installs: the embedded
// manifests, then LocalQueueCRD.
var CRDs = []string{ModelDeploymentCRD, InstanceTypeCRD, LocalQueueCRD}

// establishTimeout bounds the wait for a CRD to be served; the API server
// establishes one in well under a second.
const establishTimeout = 30 * time.Second

var (
	gvrCRD          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrInstanceType = schema.GroupVersionResource{Group: "worker.gpustack.ai", Version: "v1alpha1", Resource: "instancetypes"}
)

// Read decodes one embedded manifest, or LocalQueueCRD from the Kueue module.
func Read(name string) (*unstructured.Unstructured, error) {
	var b []byte
	var err error
	if name == LocalQueueCRD {
		b, err = ReadModuleFile(KueueModule, name)
	} else {
		b, err = manifests.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// All installs the CRDs, then the InstanceType, and returns the InstanceType
// as the API server stored it.
func All(ctx context.Context, cfg *rest.Config) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, name := range CRDs {
		if err := installCRD(ctx, dyn, name); err != nil {
			return nil, err
		}
	}
	return installInstanceType(ctx, dyn)
}

// installCRD creates the CRD in file name and waits until it is Established.
func installCRD(ctx context.Context, dyn dynamic.Interface, name string) error {
	crd, err := Read(name)
	if err != nil {
		return err
	}
	res := dyn.Resource(gvrCRD)
	if _, err := res.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s from %s: %w", crd.GetName(), name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := res.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return established(got), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not Established: %w", crd.GetName(), err)
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// installInstanceType creates the InstanceType and then writes its status
// through the status subresource: a create ignores status, as it does for
// the operator's own objects.
func installInstanceType(ctx context.Context, dyn dynamic.Interface) (*unstructured.Unstructured, error) {
	it, err := Read(SimInstanceType)
	if err != nil {
		return nil, err
	}
	status, _, _ := unstructured.NestedMap(it.Object, "status")
	res := dyn.Resource(gvrInstanceType)
	created, err := res.Create(ctx, it, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create InstanceType %s: %w", it.GetName(), err)
	}
	if err := unstructured.SetNestedMap(created.Object, status, "status"); err != nil {
		return nil, err
	}
	updated, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("write status of InstanceType %s: %w", it.GetName(), err)
	}
	return updated, nil
}

// Module is a required module as `go mod download -json` reports it.
type Module struct {
	Path    string
	Version string
	Dir     string
	Sum     string
	Error   string
}

// DownloadModule asks the go command where the module path is, at the
// version this module's go.mod requires, checked against go.sum. It reads
// the module cache only (GOPROXY=off: the tier runs in a namespace without a
// network); building this module's tests, which import the module, put it
// there.
func DownloadModule(path string) (Module, error) {
	cmd := exec.Command(goCommand(), "mod", "download", "-json", path)
	cmd.Dir = moduleDir()
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	var m Module
	if jerr := json.Unmarshal(out, &m); jerr != nil {
		return m, fmt.Errorf("go mod download %s: %v (%v)", path, err, jerr)
	}
	if m.Error != "" || err != nil {
		return m, fmt.Errorf("go mod download %s: %s %v", path, m.Error, err)
	}
	return m, nil
}

// ReadModuleFile reads name inside the required module path.
func ReadModuleFile(path, name string) ([]byte, error) {
	m, err := DownloadModule(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", path, m.Version, err)
	}
	return b, nil
}

// goCommand is the go command that runs the tests ($GOROOT/bin/go), else
// the one on PATH.
func goCommand() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

// moduleDir is this module's root: the go command resolves the required
// version there. A test runs in its package's directory, below it.
func moduleDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/gpustack/routing-conformance/test/apiserver\n") {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
