// Command loopback-openai is the server both load generators hit in
// bench/driver-vs-peer.sh: it answers POST /v1/chat/completions at once with
// a fixed vLLM-shaped completion (or a three-event SSE stream when the body
// asks for "stream": true), so the measured cost is the client's.
//
//	loopback-openai -addr 127.0.0.1:0 -addr-file addr.txt -capture-body body.json
//
// It writes its bound address to -addr-file once listening, writes the first
// request body it receives to -capture-body (so the peer tool can replay the
// driver's exact body), and stops on SIGINT/SIGTERM.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const completion = `{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"hello world","refusal":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":120,"total_tokens":136,"completion_tokens":16,"prompt_tokens_details":null}}`

var stream = []byte("" +
	"data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello world\"},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n")

func main() {
	os.Exit(run())
}

func run() int {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the bound host:port here once listening")
	captureBody := flag.String("capture-body", "", "write the first request body received here")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loopback-openai: listen on -addr %s: %v\n", *addr, err)
		return 1
	}
	var served atomic.Int64
	var captureOnce sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if *captureBody != "" {
			captureOnce.Do(func() {
				if err := os.WriteFile(*captureBody, body, 0o644); err != nil {
					fmt.Fprintf(os.Stderr, "loopback-openai: -capture-body: %v\n", err)
				}
			})
		}
		served.Add(1)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(completion))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	if *addrFile != "" {
		// Written only now, so a reader that sees the file can connect.
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "loopback-openai: -addr-file: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "loopback-openai: serving on http://%s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(os.Stderr, "loopback-openai: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "loopback-openai: shutdown: %v\n", err)
	}
	fmt.Fprintf(os.Stderr, "loopback-openai: served %d requests\n", served.Load())
	return 0
}
