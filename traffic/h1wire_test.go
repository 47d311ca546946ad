package traffic

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWireFastPathsMatchNetHTTP(t *testing.T) {
	t.Run("requests", testRequestWriteMatches)
	t.Run("responses", testReadResponseMatches)
}

func testRequestWriteMatches(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`
	for _, tc := range []struct {
		name   string
		url    string
		header map[string][]string
		fast   bool
		edit   func(*http.Request)
	}{
		{name: "go-openai chat", url: "http://127.0.0.1:8081/v1/chat/completions",
			header: map[string][]string{"Accept": {"application/json"}, "Content-Type": {"application/json"}}, fast: true},
		{name: "plan headers and a key", url: "http://router.example/v1/completions",
			header: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer k"},
				"X-Session-Id": {"s-3"}, "x-lower": {"v"}, "Cache-Control": {"no-cache"}, "Accept": {"text/event-stream"},
				"Connection": {"keep-alive"}, "X-Multi": {"a", "b"}, "X-Empty": {""}}, fast: true},
		{name: "ipv6 host and query", url: "http://[::1]:9/v1/chat/completions?x=1",
			header: map[string][]string{"Content-Type": {"application/json"}}, fast: true},
		{name: "user agent set", url: "http://h/v1/chat/completions",
			header: map[string][]string{"User-Agent": {"tool/1"}}},
		{name: "value to trim", url: "http://h/v1/chat/completions",
			header: map[string][]string{"X-A": {" padded "}}},
		{name: "value with newline", url: "http://h/v1/chat/completions",
			header: map[string][]string{"X-A": {"a\nb"}}},
		{name: "close", url: "http://h/v1/chat/completions", edit: func(r *http.Request) { r.Close = true }},
		{name: "unknown length", url: "http://h/v1/chat/completions",
			edit: func(r *http.Request) { r.ContentLength = -1; r.Body = io.NopCloser(strings.NewReader(body)) }},
		{name: "escaped path", url: "http://h/v1/a%20b/chat", fast: true},
	} {
		build := func() *http.Request {
			req, err := http.NewRequest(http.MethodPost, tc.url, bytes.NewBufferString(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range tc.header {
				req.Header[k] = vs
			}
			if tc.edit != nil {
				tc.edit(req)
			}
			return req
		}
		if got := fastWritable(build()); got != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.name, got, tc.fast)
		}
		var want, got bytes.Buffer
		if err := build().Write(&want); err != nil {
			t.Fatalf("%s: Request.Write: %v", tc.name, err)
		}
		bw := bufio.NewWriter(&got)
		if err := writeRequest(bw, build()); err != nil {
			t.Fatalf("%s: writeRequest: %v", tc.name, err)
		}
		_ = bw.Flush()
		if got.String() != want.String() {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got.String(), want.String())
		}
	}
}

func testReadResponseMatches(t *testing.T) {
	const json = `{"id":"chatcmpl-1","choices":[]}`
	chunked := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"e\r\ndata: {\"a\":1}\n\n\r\n" + "e\r\ndata: [DONE]\n\n\r\n" + "0\r\n\r\n"
	next := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" // the next answer on the connection
	for _, tc := range []struct {
		name string
		raw  string
		fast bool
		// trailers: net/http records them in Response.Trailer, the fast
		// path drops them; only the bodies and what follows are compared.
		trailers bool
		oneByte  bool
	}{
		{name: "json", raw: "HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 16:26:26 GMT\r\nContent-Type: application/json\r\nContent-Length: 33\r\n\r\n" + json, fast: true},
		{name: "sse chunked", raw: chunked, fast: true},
		{name: "error json", raw: "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Request-Id: r1\r\nContent-Length: 33\r\n\r\n" + json, fast: true},
		{name: "lower-case and odd-case names, repeats, padding", raw: "HTTP/1.1 200 OK\r\nx-request-id:  r2 \r\nX-INFERENCE-POD: p\r\nx-foo-bar: 1\r\nX-Foo-Bar: 2\r\nset-cookie: a\r\nSet-Cookie: b\r\ncontent-length: 2\r\n\r\n{}", fast: true},
		{name: "no reason phrase", raw: "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", fast: true},
		{name: "utf-8 value", raw: "HTTP/1.1 200 OK\r\nX-Note: h\xc3\xa9\r\nContent-Length: 2\r\n\r\n{}", fast: true},
		{name: "chunked with trailers", raw: strings.Replace(chunked, "0\r\n\r\n", "0\r\nX-T: 1\r\n\r\n", 1), fast: true, trailers: true},
		{name: "truncated length body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + json, fast: true},
		{name: "truncated chunked body", raw: strings.TrimSuffix(chunked, "0\r\n\r\n")[:90], fast: true},
		{name: "header not yet buffered", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", oneByte: true},
		{name: "http/1.0", raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "connection close", raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "length and chunked", raw: strings.Replace(chunked, "Transfer-Encoding", "Content-Length: 5\r\nTransfer-Encoding", 1)},
		{name: "no framing", raw: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close"},
		{name: "folded header", raw: "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "pragma", raw: "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "no content", raw: "HTTP/1.1 204 No Content\r\n\r\n"},
		{name: "interim", raw: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"},
		{name: "two lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "bare LF", raw: "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\n{}"},
		{name: "space before colon", raw: "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "garbage", raw: "hello\r\n\r\n"},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://h/v1/chat/completions", nil)
		reader := func() *bufio.Reader {
			var r io.Reader = strings.NewReader(tc.raw + next)
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			return bufio.NewReaderSize(r, 4096)
		}
		fbr := reader()
		if got := fastReadResponse(fbr, req) != nil; got != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.name, got, tc.fast)
		}
		wbr, gbr := reader(), reader()
		want, werr := http.ReadResponse(wbr, req)
		got, gerr := readResponse(gbr, req)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Errorf("%s: error %v, want %v", tc.name, gerr, werr)
			continue
		}
		if werr != nil {
			continue
		}
		wbody, wberr := io.ReadAll(want.Body)
		gbody, gberr := io.ReadAll(got.Body)
		if string(gbody) != string(wbody) || (wberr == nil) != (gberr == nil) || wberr != nil && wberr.Error() != gberr.Error() {
			t.Errorf("%s: body %q (%v), want %q (%v)", tc.name, gbody, gberr, wbody, wberr)
		}
		wrest, _ := io.ReadAll(wbr)
		grest, _ := io.ReadAll(gbr)
		if string(grest) != string(wrest) {
			t.Errorf("%s: left %q after the body, want %q", tc.name, grest, wrest)
		}
		if !tc.trailers && !reflect.DeepEqual(got.Trailer, want.Trailer) {
			t.Errorf("%s: trailer %v, want %v", tc.name, got.Trailer, want.Trailer)
		}
		got.Body, want.Body, got.Trailer, want.Trailer = nil, nil, nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, want)
		}
	}
}
