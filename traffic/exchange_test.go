package traffic

import (
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
			var e eventReader
			e.reset(wrap(strings.NewReader(tc.stream)))
			var err error
			for err == nil {
				_, err = e.next()
			}
			if err != errDone && err != io.EOF {
				t.Fatalf("%s reads of %q: %v", name, tc.stream, err)
			}
			if done := err == errDone; done != tc.done {
				t.Errorf("%s reads of %q: saw [DONE] = %v, want %v", name, tc.stream, done, tc.done)
			}
		}
	}
}

func TestErrorBodyKeepsOnlyTheFirst4KiBAndDrainsTheRest(t *testing.T) {
	body := strings.NewReader(strings.Repeat("e", 10000))
	w := &worker{clock: arrivalClock{body: iotest.HalfReader(body)}}
	if err := w.readError(&exchange{}); err != nil {
		t.Fatal(err)
	}
	if w.errBody.Len() != errorBodyLimit {
		t.Errorf("kept %d bytes, want %d", w.errBody.Len(), errorBodyLimit)
	}
	if body.Len() != 0 {
		t.Errorf("%d bytes left unread: the connection could not be reused", body.Len())
	}
}

// A stream's chunks are decoded into one reused value: a field a chunk
// leaves out (or sends as null) must not keep the previous chunk's value.
func TestReusedChunkDecodingForgetsThePreviousChunk(t *testing.T) {
	var w worker
	first := w.decodeAnswer([]byte(`{"id":"a","choices":[{"delta":{"content":"hi"},"finish_reason":null},{"delta":{"content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`))
	if first == nil || len(first.Choices) != 2 || first.Choices[1].FinishReason != "length" || first.Usage == nil {
		t.Fatalf("first chunk decoded as %+v (%v)", first, w.decodeErr)
	}
	second := w.decodeAnswer([]byte(`{"choices":[{"delta":{},"finish_reason":null}]}`))
	if second == nil {
		t.Fatal(w.decodeErr)
	}
	if second.ID != "" || len(second.Choices) != 1 || second.Choices[0].Delta.Content != "" || second.Choices[0].FinishReason != "" || second.Usage != nil {
		t.Errorf("second chunk kept the first's fields: %+v", second)
	}
	if w.decodeAnswer([]byte(`{"choices":[{"delta":{"content":5}}]}`)) != nil || w.decodeErr == nil {
		t.Error("a content that is not a string decoded without error")
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

// The reused decoder reads each chunk as json.Unmarshal would: one value,
// nothing after it, and an error that is json.Unmarshal's.
func TestChunkDecodingAcceptsExactlyOneValue(t *testing.T) {
	var w worker
	for _, bad := range []string{`{"id":"a"} {"id":"b"}`, `{"id":"a"}}`, `{"id":`, `[1]`, ``} {
		if w.decodeAnswer([]byte(bad)) != nil {
			t.Errorf("%q decoded", bad)
		} else if !isJSONError(w.decodeErr) {
			t.Errorf("%q: error %v is not encoding/json's", bad, w.decodeErr)
		}
		if a := w.decodeAnswer([]byte(`{"id":"ok","choices":[{"text":"x"}]}`)); a == nil || a.ID != "ok" || a.Choices[0].Text != "x" {
			t.Errorf("after %q the next chunk decoded as %+v (%v)", bad, a, w.decodeErr)
		}
	}
}
