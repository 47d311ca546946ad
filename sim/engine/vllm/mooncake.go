package vllm

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// DefaultMooncakeBootstrapPort is VLLM_MOONCAKE_BOOTSTRAP_PORT's default,
// the port the operator reserves on a vLLM prefiller (docs/operator.md#router-admission-rules).
const DefaultMooncakeBootstrapPort = 8998

// mooncakeProducer reports whether --kv-transfer-config makes this engine
// a MooncakeConnector producer: the side that runs the bootstrap server
// (MooncakeConnector's should_launch_bootstrap_server: kv_role kv_producer
// or kv_both, TP and PP rank 0).
func mooncakeProducer(kvTransferConfig string) bool {
	role := mooncakeRole(kvTransferConfig)
	return role == "kv_producer" || role == "kv_both"
}

// mooncakeRole is the kv_role of a MooncakeConnector --kv-transfer-config,
// "" for any other.
func mooncakeRole(kvTransferConfig string) string {
	var kv struct {
		Connector string `json:"kv_connector"`
		Role      string `json:"kv_role"`
	}
	if json.Unmarshal([]byte(kvTransferConfig), &kv) != nil || kv.Connector != "MooncakeConnector" {
		return ""
	}
	return kv.Role
}

// mooncakeConsumer reports whether --kv-transfer-config makes this engine a
// MooncakeConnector consumer (kv_role kv_consumer): the decode side, which
// pulls a request's prompt KV from the prefill engine its
// kv_transfer_params name.
func mooncakeConsumer(kvTransferConfig string) bool {
	return mooncakeRole(kvTransferConfig) == "kv_consumer"
}

// remotePrefill reads a request's kv_transfer_params (a JSON object, or nil)
// as vLLM 0.29.0's MooncakeConnectorScheduler does on a consumer
// (vllm-project/vllm@98dff2a81:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py):
// get_num_new_matched_tokens loads the prompt from the remote engine when
// do_remote_prefill is truthy, and update_state_after_alloc starts the pull
// only when remote_engine_id, remote_bootstrap_addr and transfer_id are all
// present. ok is false when the request prefills locally (no params, empty
// params, do_remote_prefill false); complete is false for a remote prefill
// whose pull never starts (the real engine logs "Got invalid
// KVTransferParams" and leaves the request waiting for KV that never
// comes; the router never sends such params, and the sim prefills such a
// request locally).
func remotePrefill(params map[string]json.RawMessage) (ok, complete bool) {
	if !truthy(params["do_remote_prefill"]) {
		return false, false
	}
	for _, k := range []string{"remote_engine_id", "remote_bootstrap_addr", "transfer_id"} {
		if _, present := params[k]; !present {
			return true, false
		}
	}
	return true, true
}

// truthy is Python's truth value of a JSON value (absent is false).
func truthy(v json.RawMessage) bool {
	switch s := string(v); s {
	case "", "null", "false", "0", "0.0", `""`, "[]", "{}":
		return false
	}
	var f float64
	if json.Unmarshal(v, &f) == nil {
		return f != 0
	}
	return true
}

// serveMooncakeBootstrap runs the MooncakeBootstrapServer on
// VLLM_MOONCAKE_BOOTSTRAP_PORT until ctx ends: GET /query answers, per
// data-parallel rank, the engine id and the workers' side-channel addresses,
// {"0": {"engine_id": ..., "worker_addr": {"0": {"0": "tcp://ip:port"}}}}
// (vLLM 0.29.0 mooncake_utils.py MooncakeBootstrapServer.query). A
// decoder's proxy reads the engine id (llm-d/llm-d-router@71f4f099:
// pkg/sidecar/proxy/connector_mooncake.go getMooncakeEngineMap); a real
// decode engine reads worker_addr. No KV moves: the sim's decode engine
// computes the whole request itself.
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
	// The worker registers its ZMQ side channel, bound to a random port
	// (zmq's bind_to_random_port range); nothing listens there in the sim.
	workerAddr := "tcp://" + net.JoinHostPort(c.Pod.IP, strconv.Itoa(49152+rand.IntN(65536-49152)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /query", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// dict[int, EngineEntry]: engine_id and worker_addr
		// {tp_rank: {pp_rank: addr}} per data-parallel rank.
		_ = json.NewEncoder(w).Encode(map[string]map[string]any{"0": {
			"engine_id":   engineID,
			"worker_addr": map[string]map[string]string{"0": {"0": workerAddr}},
		}})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}
