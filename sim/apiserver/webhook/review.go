package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/operator"
)

var groupKind = schema.GroupKind{Group: api.Group, Kind: api.Kind}

// validate answers a CREATE or UPDATE of a ModelDeployment with the sim
// operator's field errors, as the operator's controller-runtime validator
// answers: apierrors.NewInvalid over them (422 Invalid), each with its bad
// value, so the API server's message reads as the operator's
// ("spec.router.extraArgs[0]: Invalid value: \"--port\": ...").
func validate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	md, err := Decode(req.Object.Raw)
	if err != nil {
		return errored(err)
	}
	var old *api.ModelDeployment
	if req.Operation == admissionv1.Update {
		if old, err = Decode(req.OldObject.Raw); err != nil {
			return errored(fmt.Errorf("old object: %w", err))
		}
	}
	errs := operator.FieldErrors(old, md)
	if len(errs) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	st := apierrors.NewInvalid(groupKind, md.Metadata.Name, errs).Status()
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &st}
}

// mutate applies the one default gpustack-operator's mutating webhook owns:
// spec.roles[].resources.accelerator is 1 when a role on an acceleratable
// InstanceType leaves it unset. It takes that default from the sim's Default
// and nothing else of it: the schema defaults (kind, replicas, size, port
// protocol, connector) are the CRD's to apply here, and the sim's Default
// also writes a grace period the real schema does not default. The sim counts
// every named InstanceType as acceleratable; the tier installs only
// acceleratable ones.
func mutate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	md, err := Decode(req.Object.Raw)
	if err != nil {
		return errored(err)
	}
	defaulted := operator.DeepCopy(md)
	operator.Default(defaulted)
	var patch []jsonPatchOp
	for i, role := range md.Spec.Roles {
		after := defaulted.Spec.Roles[i].Resources
		if after == nil || after.Accelerator == "" || (role.Resources != nil && role.Resources.Accelerator != "") {
			continue
		}
		if role.Resources == nil {
			patch = append(patch, jsonPatchOp{Op: "add", Path: fmt.Sprintf("/spec/roles/%d/resources", i),
				Value: map[string]string{"accelerator": after.Accelerator}})
			continue
		}
		patch = append(patch, jsonPatchOp{Op: "add", Path: fmt.Sprintf("/spec/roles/%d/resources/accelerator", i),
			Value: after.Accelerator})
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if len(patch) == 0 {
		return resp
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return errored(err)
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = b, &pt
	return resp
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Decode reads a stored ModelDeployment (JSON) as the sim's types hold it.
// An accelerator count written as a JSON number (the schema takes an
// int-or-string quantity) is read as its decimal string, the form the sim's
// type holds.
func Decode(raw []byte) (*api.ModelDeployment, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode ModelDeployment: %w", err)
	}
	spec, _ := obj["spec"].(map[string]any)
	roles, _ := spec["roles"].([]any)
	for _, r := range roles {
		role, _ := r.(map[string]any)
		res, _ := role["resources"].(map[string]any)
		if n, ok := res["accelerator"].(float64); ok {
			res["accelerator"] = fmt.Sprint(n)
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	md := new(api.ModelDeployment)
	if err := json.Unmarshal(b, md); err != nil {
		return nil, fmt.Errorf("decode ModelDeployment: %w", err)
	}
	return md, nil
}

// errored refuses a review the webhook could not read, naming why.
func errored(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
		Message: "sim operator webhook: " + err.Error(),
	}}
}
