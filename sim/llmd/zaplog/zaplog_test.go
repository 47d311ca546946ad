package zaplog

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestLinesAreZapProductionJSON(t *testing.T) {
	var b bytes.Buffer
	s := NewSink(&b, 2)
	s.now = func() time.Time { return time.Unix(1700000000, 500000000) }
	l := s.Logger().WithName("setup").WithValues("x-request-id", "r1")
	l.Info("runner/runner.go:214", "GIE build", "commit-sha", "abc", "drain", 30*time.Second)
	l.V(Debug).Info("x.go:1", "hidden at --v=2")
	l.V(Default).Error("x.go:2", errors.New("boom"), "Failed")
	want := `{"level":"info","ts":1700000000.5,"logger":"setup","caller":"runner/runner.go:214","msg":"GIE build","x-request-id":"r1","commit-sha":"abc","drain":30}` + "\n" +
		`{"level":"error","ts":1700000000.5,"logger":"setup","caller":"x.go:2","msg":"Failed","x-request-id":"r1","error":"boom","stacktrace":"github.com/llm-d/llm-d-router/x.go:2"}` + "\n"
	if b.String() != want {
		t.Fatalf("\n got %s\nwant %s", b.String(), want)
	}
}

func TestVerbosityLevelsUseTheEPPLevelEncoder(t *testing.T) {
	for v, want := range map[int]string{0: "info", 2: "info", 3: "info", 4: "debug", 5: "trace"} {
		if got := levelName(v); got != want {
			t.Errorf("V(%d) = %s, want %s", v, got, want)
		}
	}
}
