// Package webhook serves the sim operator's admission (package
// sim/operator) as real Kubernetes admission webhooks, over TLS with
// a test CA, and registers them with an API server. The API server then
// calls the sim's rules the way it calls gpustack-operator's, and wraps their
// refusals in its own message ("admission webhook ... denied the request:").
//
// Shape of the registration (names, paths, failure and match policy, side
// effects, timeout, review versions) follows the operator's generated webhook
// configurations (gpustack/gpustack-operator
// @106c5d49bc706a835dff185b84cd78c40157ff96:pkg/worker/webhooks/worker/zz_generated.webhooks.go)
// and the markers on its ModelDeploymentWebhook
// (pkg/worker/webhooks/worker/model_deployment.go: CREATE and UPDATE,
// failurePolicy Fail, sideEffects None, matchPolicy Equivalent, timeout 10 s).
package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/gpustack/routing-conformance/sim/apiserver/testca"
)

// Webhook paths, in the operator's generated form
// (/<validate|mutate>-<group with dashes>-<version>-<resource>).
const (
	ValidatePath = "/validate-worker-gpustack-ai-v1alpha1-modeldeployment"
	MutatePath   = "/mutate-worker-gpustack-ai-v1alpha1-modeldeployment"
)

// maxReviewBytes bounds one AdmissionReview body; a ModelDeployment with its
// old object is a few kilobytes.
const maxReviewBytes = 3 << 20

// Server is the sim operator's admission served over HTTPS on loopback.
type Server struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:41234.
	URL string
	// CABundle is the PEM CA that signed the serving certificate.
	CABundle []byte

	srv  *http.Server
	done chan error
}

// Serve starts the webhook server on a free port of 127.0.0.1 with a fresh
// test CA. Close stops it.
func Serve() (*Server, error) {
	ip := net.IPv4(127, 0, 0, 1)
	ca, err := testca.New("sim operator webhook", ip)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return nil, fmt.Errorf("webhook listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+ValidatePath, reviewHandler(validate))
	mux.Handle("POST "+MutatePath, reviewHandler(mutate))
	s := &Server{
		URL:      "https://" + ln.Addr().String(),
		CABundle: ca.CABundle,
		srv: &http.Server{
			Handler:           mux,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{ca.Serving}, MinVersion: tls.VersionTLS12},
			ReadHeaderTimeout: 10 * time.Second,
		},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.ServeTLS(ln, "", "") }()
	return s, nil
}

// Close stops the server, waiting up to five seconds for reviews in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// reviewHandler decodes an AdmissionReview, answers it with review and writes
// the response review back with the request's UID.
func reviewHandler(review func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
		if err != nil {
			http.Error(w, "read AdmissionReview: "+err.Error(), http.StatusBadRequest)
			return
		}
		var in admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
			http.Error(w, fmt.Sprintf("decode AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		resp := review(in.Request)
		resp.UID = in.Request.UID
		out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&out); err != nil {
			http.Error(w, "encode AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		}
	})
}
