package tracing

import (
	"strings"
	"testing"
	"time"
)

func TestFullFormatWithANSIAndUTC(t *testing.T) {
	var b strings.Builder
	at := time.Date(2026, 12, 2, 17, 4, 5, 0, time.FixedZone("X", 2*3600))
	l := New(&b, Info).WithClock(func() time.Time { return at })
	site := Site{Target: "smg::server", File: "src/server.rs", Line: 709}
	l.Info(site, "Starting router on %s:%d", "0.0.0.0", 8081)
	l.Debug(site, "hidden")
	want := "\x1b[2m2026-12-02 15:04:05\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2msmg::server\x1b[0m\x1b[2m:\x1b[0m " +
		"\x1b[2msrc/server.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m709:\x1b[0m Starting router on 0.0.0.0:8081\n"
	if b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
	if got := Strip(b.String()); got != "2026-12-02 15:04:05  INFO smg::server: src/server.rs:709: Starting router on 0.0.0.0:8081\n" {
		t.Fatalf("stripped %q", got)
	}
}
