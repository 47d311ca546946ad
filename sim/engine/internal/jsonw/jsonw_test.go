package jsonw

import (
	"encoding/json"
	"testing"
)

func TestStringRoundTripsAndKeepsNonASCIIRaw(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "nl\n tab\t cr\r", "ctl\x01\x1f", "日本語 ünïcode", "<>&", "bad\xffutf8"} {
		out := String(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("String(%q) = %s is not JSON: %v", s, out, err)
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if back != want {
			t.Fatalf("round trip of %q gave %q", s, back)
		}
	}
	if got := string(String(nil, "日本 <a>")); got != `"日本 <a>"` {
		t.Fatalf("escaped non-ASCII or HTML: %s", got)
	}
	if got := string(String(nil, "\x01")); got != `"\u0001"` {
		t.Fatalf("control char: %s", got)
	}
}

func TestPyRepr(t *testing.T) {
	for in, want := range map[float64]string{0: "0.0", 1: "1.0", 0.4: "0.4", 1e-5: "1e-05", 1e16: "1e+16", 123456789: "123456789.0", 0.0001: "0.0001"} {
		if got := PyRepr(in); got != want {
			t.Errorf("PyRepr(%v) = %q, want %q", in, got, want)
		}
	}
}
