package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/operator"
)

// The server speaks TLS with a certificate its CA bundle verifies, and
// answers an AdmissionReview with the request's UID.
func TestServerAnswersReviewsOverTLSWithItsCA(t *testing.T) {
	s, err := Serve()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CABundle) {
		t.Fatal("CABundle holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
		UID: types.UID("review-1"), Operation: admissionv1.Create, Object: raw(t, Probe("p", "sim-gpu", "--port", "1")),
	}}
	review.APIVersion, review.Kind = "admission.k8s.io/v1", "AdmissionReview"
	body, _ := json.Marshal(review)
	resp, err := client.Post(s.URL+ValidatePath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", ValidatePath, err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != "review-1" || out.Response.Allowed || out.Kind != "AdmissionReview" {
		t.Errorf("response %+v", out)
	}
}

func TestValidateRefusesWithTheOperatorsInvalidStatus(t *testing.T) {
	resp := validate(&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, Probe("p", "sim-gpu", "--port=9"))})
	if resp.Allowed || resp.Result == nil {
		t.Fatalf("--port admitted: %+v", resp)
	}
	// The operator's text exactly: the bad value, then its refusal.
	want := `ModelDeployment.worker.gpustack.ai "p" is invalid: spec.router.extraArgs[0]: Invalid value: "--port=9": ` +
		operator.RouterRefusal("--port", api.RouterVLLM)
	if resp.Result.Message != want || resp.Result.Code != http.StatusUnprocessableEntity {
		t.Errorf("result %d %q, want 422 %q", resp.Result.Code, resp.Result.Message, want)
	}
	if c := resp.Result.Details.Causes; len(c) != 1 || c[0].Field != "spec.router.extraArgs[0]" {
		t.Errorf("causes %+v", c)
	}

	if resp := validate(&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, Probe("p", "sim-gpu", "--policy", "random"))}); !resp.Allowed {
		t.Errorf("a valid object was refused: %+v", resp.Result)
	}
}

// An update is checked against the old object: the router name is frozen.
func TestValidateUpdateSeesTheOldObject(t *testing.T) {
	old := Probe("p", "sim-gpu")
	renamed := Probe("p", "sim-gpu")
	unstructured.SetNestedField(renamed.Object, api.RouterLLMD, "spec", "router", "name")
	resp := validate(&admissionv1.AdmissionRequest{Operation: admissionv1.Update, Object: raw(t, renamed), OldObject: raw(t, old)})
	if resp.Allowed || !strings.Contains(resp.Result.Message, `spec.router.name: Invalid value: "llm-d-router": field is immutable`) {
		t.Errorf("router rename: %+v", resp.Result)
	}
}

// The sim's Required refusals stay Required errors.
func TestValidateKeepsRequiredRefusals(t *testing.T) {
	md := Probe("p", "sim-gpu")
	unstructured.RemoveNestedField(md.Object, "spec", "engine", "version")
	resp := validate(&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, md)})
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.engine.version: Required value: role \"server\" names no image") {
		t.Errorf("empty engine version: %+v", resp.Result)
	}
}

func TestMutatePatchesOnlyTheAcceleratorDefault(t *testing.T) {
	md := Probe("p", "sim-gpu")
	roles, _, _ := unstructured.NestedSlice(md.Object, "spec", "roles")
	roles = append(roles,
		map[string]any{"name": "second", "instanceType": "sim-gpu", "resources": map[string]any{}},
		map[string]any{"name": "third", "instanceType": "sim-gpu", "resources": map[string]any{"accelerator": int64(0)}},
	)
	unstructured.SetNestedSlice(md.Object, roles, "spec", "roles")
	resp := mutate(&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, md)})
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v", resp)
	}
	want := `[{"op":"add","path":"/spec/roles/0/resources","value":{"accelerator":"1"}},` +
		`{"op":"add","path":"/spec/roles/1/resources/accelerator","value":"1"}]`
	if string(resp.Patch) != want {
		t.Errorf("patch %s\nwant  %s", resp.Patch, want)
	}
}

func TestMutateLeavesAnExplicitCountAlone(t *testing.T) {
	md := Probe("p", "sim-gpu")
	roles, _, _ := unstructured.NestedSlice(md.Object, "spec", "roles")
	roles[0].(map[string]any)["resources"] = map[string]any{"accelerator": "2"}
	unstructured.SetNestedSlice(md.Object, roles, "spec", "roles")
	if resp := mutate(&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, md)}); !resp.Allowed || resp.Patch != nil {
		t.Errorf("response %+v, want allowed without a patch", resp)
	}
}

func TestUnreadableObjectIsRefusedWithTheReason(t *testing.T) {
	resp := validate(&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: rawBytes(`{"spec": 7}`)})
	if resp.Allowed || !strings.HasPrefix(resp.Result.Message, "sim operator webhook: decode ModelDeployment") {
		t.Errorf("response %+v", resp.Result)
	}
}

func raw(t *testing.T, u *unstructured.Unstructured) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return rawBytes(string(b))
}

func rawBytes(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
