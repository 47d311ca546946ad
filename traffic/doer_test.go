package traffic

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDoneLineIsSeenWhateverTheReadBoundaries(t *testing.T) {
	cases := []struct {
		stream string
		done   bool
	}{
		{"data: {}\n\ndata: [DONE]\n\n", true},
		{"data:[DONE]\n", true},
		{"data: [DONE]\r\n\r\n", true},
		{"data: [DONE]", true}, // last line without newline
		{"data: {}\n\n", false},
		{"data: {\"text\":\"data: [DONE]\"}\n\n", false},
		{"data: " + strings.Repeat("x", 64) + " [DONE]\n", false},
		{": [DONE]\n", false},
		{"event: [DONE]\n", false},
	}
	for _, tc := range cases {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":    func(r io.Reader) io.Reader { return r },
			"one-byte": iotest.OneByteReader,
			"half":     iotest.HalfReader,
		} {
			ex := &exchange{}
			body := &sseBody{ReadCloser: io.NopCloser(wrap(strings.NewReader(tc.stream))), ex: ex}
			if _, err := io.Copy(io.Discard, body); err != nil {
				t.Fatal(err)
			}
			if ex.sawDone != tc.done {
				t.Errorf("%s reads of %q: saw [DONE] = %v, want %v", name, tc.stream, ex.sawDone, tc.done)
			}
		}
	}
}

func TestErrorBodyKeepsOnlyTheFirst4KiB(t *testing.T) {
	var buf bytes.Buffer
	body := &teeBody{ReadCloser: io.NopCloser(iotest.HalfReader(strings.NewReader(strings.Repeat("e", 10000)))), buf: &buf}
	n, err := io.Copy(io.Discard, body)
	if err != nil || n != 10000 {
		t.Fatalf("read %d, %v", n, err)
	}
	if buf.Len() != errorBodyLimit {
		t.Errorf("kept %d bytes, want %d", buf.Len(), errorBodyLimit)
	}
}

func TestParseErrorBodyShapes(t *testing.T) {
	cases := map[string][3]string{
		`{"error":{"message":"m","type":"t","param":null,"code":400}}`:                                            {"t", "m", "400"},
		`{"object":"error","message":"m","type":"t","param":null,"code":503}`:                                     {"t", "m", "503"},
		`{"error":{"type":"Service Unavailable","code":"no_available_workers","message":"No available workers"}}`: {"Service Unavailable", "No available workers", "no_available_workers"},
		`{"error":"plain"}`: {"", "plain", ""},
		`not json`:          {"", "", ""},
		`[1,2]`:             {"", "", ""},
	}
	for body, want := range cases {
		typ, msg, code := parseErrorBody([]byte(body))
		if [3]string{typ, msg, code} != want {
			t.Errorf("parseErrorBody(%s) = %q %q %q, want %q", body, typ, msg, code, want)
		}
	}
}
