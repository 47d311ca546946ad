package vllm

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
)

// DefaultMooncakeBootstrapPort is VLLM_MOONCAKE_BOOTSTRAP_PORT's default,
// the port the operator reserves on a vLLM prefiller (docs/operator.md#router-admission-rules).
const DefaultMooncakeBootstrapPort = 8998

// mooncakeProducer reports whether --kv-transfer-config makes this engine
// a MooncakeConnector producer: the side that runs the bootstrap server
// (MooncakeConnector's should_launch_bootstrap_server: kv_role kv_producer
// or kv_both, TP and PP rank 0).
func mooncakeProducer(kvTransferConfig string) bool {
	var kv struct {
		Connector string `json:"kv_connector"`
		Role      string `json:"kv_role"`
	}
	if json.Unmarshal([]byte(kvTransferConfig), &kv) != nil {
		return false
	}
	return kv.Connector == "MooncakeConnector" && (kv.Role == "kv_producer" || kv.Role == "kv_both")
}

// serveMooncakeBootstrap runs the MooncakeBootstrapServer on
// VLLM_MOONCAKE_BOOTSTRAP_PORT until ctx ends: GET /query answers the
// engine id per data-parallel rank, {"0": {"engine_id": ...}}, which is all
// a decoder's proxy reads from it (llm-d/llm-d-router@71f4f099:
// pkg/sidecar/proxy/connector_mooncake.go getMooncakeEngineMap). No KV
// moves: the sim's decode engine computes the whole request itself.
func serveMooncakeBootstrap(ctx context.Context, c *proc.Container) error {
	port := DefaultMooncakeBootstrapPort
	if p, err := strconv.Atoi(c.Env["VLLM_MOONCAKE_BOOTSTRAP_PORT"]); err == nil {
		port = p
	}
	ln, err := c.Listen(net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	engineID := uuid.NewString()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /query", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]map[string]any{"0": {"engine_id": engineID}})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}
