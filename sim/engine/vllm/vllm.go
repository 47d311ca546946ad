// Package vllm emulates `vllm serve` (vLLM 0.29) as a sim container program:
// its argparse CLI, its start-up log, its OpenAI-compatible HTTP surface and
// error bodies, its Prometheus metrics, continuous batching under
// --max-num-seqs, and automatic prefix caching in --block-size blocks.
//
// Latency and answer length come from the Pod environment (see
// server.ReadKnobs): SIM_ENGINE_TTFT, SIM_ENGINE_ITL,
// SIM_ENGINE_OUTPUT_TOKENS, SIM_ENGINE_STARTUP_DELAY. During the start-up
// delay nothing listens on the port (vLLM binds its socket without listening
// until uvicorn starts), so connections are refused.
package vllm

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// apiPrefix is what vLLM's decorate_logs puts before every line of the API
// server process (the container's PID 1).
const apiPrefix = "(APIServer pid=1) "

const enginePrefix = "(EngineCore_DP0 pid=215) "

// logger writes vLLM's log format:
// "INFO 12-02 15:04:05 [api_server.py:1851] message". quiet drops INFO
// lines (VLLM_LOGGING_LEVEL=WARNING or above).
type logger struct {
	out   *server.Lines
	quiet bool
}

func (l logger) log(prefix, level, where, msg string) {
	if l.quiet && level == "INFO" {
		return
	}
	l.out.Print(prefix, level+" "+time.Now().Format("01-02 15:04:05")+" ["+where+"] "+msg)
}

// uvicorn prints its own INFO lines unless --uvicorn-log-level is above info.
type uvicornLog struct {
	out   *server.Lines
	quiet bool
}

func (u uvicornLog) info(msg string) {
	if !u.quiet {
		u.out.Print(apiPrefix, "INFO:     "+msg)
	}
}

func aboveInfo(level string) bool {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "warning", "warn", "error", "critical":
		return true
	}
	return false
}

// Main is `vllm` with c.Args the argv after the program name, e.g.
// ["serve", "Qwen/Qwen3-0.6B", "--host", "0.0.0.0", "--port", "8000"]. A
// KV-event publisher configured by --kv-events-config binds real ZMQ
// sockets on the Pod's address.
func Main(ctx context.Context, c *proc.Container) int {
	stdout := server.NewLines(c.Stdout)
	stderr := server.NewLines(c.Stderr)
	cfg, err := parseArgs(c.Args)
	if err != nil { // also --help, --version, no subcommand
		return server.ArgsExit(err, stdout, stderr)
	}
	lg := logger{out: stdout, quiet: aboveInfo(c.Env["VLLM_LOGGING_LEVEL"])}
	cfg.maxNSequences = 16384
	if v, err := strconv.Atoi(c.Env["VLLM_MAX_N_SEQUENCES"]); err == nil {
		cfg.maxNSequences = v
	}
	uv := uvicornLog{out: stderr, quiet: aboveInfo(cfg.uvicornLogLevel)}
	knobs, err := server.ReadKnobs(c.Env)
	if err != nil {
		lg.log(apiPrefix, "ERROR", "api_server.py:1921", "Invalid simulator environment: "+err.Error())
		return 1
	}
	lg.log(apiPrefix, "INFO", "api_server.py:1839", "vLLM API server version "+Version)
	lg.log(apiPrefix, "INFO", "utils.py:233", "non-default args: {"+strings.Join(cfg.nonDefault, ", ")+"}")
	lg.log(apiPrefix, "INFO", "model.py:1510", "Using max model len "+strconv.Itoa(cfg.maxModelLen))
	lg.log(apiPrefix, "INFO", "scheduler.py:205", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
	if cfg.kvTransferConfig != "" {
		lg.log(enginePrefix, "INFO", "factory.py:51", "Creating v1 connector with config: "+cfg.kvTransferConfig)
	}
	if cfg.kvEventsConfig != "" {
		lg.log(enginePrefix, "INFO", "kv_events.py:289", "Starting ZMQ publisher with config: "+cfg.kvEventsConfig)
	}
	lg.log(enginePrefix, "INFO", "core.py:644", "Waiting for init message from front-end.")
	lg.log(enginePrefix, "INFO", "gpu_model_runner.py:2602", "Starting to load model "+cfg.model+"...")

	// Loading the model: the port is not listening yet.
	if !server.LoadModel(ctx, knobs.StartupDelay) {
		return 0
	}
	blocks := cfg.kvBlocks()
	kvTokens := blocks * cfg.blockSize
	if kvTokens < cfg.maxModelLen {
		lg.log(enginePrefix, "ERROR", "core.py:708", fmt.Sprintf("EngineCore failed to start. ValueError: To serve at least one request with the models's max seq len (%d), (%d tokens) KV cache is needed, which is larger than the available KV cache memory (%d tokens). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", cfg.maxModelLen, cfg.maxModelLen, kvTokens))
		return 1
	}
	lg.log(enginePrefix, "INFO", "gpu_model_runner.py:2634", "Model loading took 1.1201 GiB and 1.538519 seconds")
	lg.log(enginePrefix, "INFO", "kv_cache_utils.py:1087", "GPU KV cache size: "+commas(kvTokens)+" tokens")
	lg.log(enginePrefix, "INFO", "kv_cache_utils.py:1091", fmt.Sprintf("Maximum concurrency for %s tokens per request: %.2fx", commas(cfg.maxModelLen), float64(kvTokens)/float64(cfg.maxModelLen)))
	lg.log(enginePrefix, "INFO", "core.py:210", "init engine (profile, create kv cache, warmup model) took 0.01 seconds")
	lg.log(apiPrefix, "INFO", "loggers.py:142", fmt.Sprintf("Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d", blocks))

	m := newMetrics(cfg)
	eng := newEngine(cfg, knobs, m)
	events, err := startKVEvents(cfg.kvEventsConfig, c)
	if err != nil {
		lg.log(enginePrefix, "ERROR", "core.py:708", "EngineCore failed to start. "+err.Error())
		return 1
	}
	defer events.close()
	if events != nil && eng.cache != nil {
		eng.cache.SetEvents(events)
	}
	a := &api{cfg: cfg, eng: eng, m: m, stdout: stdout, accessLog: !cfg.disableAccessLog && !uv.quiet}

	host := cfg.host
	addr := net.JoinHostPort(host, strconv.Itoa(cfg.port))
	ln, err := c.Listen(addr)
	if err != nil {
		lg.log(apiPrefix, "ERROR", "api_server.py:1960", fmt.Sprintf("[Errno 98] error while attempting to bind on address (%s): address already in use (%v)", addr, err))
		return 1
	}
	shown := host
	if shown == "" {
		shown = "0.0.0.0"
	}
	if mooncakeProducer(cfg.kvTransferConfig) {
		if err := serveMooncakeBootstrap(ctx, c); err != nil {
			lg.log(apiPrefix, "ERROR", "api_server.py:1960", "Mooncake bootstrap server: "+err.Error())
			return 1
		}
	}
	lg.log(apiPrefix, "INFO", "api_server.py:1971", "Starting vLLM API server 0 on http://"+net.JoinHostPort(shown, strconv.Itoa(cfg.port)))
	lg.log(apiPrefix, "INFO", "launcher.py:36", "Available routes are:")
	for _, r := range routeOrder() {
		lg.log(apiPrefix, "INFO", "launcher.py:44", "Route: "+r[0]+", Methods: "+r[1])
	}
	uv.info("Started server process [1]")
	uv.info("Waiting for application startup.")
	uv.info("Application startup complete.")

	stop := make(chan struct{})
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		if !cfg.disableLogStats {
			a.logStats(lg, stop)
		}
	}()
	err = server.Run(ctx, ln, c.Faults.Handler(cfg.port, a))
	close(stop)
	<-statsDone
	uv.info("Shutting down")
	uv.info("Waiting for application shutdown.")
	uv.info("Application shutdown complete.")
	if err != nil {
		lg.log(apiPrefix, "ERROR", "api_server.py:1990", err.Error())
		return 1
	}
	return 0
}

// logStats prints vLLM's periodic engine stats line every 10 s while there
// is traffic (it is a debug line when idle, so it is skipped).
func (a *api) logStats(lg logger, stop <-chan struct{}) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	var lastPrompt, lastGen, lastQ, lastH float64
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		prompt, gen := counterValue(a.m.promptTokens), counterValue(a.m.genTokens)
		q, h := counterValue(a.m.prefixQueries), counterValue(a.m.prefixHits)
		if prompt == lastPrompt && gen == lastGen {
			continue
		}
		st := a.eng.sched.State()
		hit := 0.0
		if q > lastQ {
			hit = (h - lastH) / (q - lastQ) * 100
		}
		lg.log(apiPrefix, "INFO", "loggers.py:127", fmt.Sprintf("Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
			(prompt-lastPrompt)/10, (gen-lastGen)/10, st.Running, st.Waiting, st.Usage()*100, hit))
		lastPrompt, lastGen, lastQ, lastH = prompt, gen, q, h
	}
}

// commas formats 131072 as "131,072" (Python's f"{n:,}").
func commas(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
