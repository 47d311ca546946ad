package kube

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/clusters"
)

// asAdmissionError turns a refusal of the object itself (the operator's
// validating webhook, or the CRD schema) into *clusters.AdmissionError. Errors
// that are not about the object (webhook unreachable, RBAC, conflicts) are
// returned unchanged so they fail the spec as infrastructure errors.
//
// Message is the server's message verbatim (it contains the webhook's text,
// e.g. `"--port" is set by the operator for router "vllm-router" and must not
// be supplied here, ...`); Field is the first cause that names a field.
func asAdmissionError(err error) error {
	var se apierrors.APIStatus
	if err == nil || !errors.As(err, &se) {
		return err
	}
	st := se.Status()
	if !isObjectRefusal(st) {
		return err
	}
	ae := &clusters.AdmissionError{Message: st.Message}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Field != "" {
				ae.Field = c.Field
				break
			}
		}
	}
	if ae.Message == "" && st.Details != nil && len(st.Details.Causes) > 0 {
		ae.Message = st.Details.Causes[0].Message
	}
	return ae
}

// isObjectRefusal: a webhook denial arrives as the code the webhook chose
// (controller-runtime: 403 Forbidden, field.ErrorList: 422 Invalid, or 400),
// always with "admission webhook ... denied the request". A failure to call
// the webhook is a 500 "failed calling webhook" and is not a refusal.
func isObjectRefusal(st metav1.Status) bool {
	msg := st.Message
	if strings.Contains(msg, "failed calling webhook") {
		return false
	}
	if strings.Contains(msg, "denied the request") {
		return true
	}
	switch st.Reason {
	case metav1.StatusReasonInvalid, metav1.StatusReasonBadRequest:
		return true
	}
	// A Forbidden without "denied the request" is RBAC or a terminating
	// namespace: the environment's fault, not the object's.
	return st.Code == http.StatusUnprocessableEntity
}

// webhookUnreachable reports an error that says the API server could not
// get an answer from an admission webhook.
func webhookUnreachable(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "webhook") &&
		(strings.Contains(msg, "connection refused") || strings.Contains(msg, "no endpoints available") ||
			strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "i/o timeout"))
}
