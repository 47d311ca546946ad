// Package sidecar emulates llm-d's prefill/decode routing proxy
// (cmd/pd-sidecar, llm-d/llm-d-router@71f4f099:pkg/sidecar/proxy, v0.10.0):
// the "routing-proxy" container gpustack-operator renders on a direct decode
// Pod under llm-d-router (docs/operator.md#engine-pods). It owns the serving
// port and forwards to the engine on --model-server-port of the same Pod. A
// generation request that carries x-prefiller-host-port (set by the EPP's
// disagg profile handler, docs/llmd.md#disaggregated-prefill-and-decode)
// also runs a prefill leg on that endpoint, concurrently and discarding its
// answer, the way the --kv-connector hands the KV over:
//
//   - mooncake (vLLM): the prefiller's engine id comes from its Mooncake
//     bootstrap server (GET http://<prefill host>:<--mooncake-bootstrap-port>/query);
//     the prefill leg asks for one token with kv_transfer_params
//     {do_remote_decode, transfer_id}, the decode leg carries
//     {do_remote_prefill, transfer_id, remote_bootstrap_addr, remote_engine_id}
//     (proxy/connector_mooncake.go);
//   - sglang (SGLang): both legs get the same body with bootstrap_host,
//     bootstrap_port (SGLANG_BOOTSTRAP_PORT, default 8998) and
//     bootstrap_room (proxy/connector_sglang.go).
//
// Without the header the request goes to the engine alone (decode-only).
// Not emulated: TLS (--secure-proxy=true), the NIXL, shared-storage and
// offloading connectors, data-parallel ranks, chunked decode, SSRF
// allowlists, encoders and tracing; their flags parse, and a request that
// would need them is answered 502 saying so.
package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// PrefillHeader names the prefill endpoint for a split request
// (pkg/common/routing/common.go).
const PrefillHeader = "x-prefiller-host-port"

// KV connectors (pkg/sidecar/constants/constants.go).
const (
	ConnectorNIXLV2        = "nixlv2"
	ConnectorSharedStorage = "shared-storage"
	ConnectorSGLang        = "sglang"
	ConnectorMooncake      = "mooncake"
	ConnectorOffloading    = "offloading"
)

var connectors = []string{ConnectorNIXLV2, ConnectorSharedStorage, ConnectorSGLang, ConnectorMooncake, ConnectorOffloading}

// Generation paths the proxy intercepts (proxy/chat_completions.go).
var generationPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses", "/inference/v1/generate"}

// options are the flags the sim reads (proxy/options.go; defaults from
// NewOptions).
type options struct {
	port, modelServerPort, vllmPort string
	dataParallelSize                int
	kvConnector, ecConnector        string
	mooncakeBootstrapPort           int
	secureProxy                     bool
	v                               int
}

func parse(args []string, env map[string]string, errw io.Writer) (*options, *pflag.FlagSet, error) {
	o := &options{port: "8000", modelServerPort: "", vllmPort: "8200", dataParallelSize: 1,
		kvConnector: ConnectorNIXLV2, mooncakeBootstrapPort: 8998, secureProxy: true}
	if p, err := strconv.Atoi(env["MOONCAKE_BOOTSTRAP_PORT"]); err == nil {
		o.mooncakeBootstrapPort = p
	}
	fs := pflag.NewFlagSet("pd-sidecar", pflag.ContinueOnError)
	fs.SetOutput(errw)
	fs.StringVar(&o.port, "port", o.port, "the port the sidecar is listening on")
	fs.StringVar(&o.modelServerPort, "model-server-port", o.modelServerPort, "the port the model server is listening on (default 8200)")
	fs.StringVar(&o.vllmPort, "vllm-port", o.vllmPort, "the port the model server is listening on")
	_ = fs.MarkDeprecated("vllm-port", "use --model-server-port instead; --vllm-port will be removed after the deprecation period")
	fs.IntVar(&o.dataParallelSize, "data-parallel-size", o.dataParallelSize, "the model server's data-parallel size")
	fs.StringVar(&o.kvConnector, "kv-connector", o.kvConnector, "the KV protocol between prefiller and decoder. Supported: "+strings.Join(connectors, ", "))
	fs.StringVar(&o.ecConnector, "ec-connector", "", "the EC protocol between encoder and prefiller (for EPD mode)")
	fs.IntVar(&o.mooncakeBootstrapPort, "mooncake-bootstrap-port", o.mooncakeBootstrapPort, "the port used to query the Mooncake bootstrap endpoint on prefill pods (only used with --kv-connector=mooncake)")
	fs.BoolVar(&o.secureProxy, "secure-proxy", o.secureProxy, "Enables secure proxy. Defaults to true.")
	fs.IntVar(&o.v, "v", 0, "number for the log level verbosity")
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, pflag.ErrHelp) {
			// pflag.CommandLine is ExitOnError: the error, then the usage.
			fmt.Fprintln(errw, err)
			fmt.Fprintln(errw, "Usage of pd-sidecar:")
			fs.PrintDefaults()
		}
		return nil, fs, err
	}
	return o, fs, nil
}

// validate is Options.Complete and Validate for the flags read.
func (o *options) validate(fs *pflag.FlagSet) (decoderPort int, err error) {
	if o.dataParallelSize < 1 {
		return 0, fmt.Errorf("--data-parallel-size must be a positive integer, got %d", o.dataParallelSize)
	}
	if _, err := strconv.Atoi(o.port); err != nil {
		return 0, fmt.Errorf("--port must be a valid integer, got %q", o.port)
	}
	flag, ms := "--model-server-port", o.modelServerPort
	if ms == "" || (fs.Changed("vllm-port") && !fs.Changed("model-server-port")) {
		ms = o.vllmPort
		if fs.Changed("vllm-port") {
			flag = "--vllm-port"
		}
	}
	p, err := strconv.Atoi(ms)
	if err != nil {
		return 0, fmt.Errorf("%s must be a valid integer, got %q", flag, ms)
	}
	if !contains(connectors, o.kvConnector) {
		return 0, fmt.Errorf("--kv-connector must be one of: %s", strings.Join(connectors, ", "))
	}
	return p, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Main is the pd-sidecar program. Flag errors print pflag's message and
// exit 2 (pflag.CommandLine's ExitOnError); a configuration main refuses is
// logged and the process ends (exit 0, as upstream's main returns).
func Main() proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		o, fs, err := parse(c.Args, c.Env, c.Stderr)
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		if err != nil {
			return 2
		}
		log := zaplog.NewSink(c.Stderr, o.v).Logger()
		decoderPort, err := o.validate(fs)
		if err != nil {
			log.Error("pd-sidecar/main.go:52", err, "Invalid configuration")
			return 0
		}
		if o.secureProxy {
			log.Error("pd-sidecar/main.go:76", errors.New("the sim emulates --secure-proxy=false only"), "failed to start proxy server")
			return 1
		}
		log.Info("pd-sidecar/main.go:71", "Proxy starting", "Built on", "v0.10.0", "From Git SHA", "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26")
		s := newServer(o, c.Pod.IP, decoderPort, c.Env, log)
		ln, err := c.Listen(net.JoinHostPort("", o.port))
		if err != nil {
			log.Error("pd-sidecar/main.go:76", err, "failed to start proxy server")
			return 1
		}
		srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 30 * time.Second}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			return 0
		case err := <-done:
			log.Error("pd-sidecar/main.go:76", err, "failed to start proxy server")
			return 1
		}
	}
}

// server is one proxy process.
type server struct {
	o             *options
	decoder       *httputil.ReverseProxy
	client        *http.Client
	sglangPort    int
	log           zaplog.Logger
	mu            sync.Mutex
	mooncakeCache map[string]map[string]string // prefill host:port -> dp rank -> engine id
}

func newServer(o *options, podIP string, decoderPort int, env map[string]string, log zaplog.Logger) *server {
	u := &url.URL{Scheme: "http", Host: net.JoinHostPort(podIP, strconv.Itoa(decoderPort))}
	s := &server{o: o, client: &http.Client{}, sglangPort: 8998, log: log, mooncakeCache: map[string]map[string]string{}}
	if p, err := strconv.Atoi(env["SGLANG_BOOTSTRAP_PORT"]); err == nil {
		s.sglangPort = p
	}
	s.decoder = httputil.NewSingleHostReverseProxy(u)
	s.decoder.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		// proxy_helpers.go: the decoder is down.
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(decoderUnavailable)
	}
	return s
}

var decoderUnavailable, _ = json.Marshal(errorBody{Object: "error",
	Message: "The decode node is not ready. Please check that the vLLM service is running and the port configuration is correct.",
	Type:    "ServiceUnavailable", Code: http.StatusServiceUnavailable})

// errorBody is the vLLM-shaped error the proxy writes (proxy/errors.go).
type errorBody struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param"`
	Code    int    `json:"code"`
}

func sendError(w http.ResponseWriter, code int, typ string, err error) {
	b, _ := json.Marshal(errorBody{Object: "error", Message: err.Error(), Type: typ, Code: code})
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, p := range generationPaths {
		mux.HandleFunc("POST "+p, s.generation)
	}
	mux.Handle("/", s.decoder)
	return mux
}

// generation is disaggregatedPrefillHandler: the first prefill endpoint
// named by the header (comma-separated values allowed), else decode-only.
func (s *server) generation(w http.ResponseWriter, r *http.Request) {
	hosts := r.Header.Values(PrefillHeader)
	r.Header.Del(PrefillHeader)
	if len(hosts) == 1 {
		hosts = strings.Split(hosts[0], ",")
	}
	prefill := ""
	if len(hosts) > 0 {
		prefill = strings.TrimSpace(hosts[0])
	}
	if prefill == "" {
		s.decoder.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		sendError(w, http.StatusBadRequest, "BadRequestError", fmt.Errorf("failed to read request body: %w", err))
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		sendError(w, http.StatusBadRequest, "BadRequestError", err)
		return
	}
	switch s.o.kvConnector {
	case ConnectorMooncake:
		s.mooncake(w, r, req, prefill)
	case ConnectorSGLang:
		s.sglang(w, r, req, prefill)
	default:
		sendError(w, http.StatusBadGateway, "BadGateway", fmt.Errorf("the sim does not emulate the %s connector", s.o.kvConnector))
	}
}

func extractHost(hostPort string) string {
	hostPort = strings.TrimPrefix(hostPort, "http://")
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		return h
	}
	return hostPort
}

func (s *server) mooncake(w http.ResponseWriter, r *http.Request, req map[string]any, prefill string) {
	bootstrap := fmt.Sprintf("http://%s:%d", extractHost(prefill), s.o.mooncakeBootstrapPort)
	engines, err := s.engineMap(r.Context(), prefill, bootstrap)
	if err != nil {
		sendError(w, http.StatusBadGateway, "BadGateway", err)
		return
	}
	var rank, engineID string
	for rank, engineID = range engines {
		break
	}
	transfer := "xfer-" + uuid.NewString()
	pre := clone(req)
	pre["kv_transfer_params"] = map[string]any{"do_remote_prefill": false, "do_remote_decode": true, "transfer_id": transfer}
	primeSingleToken(pre, req)
	dec := clone(req)
	dec["kv_transfer_params"] = map[string]any{"do_remote_prefill": true, "do_remote_decode": false, "transfer_id": transfer,
		"remote_bootstrap_addr": bootstrap, "remote_engine_id": engineID}
	s.concurrent(w, r, marshal(pre), marshal(dec), prefill, map[string]string{"X-data-parallel-rank": rank})
}

// engineMap is getMooncakeEngineMap: the prefiller's dp rank -> engine id,
// queried from its bootstrap server once and cached.
func (s *server) engineMap(ctx context.Context, prefill, bootstrap string) (map[string]string, error) {
	s.mu.Lock()
	m, ok := s.mooncakeCache[prefill]
	s.mu.Unlock()
	if ok {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, bootstrap+"/query", nil)
	if err != nil {
		return nil, fmt.Errorf("failed to get mooncake bootstrap request: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to query bootstrap endpoint: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return nil, fmt.Errorf("bootstrap endpoint returned status %d", resp.StatusCode)
	}
	var data map[string]map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		return nil, fmt.Errorf("failed to parse bootstrap response: %w", err)
	}
	m = map[string]string{}
	for rank, e := range data {
		if id, ok := e["engine_id"].(string); ok {
			m[rank] = id
		}
	}
	if len(m) == 0 {
		return nil, errors.New("engine_id not found in bootstrap response")
	}
	s.mu.Lock()
	s.mooncakeCache[prefill] = m
	s.mu.Unlock()
	return m, nil
}

func (s *server) sglang(w http.ResponseWriter, r *http.Request, req map[string]any, prefill string) {
	body := clone(req)
	body["bootstrap_host"] = extractHost(prefill)
	body["bootstrap_port"] = s.sglangPort
	body["bootstrap_room"] = time.Now().UnixNano() + int64(rand.IntN(1000))
	b := marshal(body)
	s.concurrent(w, r, b, b, prefill, nil)
}

// concurrent sends the prefill leg in the background (its answer is only
// checked, never relayed, and the client's disconnect does not cancel it)
// and relays the decode leg from the local engine.
func (s *server) concurrent(w http.ResponseWriter, r *http.Request, preBody, decBody []byte, prefill string, preHeaders map[string]string) {
	target := "http://" + strings.TrimPrefix(prefill, "http://") + r.URL.Path
	pre, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, target, bytes.NewReader(preBody))
	if err != nil {
		sendError(w, http.StatusBadGateway, "BadGateway", err)
		return
	}
	pre.Header = r.Header.Clone()
	pre.Header.Del("Content-Length")
	for k, v := range preHeaders {
		pre.Header.Set(k, v)
	}
	go func() {
		resp, err := s.client.Do(pre)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	dec := r.Clone(r.Context())
	dec.Body = io.NopCloser(bytes.NewReader(decBody))
	dec.ContentLength = int64(len(decBody))
	dec.Header.Del("Content-Length")
	s.decoder.ServeHTTP(w, dec)
}

// primeSingleToken is request.PrimeSingleTokenRequest: one output token,
// no stream.
func primeSingleToken(target, original map[string]any) {
	target["max_tokens"] = 1
	if _, ok := original["max_completion_tokens"]; ok {
		target["max_completion_tokens"] = 1
	}
	target["stream"] = false
	delete(target, "stream_options")
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+3)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func marshal(m map[string]any) []byte {
	b, _ := json.Marshal(m)
	return b
}
