package install

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/config"
)

// The LocalQueue CRD is Kueue's file unchanged below the header.
func TestLocalQueueCRDIsKueuesFile(t *testing.T) {
	b, err := manifests.ReadFile(LocalQueueCRD)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("\n---\n"))
	if i < 0 {
		t.Fatal("no --- line after the header")
	}
	sum := sha256.Sum256(b[i+1:])
	const want = "5c5768caeb499bb869bb8f90e4f5293170b183a4a74b618f1f182264d9ce4437"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("sha256 of the copied kueue.x-k8s.io_localqueues.yaml = %s, want %s (sigs.k8s.io/kueue@v0.17.0)", got, want)
	}
}

// The ModelDeployment schema spells its enums as the suite's api package does,
// so the objects the suite writes are the ones the schema admits.
func TestModelDeploymentEnumsMatchTheSuitesAPI(t *testing.T) {
	crd, err := Read(ModelDeploymentCRD)
	if err != nil {
		t.Fatal(err)
	}
	spec := "spec.versions.0.schema.openAPIV3Schema.properties.spec.properties."
	for path, want := range map[string][]string{
		spec + "engine.properties.name.enum":                                 api.Engines,
		spec + "router.properties.name.enum":                                 api.Routers,
		spec + "roles.items.properties.kind.enum":                            api.RoleKinds,
		spec + "roles.items.properties.ports.items.properties.protocol.enum": {"TCP", "UDP", "SCTP"},
	} {
		if got := stringsAt(t, crd, path); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	if crd.GetName() != api.Resource+"."+api.Group {
		t.Errorf("CRD name %q, want %s.%s", crd.GetName(), api.Resource, api.Group)
	}
}

// status.entrance is the operator's LocalQueue name for the InstanceType's
// ClusterQueue: "gpustack-fnv64-" and the FNV-64a of the name in 16 hex digits.
func TestInstanceTypeEntranceIsTheOperatorsQueueName(t *testing.T) {
	it, err := Read(SimInstanceType)
	if err != nil {
		t.Fatal(err)
	}
	if it.GetName() != config.SimInstanceType {
		t.Errorf("InstanceType %q, want the sim's %q", it.GetName(), config.SimInstanceType)
	}
	h := fnv.New64a()
	h.Write([]byte(it.GetName()))
	want := fmt.Sprintf("gpustack-fnv64-%016x", h.Sum64())
	got, _, _ := unstructured.NestedString(it.Object, "status", "entrance")
	if got != want || len(got) != 31 {
		t.Errorf("status.entrance = %q, want %q (31 characters)", got, want)
	}
	if accel, _, _ := unstructured.NestedBool(it.Object, "spec", "acceleratable"); !accel {
		t.Error("spec.acceleratable is not true")
	}
	if phase, _, _ := unstructured.NestedString(it.Object, "status", "phase"); phase != "Active" {
		t.Errorf("status.phase = %q, want Active", phase)
	}
}

// stringsAt reads a []string at a dotted path whose numeric parts index lists.
func stringsAt(t *testing.T, u *unstructured.Unstructured, path string) []string {
	t.Helper()
	var cur any = u.Object
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[part]
		case []any:
			var i int
			if _, err := fmt.Sscan(part, &i); err != nil || i >= len(c) {
				t.Fatalf("%s: bad index %q", path, part)
			}
			cur = c[i]
		default:
			t.Fatalf("%s: nothing at %q", path, part)
		}
	}
	list, _ := cur.([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, fmt.Sprint(v))
	}
	return out
}
