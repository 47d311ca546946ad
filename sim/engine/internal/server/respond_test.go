package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ap "github.com/gpustack/routing-conformance/sim/engine/internal/argparse"
)

func TestRespondJSONSetsExactLength(t *testing.T) {
	rec := httptest.NewRecorder()
	RespondJSON(rec, http.StatusTeapot, func(b []byte) []byte { return append(b, `{"a":1}`...) })
	if rec.Code != http.StatusTeapot || rec.Body.String() != `{"a":1}` ||
		rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Content-Length") != "7" {
		t.Fatalf("got %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
}

func TestStarletteNotFoundAndMethodNotAllowed(t *testing.T) {
	rec := httptest.NewRecorder()
	NotFound(rec)
	if rec.Code != 404 || rec.Body.String() != `{"detail":"Not Found"}` {
		t.Fatalf("404: %d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	MethodNotAllowed(rec, "GET, POST")
	if rec.Code != 405 || rec.Body.String() != `{"detail":"Method Not Allowed"}` || rec.Header().Get("Allow") != "GET, POST" {
		t.Fatalf("405: %d %v %s", rec.Code, rec.Header(), rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Unauthorized(rec)
	if rec.Code != 401 || rec.Body.String() != `{"error":"Unauthorized"}` {
		t.Fatalf("401: %d %s", rec.Code, rec.Body.String())
	}
}

func TestEventsFrameEveryPayloadAndEndWithDone(t *testing.T) {
	rec := httptest.NewRecorder()
	ev := StartEvents(rec)
	defer ev.Close()
	for _, p := range []string{`{"n":1}`, `{"n":2}`} {
		if err := ev.Send(func(b []byte) []byte { return append(b, p...) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Done(); err != nil {
		t.Fatal(err)
	}
	if want := "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: [DONE]\n\n"; rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body.String(), want)
	}
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream; charset=utf-8" || !rec.Flushed {
		t.Fatalf("status %d, headers %v, flushed %v", rec.Code, rec.Header(), rec.Flushed)
	}
}

type failingWriter struct{ http.ResponseWriter }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("client gone") }

func TestEventsSendReportsTheWriteError(t *testing.T) {
	ev := StartEvents(failingWriter{httptest.NewRecorder()})
	defer ev.Close()
	if err := ev.Send(func(b []byte) []byte { return b }); err == nil || err.Error() != "client gone" {
		t.Fatalf("Send error %v", err)
	}
}

func TestArgsExitFollowsPythonArgparse(t *testing.T) {
	var out, errb strings.Builder
	stdout, stderr := NewLines(&out), NewLines(&errb)
	if code := ArgsExit(&ap.Help{Text: "usage: prog\n"}, stdout, stderr); code != 0 || out.String() != "usage: prog\n" || errb.Len() != 0 {
		t.Fatalf("help: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	p := &ap.Parser{Prog: "prog", Usage: "prog [-h]"}
	if code := ArgsExit(p.Errorf("unrecognized arguments: --x"), stdout, stderr); code != 2 || out.Len() != 0 ||
		errb.String() != "usage: prog [-h]\nprog: error: unrecognized arguments: --x\n" {
		t.Fatalf("usage error: %d %q %q", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := ArgsExit(errors.New("boom"), stdout, stderr); code != 2 || errb.String() != "boom\n" {
		t.Fatalf("other error: %d %q", code, errb.String())
	}
}

func TestLoadModelWaitsOrStopsWithTheContext(t *testing.T) {
	if !LoadModel(context.Background(), 0) {
		t.Fatal("no delay did not load")
	}
	start := time.Now()
	if !LoadModel(context.Background(), 20*time.Millisecond) || time.Since(start) < 20*time.Millisecond {
		t.Fatal("returned before the delay")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if LoadModel(ctx, time.Hour) {
		t.Fatal("loaded although the context had ended")
	}
}

func TestClientGoneOnlyWhenTheRequestEndedOrTheWriteWasCanceled(t *testing.T) {
	live := httptest.NewRequest(http.MethodPost, "/", nil)
	if ClientGone(live, errors.New("sched: sequence needs more KV tokens than the pool holds")) {
		t.Fatal("a live client's engine error counted as gone")
	}
	if !ClientGone(live, context.Canceled) {
		t.Fatal("a canceled write did not count as gone")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if !ClientGone(live.WithContext(ctx), errors.New("write: broken pipe")) {
		t.Fatal("an ended request context did not count as gone")
	}
}
