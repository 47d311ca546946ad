package overhead

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KeyHeader carries "<run nonce>:<request index>" on every request Measure
// sends, so that the server's timings join the driver's results.
const KeyHeader = "X-Overhead-Key"

// TimingsPath answers GET ?run=<nonce>&n=<requests> with the server's
// timings of that run (and forgets them), once it holds n of them or after
// timingsWait: a handler stores its timing after its last byte is out, so
// the driver can ask before the last handler has.
const TimingsPath = "/overhead/timings"

// Shape is how the server answers: the first token after FirstToken, then
// Chunks more chunks Gap apart, the last with finish_reason "stop", then
// "data: [DONE]". A non-streaming request is answered once the last chunk
// would have been sent.
type Shape struct {
	FirstToken time.Duration
	Chunks     int
	Gap        time.Duration
}

// DefaultShape is the experiment: 10 ms to the first token, then 8
// chunks 2 ms apart (26 ms in all).
var DefaultShape = Shape{FirstToken: 10 * time.Millisecond, Chunks: 8, Gap: 2 * time.Millisecond}

// Timing is what the server measured of one request, from the moment its
// handler started to the moment it began writing the first token, and the
// last event ([DONE], or a whole answer). Taken before the write, not after
// it: the client can read bytes before the server's write call returns, and
// a bound must never come out below what the client added.
type Timing struct {
	TTFT    time.Duration `json:"ttft_ns"`
	Latency time.Duration `json:"latency_ns"`
}

// Server is a paced OpenAI chat server that records its own timing of every
// request that carries KeyHeader. It runs in a process of its own (Serve),
// so that the driver's garbage collector and scheduler cannot pause its
// clock too.
type Server struct {
	Shape Shape

	mu   sync.Mutex
	runs map[string]map[int]Timing
}

// NewServer returns a server answering with shape.
func NewServer(shape Shape) *Server {
	return &Server{Shape: shape, runs: map[string]map[int]Timing{}}
}

var (
	chunkHead = []byte(`data: {"id":"chatcmpl-overhead","object":"chat.completion.chunk","created":1,"model":"overhead","choices":[{"index":0,"delta":{"content":"tok"},"logprobs":null,"finish_reason":`)
	chunkNull = []byte("null}]}\n\n")
	chunkStop = []byte("\"stop\"}]}\n\n")
	done      = []byte("data: [DONE]\n\n")
	whole     = []byte(`{"id":"chatcmpl-overhead","object":"chat.completion","created":1,"model":"overhead","choices":[{"index":0,"message":{"role":"assistant","content":"tok tok tok tok tok tok tok tok tok"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"total_tokens":129,"completion_tokens":9}}`)
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == TimingsPath:
		s.serveTimings(w, r)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		http.Error(w, "overhead server: only POST /v1/chat/completions and GET "+TimingsPath, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var t Timing
	if bytes.Contains(body, []byte(`"stream":true`)) {
		t = s.stream(w, start)
	} else {
		t = s.answer(w, start)
	}
	if run, index, ok := parseKey(r.Header.Get(KeyHeader)); ok {
		s.mu.Lock()
		if s.runs[run] == nil {
			s.runs[run] = map[int]Timing{}
		}
		s.runs[run][index] = t
		s.mu.Unlock()
	}
}

// stream sends the SSE answer and returns its timing. Each event is flushed
// at its time, measured from start, so that sleeping late does not add up.
func (s *Server) stream(w http.ResponseWriter, start time.Time) Timing {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	var t Timing
	for k := 0; k <= s.Shape.Chunks; k++ {
		sleepUntil(start.Add(s.Shape.FirstToken + time.Duration(k)*s.Shape.Gap))
		if k == 0 {
			t.TTFT = time.Since(start)
		}
		_, _ = w.Write(chunkHead)
		if k == s.Shape.Chunks {
			_, _ = w.Write(chunkStop)
		} else {
			_, _ = w.Write(chunkNull)
		}
		flush()
	}
	t.Latency = time.Since(start)
	_, _ = w.Write(done)
	flush()
	return t
}

// answer sends the whole completion when the stream would have ended.
func (s *Server) answer(w http.ResponseWriter, start time.Time) Timing {
	sleepUntil(start.Add(s.Shape.FirstToken + time.Duration(s.Shape.Chunks)*s.Shape.Gap))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(whole)))
	t := Timing{Latency: time.Since(start)}
	_, _ = w.Write(whole)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return t
}

func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// parseKey splits "<run>:<index>".
func parseKey(v string) (run string, index int, ok bool) {
	run, i, found := strings.Cut(v, ":")
	if !found || run == "" {
		return "", 0, false
	}
	index, err := strconv.Atoi(i)
	return run, index, err == nil
}

// timingsWait bounds how long GET TimingsPath waits for the run's last
// handlers to store their timings.
const timingsWait = 5 * time.Second

// serveTimings answers with the run's timings as {"<index>": Timing} and
// forgets them.
func (s *Server) serveTimings(w http.ResponseWriter, r *http.Request) {
	run := r.URL.Query().Get("run")
	want, _ := strconv.Atoi(r.URL.Query().Get("n"))
	for deadline := time.Now().Add(timingsWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		have := len(s.runs[run])
		s.mu.Unlock()
		if have >= want {
			break
		}
	}
	s.mu.Lock()
	timings := s.runs[run]
	delete(s.runs, run)
	s.mu.Unlock()
	if timings == nil {
		timings = map[int]Timing{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(timings)
}

// Serve runs a Server with shape on addr until ctx ends. Once it listens it
// writes the bound host:port to addrFile (when set), so that whoever waits
// for that file can connect at once.
func Serve(ctx context.Context, addr, addrFile string, shape Shape) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("overhead server: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: NewServer(shape), ReadHeaderTimeout: 10 * time.Second}
	if addrFile != "" {
		if err := writeFileAtomic(addrFile, []byte(ln.Addr().String())); err != nil {
			_ = ln.Close()
			return fmt.Errorf("overhead server: %w", err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("overhead server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("overhead server: shutdown: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to path through a rename, so that a reader
// never sees a partial address.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
