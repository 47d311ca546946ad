package enginetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The helpers below fail the test on a transport error; what the engine
// answered is for the test to assert.

// ChatBody is a chat completion body with one user message; extra is spliced
// in after the messages (e.g. `,"stream":true`).
func ChatBody(model, content, extra string) string {
	c, _ := json.Marshal(content)
	return `{"model":"` + model + `","messages":[{"role":"user","content":` + string(c) + `}]` + extra + `}`
}

// Scrape is Metrics, failing the test on an error.
func (e *Engine) Scrape(t testing.TB) Families {
	t.Helper()
	f, err := e.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Get sends GET path and returns the status and body.
func (e *Engine) Get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(e.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// Events posts a streaming request and returns its events' data payloads
// (the last is "[DONE]" on a complete stream). The answer must be a 200
// text/event-stream.
func (e *Engine) Events(t testing.TB, path, body string) []string {
	t.Helper()
	code, h, b, err := e.Post(path, body)
	if err != nil {
		t.Fatal(err)
	}
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream answered %d %s: %s", code, h.Get("Content-Type"), b)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// EventArrivals posts a streaming request and returns, for every line of the
// answer that counts, how long after sending it arrived.
func (e *Engine) EventArrivals(t testing.TB, path, body string, counts func(line string) bool) []time.Duration {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var arrivals []time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if counts(sc.Text()) {
			arrivals = append(arrivals, time.Since(sent))
		}
	}
	return arrivals
}

// AbandonStream posts a streaming request, waits for its first line and
// then hangs up, as a client that goes away mid-answer.
func (e *Engine) AbandonStream(t testing.TB, path, body string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
}

// BenchmarkPosts posts body to path from 8 goroutines per CPU, b.N times in
// all over keep-alive connections, requiring a 200 each time, and reports
// req/s.
func (e *Engine) BenchmarkPosts(b *testing.B, path, body string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(e.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
