package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/sim/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKnobDefaultsAndOverrides(t *testing.T) {
	k, err := ReadKnobs(nil)
	if err != nil || k != DefaultKnobs || k.TTFT != 5*time.Millisecond || k.ITL != time.Millisecond || k.OutputTokens != 16 || k.StartupDelay != 0 {
		t.Fatalf("defaults %+v %v", k, err)
	}
	k, err = ReadKnobs(map[string]string{engine.EnvTTFT: "0", engine.EnvITL: "250us", engine.EnvOutputTokens: "4", engine.EnvStartupDelay: "2s"})
	if err != nil || k.TTFT != 0 || k.ITL != 250*time.Microsecond || k.OutputTokens != 4 || k.StartupDelay != 2*time.Second {
		t.Fatalf("overrides %+v %v", k, err)
	}
}

func TestBadKnobsNameTheVariable(t *testing.T) {
	_, err := ReadKnobs(map[string]string{engine.EnvTTFT: "5", engine.EnvOutputTokens: "0", engine.EnvITL: "-1ms"})
	if err == nil {
		t.Fatal("bad knobs accepted")
	}
	for _, want := range []string{engine.EnvTTFT + `="5"`, engine.EnvOutputTokens + `="0"`, engine.EnvITL + `="-1ms"`, "e.g. 5ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestRunStopsOnContextCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	}()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after a clean shutdown", err)
		}
	case <-time.After(ShutdownGrace + time.Second):
		t.Fatal("Run did not return")
	}
}

func TestRecorderKeepsStatusSizeAndFlush(t *testing.T) {
	w := httptest.NewRecorder()
	rec := &Recorder{ResponseWriter: w}
	rec.WriteHeader(404)
	rec.WriteHeader(500) // ignored, as net/http ignores a second WriteHeader
	_, _ = rec.Write([]byte("abc"))
	rec.Flush()
	if rec.Code() != 404 || rec.Bytes != 3 || !w.Flushed {
		t.Fatalf("code %d bytes %d flushed %v", rec.Code(), rec.Bytes, w.Flushed)
	}
	if (&Recorder{ResponseWriter: w}).Code() != 200 {
		t.Fatal("implicit status is not 200")
	}
}

func TestIsJSONIgnoresParametersAndCase(t *testing.T) {
	for ct, want := range map[string]bool{"application/json": true, "Application/JSON; charset=utf-8": true, "text/plain": false, "": false} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Content-Type", ct)
		if IsJSON(r) != want {
			t.Errorf("IsJSON(%q) != %v", ct, want)
		}
	}
}

func TestReadBodyLimit(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 10000)))
	b, release, err := ReadBody(r, 20000)
	if err != nil || len(b) != 10000 {
		t.Fatalf("len %d err %v", len(b), err)
	}
	release()
	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 101)))
	if _, _, err := ReadBody(r, 100); err == nil {
		t.Fatal("over-limit body accepted")
	}
}

func TestAccessLineIsUvicornShaped(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions?x=1", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	if got := AccessLine(r, 200); got != `127.0.0.1:5555 - "POST /v1/chat/completions?x=1 HTTP/1.1" 200 OK` {
		t.Fatalf("access line %q", got)
	}
}
