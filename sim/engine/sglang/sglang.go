// Package sglang emulates `python3 -m sglang.launch_server` (SGLang 0.5.x) as
// a sim container program: its argparse CLI, its start-up log and counted
// warm-up request, its OpenAI-compatible and native HTTP surface with flat
// errors, its Prometheus metrics (only with --enable-metrics, lazily
// created, multiprocess layout), continuous batching under
// --max-running-requests, and RadixAttention prefix caching at --page-size
// granularity.
//
// Latency and answer length come from the Pod environment (see
// server.ReadKnobs). As launch_server does, it loads the model
// (SIM_ENGINE_STARTUP_DELAY) before it listens, so connections are refused
// until then, and answers /health 503 during the warm-up that follows.
package sglang

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/sim/engine/internal/jsonw"
	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// WarmupText is the prompt of SGLang's start-up warm-up request.
const WarmupText = "The capital city of France is"

// WarmupMaxNewTokens is the warm-up request's max_new_tokens.
const WarmupMaxNewTokens = 8

func pyFloat(f float64) string { return jsonw.PyRepr(f) }

// logger writes SGLang's "[2026-12-02 15:04:05] msg" and, for scheduler
// lines, "[2026-12-02 15:04:05 TP0] msg". quiet drops info lines
// (--log-level warning or above); errors always print.
type logger struct {
	out   *server.Lines
	quiet bool
}

func (l logger) main(msg string) {
	if !l.quiet {
		l.always(msg)
	}
}

func (l logger) always(msg string) {
	l.out.Print("["+time.Now().Format("2006-01-02 15:04:05")+"] ", msg)
}

func (l logger) tp0(msg string) {
	if !l.quiet {
		l.out.Print("["+time.Now().Format("2006-01-02 15:04:05")+" TP0] ", msg)
	}
}

func aboveInfo(level string) bool {
	switch level {
	case "warning", "warn", "error", "critical":
		return true
	}
	return false
}

// Main is `python3 -m sglang.launch_server` with c.Args the argv after it,
// e.g. ["--model-path", "Qwen/Qwen2.5-0.5B-Instruct", "--enable-metrics",
// "--host", "0.0.0.0", "--port", "8000"].
func Main(ctx context.Context, c *proc.Container) int {
	stdout := server.NewLines(c.Stdout)
	stderr := server.NewLines(c.Stderr)
	cfg, err := parseArgs(c.Args)
	if err != nil {
		return server.ArgsExit(err, stdout, stderr)
	}
	lg := logger{out: stderr, quiet: aboveInfo(cfg.logLevel)}
	knobs, err := server.ReadKnobs(c.Env)
	if err != nil {
		lg.always("ValueError: invalid simulator environment: " + err.Error())
		return 1
	}
	lg.main("server_args=ServerArgs(" + cfg.serverArgsRepr() + ")")

	var m *metrics
	if cfg.metrics {
		m = newMetrics(cfg)
	}
	eng := newEngine(cfg, knobs, m)
	a := &api{cfg: cfg, eng: eng, m: m, stdout: stdout, loaded: make(chan struct{})}

	stop := make(chan struct{})
	idleDone := make(chan struct{})
	go func() { defer close(idleDone); eng.idleLoop(stop) }()
	defer func() {
		close(stop)
		<-idleDone
	}()

	lg.tp0("Attention backend not explicitly specified. Use flashinfer backend by default.")
	lg.tp0("Init torch distributed begin.")
	lg.tp0("Load weight begin. avail mem=78.50 GB")
	// launch_server loads the model in its subprocesses before it starts
	// the HTTP server: until then connections are refused.
	if !server.LoadModel(ctx, knobs.StartupDelay) {
		return 0
	}
	lg.tp0("Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=77.45 GB, mem usage=1.05 GB.")
	lg.tp0(fmt.Sprintf("KV Cache is allocated. #tokens: %d, K size: 0.75 GB, V size: 0.75 GB", cfg.maxTotal))
	lg.tp0(fmt.Sprintf("max_total_num_tokens=%d, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=%d, context_len=%d, available_gpu_mem=76.20 GB", cfg.maxTotal, cfg.maxRunning, cfg.contextLen))
	close(a.loaded)
	addr := net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port))
	ln, err := c.Listen(addr)
	if err != nil {
		lg.always(fmt.Sprintf("ERROR:    [Errno 98] error while attempting to bind on address (%s): address already in use (%v)", addr, err))
		return 1
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- server.Run(ctx, ln, c.Faults.Handler(cfg.port, a)) }()
	lg.main("INFO:     Started server process [1]")
	lg.main("INFO:     Waiting for application startup.")
	lg.main("INFO:     Application startup complete.")
	lg.main("INFO:     Uvicorn running on http://" + addr + " (Press CTRL+C to quit)")

	if !cfg.skipWarmup {
		if err := warmup(ctx, ln.Addr().String(), cfg); err != nil {
			if ctx.Err() != nil {
				return shutdown(lg, srvDone)
			}
			lg.always("Initialization failed. warmup error: " + err.Error())
			return 1
		}
	}
	a.up.Store(true)
	lg.main("The server is fired up and ready to roll!")

	select {
	case <-ctx.Done():
		return shutdown(lg, srvDone)
	case err := <-srvDone:
		lg.always("ERROR:    " + err.Error())
		return 1
	}
}

func shutdown(lg logger, srvDone <-chan error) int {
	err := <-srvDone
	lg.main("INFO:     Shutting down")
	lg.main("INFO:     Application shutdown complete.")
	if err != nil {
		lg.always("ERROR:    " + err.Error())
		return 1
	}
	return 0
}

// warmup is _wait_and_warmup: GET /model_info, then one /generate (counted
// in the metrics, and it seeds the radix cache with its prompt).
func warmup(ctx context.Context, hostport string, cfg *config) error {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Minute}
	base := "http://" + hostport
	headers := func(req *http.Request) {
		if cfg.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.apiKey)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/model_info", nil)
	if err != nil {
		return err
	}
	headers(req)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	body := fmt.Sprintf(`{"text":%q,"sampling_params":{"temperature":0,"max_new_tokens":%d}}`, WarmupText, WarmupMaxNewTokens)
	if cfg.disaggMode == "prefill" || cfg.disaggMode == "decode" {
		body = fmt.Sprintf(`{"input_ids":[0,1,2,3],"sampling_params":{"temperature":0.0,"max_new_tokens":%d,"ignore_eos":true},"bootstrap_host":"2.2.2.2","bootstrap_room":0}`, WarmupMaxNewTokens)
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/generate", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	headers(req)
	resp, err = client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/generate answered %s", resp.Status)
	}
	return nil
}
