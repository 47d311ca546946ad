package httpx

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadJSONAnswersLikeAxumJsonExtractor: the status and text of each
// rejection both routers give (415, 413, 400, 422) and a pass-through.
func TestReadJSONAnswersLikeAxumJsonExtractor(t *testing.T) {
	for _, c := range []struct {
		name, ct, body string
		limit          uint64
		required       []string
		status         int
		prefix         string
	}{
		{"no json content type", "text/plain", `{}`, 100, nil, 415, "Expected request with `Content-Type: application/json`"},
		{"over the limit", "application/json", `{"a":"` + strings.Repeat("x", 50) + `"}`, 10, nil, 413, "length limit exceeded"},
		{"syntax error", "application/json", `{bad`, 100, nil, 400, "Failed to parse the request body as JSON: "},
		{"not an object", "application/json", `[1]`, 100, nil, 422, "Failed to deserialize the JSON body into the target type: expected a JSON object"},
		{"missing field", "application/vnd.x+json", `{"model":"m"}`, 100, []string{"messages"}, 422, "Failed to deserialize the JSON body into the target type: missing field `messages`"},
		{"ok", "application/json; charset=utf-8", `{"messages":[]}`, 100, []string{"messages"}, 200, "ok"},
	} {
		h := LimitBody(c.limit, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, obj, ok := ReadJSON(w, r, c.required...); ok && obj != nil {
				Text(w, http.StatusOK, "ok")
			}
		}))
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ct)
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || !strings.HasPrefix(rec.Body.String(), c.prefix) {
			t.Errorf("%s: %d %q, want %d %q…", c.name, rec.Code, rec.Body.String(), c.status, c.prefix)
		}
	}
}

// TestSerdeErrorsAreTheWheelsText: what both wheels answered for these
// bodies (axum's Json over serde_json and serde_path_to_error): the error,
// the path to it, and serde_json's line and column; a missing field is
// reported where the object ends, and before trailing characters.
func TestSerdeErrorsAreTheWheelsText(t *testing.T) {
	for _, c := range []struct {
		body     string
		required []string
		status   int
		want     string
	}{
		{"{not json", nil, 400, "Failed to parse the request body as JSON: key must be a string at line 1 column 2"},
		{`{"model":`, nil, 400, "Failed to parse the request body as JSON: model: EOF while parsing a value at line 1 column 9"},
		{`{"model":"m",}`, nil, 400, "Failed to parse the request body as JSON: trailing comma at line 1 column 14"},
		{`{"stream":tru}`, nil, 400, "Failed to parse the request body as JSON: stream: expected ident at line 1 column 14"},
		{`{"prompt":"abc`, nil, 400, "Failed to parse the request body as JSON: prompt: EOF while parsing a string at line 1 column 14"},
		{"{}\n x", []string{"messages"}, 422, "Failed to deserialize the JSON body into the target type: missing field `messages` at line 1 column 2"},
		{`{"model":"Qwen/Qwen2.5-0.5B-Instruct"}`, []string{"prompt"}, 422, "Failed to deserialize the JSON body into the target type: missing field `prompt` at line 1 column 38"},
		{"{\"model\":\n\"Qwen/Qwen2.5-0.5B-Instruct\"}", []string{"prompt"}, 422, "Failed to deserialize the JSON body into the target type: missing field `prompt` at line 2 column 29"},
		// Not seen on the wheels, but the same rules: a path into arrays,
		// trailing characters once the value deserialized.
		{`{"messages":[{"role":"user"},{"role":}]}`, nil, 400, "Failed to parse the request body as JSON: messages[1].role: expected value at line 1 column 38"},
		{"{} x", nil, 400, "Failed to parse the request body as JSON: trailing characters at line 1 column 4"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		_, _, rej := DecodeJSON(req, c.required...)
		if rej == nil || rej.Status != c.status || rej.Text != c.want {
			t.Errorf("%q: %+v\nwant %d %s", c.body, rej, c.status, c.want)
		}
	}
}

func TestOnlyAnswers405WithTheRoutersAllowHeader(t *testing.T) {
	h := Only(http.MethodGet, "GET,HEAD", func(w http.ResponseWriter, r *http.Request) { Text(w, 200, "ok") })
	for method, want := range map[string]int{http.MethodGet: 200, http.MethodHead: 200, http.MethodPost: 405} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(method, "/", nil))
		if rec.Code != want {
			t.Errorf("%s: %d, want %d", method, rec.Code, want)
		}
		if want == 405 && rec.Header().Get("Allow") != "GET,HEAD" {
			t.Errorf("Allow %q", rec.Header().Get("Allow"))
		}
	}
}

func TestOrderedKeepsKeyOrderAndRawValues(t *testing.T) {
	if got := string(Ordered("status", "not ready", "n", 2, "ok", true)); got != `{"status":"not ready","n":2,"ok":true}` {
		t.Fatalf("%s", got)
	}
	inner := json.RawMessage(Ordered("type", "x", "code", "y"))
	if got := string(Ordered("error", inner)); got != `{"error":{"type":"x","code":"y"}}` {
		t.Fatalf("%s", got)
	}
}

// TestWriteForcesEventStreamExceptOnRouterMadeJSON: a buffered answer to a
// stream request is retyped text/event-stream, a router-made JSON error
// (SG) keeps its own headers, router-made text is text/plain; Done runs
// once the answer is out.
func TestWriteForcesEventStreamExceptOnRouterMadeJSON(t *testing.T) {
	up := http.Header{"Content-Type": {"application/json"}, "Connection": {"close"}, "X-Up": {"1"}}
	done := 0
	rec := httptest.NewRecorder()
	Outcome{Status: 503, Header: up, Body: []byte("e"), Done: func() { done++ }}.Write(rec, true)
	if rec.Code != 503 || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Header().Get("X-Up") != "1" ||
		rec.Header().Get("Connection") != "" || rec.Header().Get("Content-Length") != "1" || done != 1 {
		t.Fatalf("buffered stream answer: %d %v done=%d", rec.Code, rec.Header(), done)
	}
	smg := http.Header{"Content-Type": {"application/json"}, "X-Smg-Error-Code": {"no_available_workers"}}
	rec = httptest.NewRecorder()
	Outcome{Status: 503, Header: smg, Body: []byte("{}"), RouterMade: true}.Write(rec, true)
	if rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("X-Smg-Error-Code") != "no_available_workers" {
		t.Fatalf("router-made JSON: %v", rec.Header())
	}
	rec = httptest.NewRecorder()
	RouterText(503, "No available workers").Write(rec, true)
	if rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || rec.Body.String() != "No available workers" {
		t.Fatalf("router-made text: %v %q", rec.Header(), rec.Body.String())
	}
}

func TestWriteRelaysLiveBodyUnchangedThroughOnChunk(t *testing.T) {
	chunks := []string{"data: a\n\n", ": keep-alive\n\n", "data: [DONE]\n\n"}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		for _, c := range chunks {
			_, _ = io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	resp, err := http.Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	done := false
	rec := httptest.NewRecorder()
	Outcome{Status: resp.StatusCode, Header: resp.Header, Live: resp,
		OnChunk: func(b []byte) { seen.Write(b) }, Done: func() { done = true }}.Write(rec, true)
	want := strings.Join(chunks, "")
	if rec.Body.String() != want || seen.String() != want || !done || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("relayed %q seen %q done=%v ct=%q", rec.Body.String(), seen.String(), done, rec.Header().Get("Content-Type"))
	}
}
