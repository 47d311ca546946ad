package traffic

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cannedServer answers every HTTP/1.1 request on a loopback port with a fixed
// answer (fastChat, or an SSE stream when the body asks for one), parsing
// only what keep-alive needs: the header block and a Content-Length body. It
// costs far less than net/http's server, so a benchmark's allocations are
// the driver's and most of its CPU is the driver's.
func cannedServer(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	json := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(fastChat), fastChat)
	var sse bytes.Buffer
	sse.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, ev := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello world"},"logprobs":null,"finish_reason":"stop"}]}`,
		`[DONE]`,
	} {
		data := "data: " + ev + "\n\n"
		fmt.Fprintf(&sse, "%x\r\n%s\r\n", len(data), data)
	}
	sse.WriteString("0\r\n\r\n")

	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { serveCanned(c, []byte(json), sse.Bytes()) })
		}
	})
	b.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

func serveCanned(c net.Conn, json, sse []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 8<<10)
	body := make([]byte, 0, 4<<10)
	for {
		length := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			line = bytes.TrimRight(line, "\r\n")
			if len(line) == 0 {
				break
			}
			if name, value, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(name, []byte("Content-Length")) {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(value)))
			}
		}
		body = body[:length]
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		answer := json
		if bytes.Contains(body, []byte(`"stream":true`)) {
			answer = sse
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPerRequest runs b.N requests through Run against cannedServer and
// reports, besides ns/op and allocs/op, the process CPU per request
// (cpu-ns/op: the driver plus the canned server's reads and writes).
func benchPerRequest(b *testing.B, mode Mode) {
	url := cannedServer(b)
	p := Plan{BaseURL: url, Model: "m", Requests: b.N, Concurrency: 64, Mode: mode, MaxTokens: 16}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	rep, err := Run(context.Background(), p)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Summary.OK != b.N {
		b.Fatalf("ok %d of %d: %v", rep.Summary.OK, b.N, rep.Summary.ByClass)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// The per-request cost of the driver as bench/driver-vs-peer.sh runs it
// (non-streaming, concurrency 64), and of streaming:
//
//	go test -run '^$' -bench PerRequest -benchmem -count 6 ./traffic/ | benchstat -
func BenchmarkPerRequest(b *testing.B) {
	for _, mode := range []Mode{ModeNonStream, ModeStream} {
		b.Run("mode="+string(mode), func(b *testing.B) { benchPerRequest(b, mode) })
	}
}
