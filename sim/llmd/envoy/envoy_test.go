package envoy_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/envoy"
	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
	"github.com/gpustack/routing-conformance/sim/llmd/llmdtest"
	"github.com/gpustack/routing-conformance/sim/proc"
)

func TestParsesTheOperatorsBootstrap(t *testing.T) {
	cfg, err := envoy.ParseConfig([]byte(llmdtest.EnvoyYAML("86400")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenPort != 8081 || cfg.RouteTimeout != 86400*time.Second || !cfg.FailureModeAllow ||
		cfg.ExtProcAuthority != "localhost:9002" || cfg.ExtProcConnectTimeout != time.Second ||
		cfg.ProcessingMode["request_body_mode"] != "FULL_DUPLEX_STREAMED" || cfg.ProcessingMode["response_trailer_mode"] != "SEND" ||
		cfg.ExtProcAddr != "127.0.0.1:9002" || cfg.DestinationHeader != "x-gateway-destination-endpoint" ||
		len(cfg.RemoveHeaders) != 1 || cfg.RemoveHeaders[0] != "x-gateway-destination-endpoint" || cfg.ExtProcTimeout != 10*time.Second {
		t.Fatalf("%+v", cfg)
	}
	var keys []string
	for _, f := range cfg.AccessLog {
		keys = append(keys, f.Key)
	}
	if strings.Join(keys, ",") != "start_time,method,path,protocol,response_code,response_flags,response_code_details,duration,upstream_host,request_id,bytes_received,bytes_sent" {
		t.Fatalf("access log keys in config order: %v", keys)
	}
}

// picker is a stand-in ext_proc processor, served over gRPC, that routes to
// a fixed address.
type picker struct {
	dst       string
	immediate *extproc.Immediate
	fail      bool
	mu        sync.Mutex
	seen      map[string]string
}

func (p *picker) Open(context.Context) extproc.Stream { return p }
func (p *picker) Request(h map[string]string, _ []byte) (extproc.RequestReply, error) {
	p.mu.Lock()
	p.seen = maps.Clone(h)
	p.mu.Unlock()
	if p.fail {
		return extproc.RequestReply{}, io.ErrUnexpectedEOF
	}
	if p.immediate != nil {
		return extproc.RequestReply{Immediate: p.immediate}, nil
	}
	return extproc.RequestReply{SetHeaders: map[string]string{"x-gateway-destination-endpoint": p.dst}}, nil
}
func (p *picker) ResponseHeaders(int, map[string]string) (map[string]string, error) {
	return map[string]string{"x-went-into-resp-headers": "true"}, nil
}
func (p *picker) ResponseBody(b []byte, _ bool) ([]byte, error) { return b, nil }
func (p *picker) Close()                                        {}

func proxy(t *testing.T, timeout string, processor extproc.Processor) (*httptest.Server, *proc.Buffer) {
	t.Helper()
	cfg, err := envoy.ParseConfig([]byte(llmdtest.EnvoyYAML(timeout)))
	if err != nil {
		t.Fatal(err)
	}
	log := &proc.Buffer{}
	// The EPP's gRPC server on a loopback port; with no processor the
	// port is free again, so the dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if processor == nil {
		ln.Close()
	} else {
		srv := extproc.Serve(ln, processor)
		t.Cleanup(srv.Stop)
	}
	client, err := extproc.NewClient(addr, cfg.ExtProcAuthority, cfg.ExtProcConnectTimeout)
	if err != nil {
		t.Fatal(err)
	}
	p := envoy.NewProxy(cfg, client, log)
	s := httptest.NewServer(p)
	t.Cleanup(func() { s.Close(); p.Close(); client.Close() })
	return s, log
}

func accessLog(t *testing.T, log string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(log)), &m); err != nil {
		t.Fatalf("access log %q: %v", log, err)
	}
	return m
}

func post(t *testing.T, url, body string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestStripsTheClientsDestinationHeaderBeforeExtProc(t *testing.T) {
	e := llmdtest.StartEngine(t, "e", "127.0.5.1", 0)
	p := &picker{dst: e.Addr()}
	s, log := proxy(t, "86400", p)
	resp, body := post(t, s.URL+"/v1/chat/completions", `{"model":"m","messages":[]}`, map[string]string{"x-gateway-destination-endpoint": "10.1.1.1:80", "x-request-id": "rid-1"})
	if resp.StatusCode != 200 || !strings.Contains(body, `"served_by":"e"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	p.mu.Lock()
	_, ok := p.seen["x-gateway-destination-endpoint"]
	p.mu.Unlock()
	if ok {
		t.Fatal("the EPP must not see the client's copy")
	}
	h, _ := e.Last()
	if h.Get("x-gateway-destination-endpoint") != e.Addr() || h.Get("x-envoy-expected-rq-timeout-ms") != "86400000" || h.Get("x-request-id") != "rid-1" {
		t.Fatalf("upstream headers: %v", h)
	}
	l := accessLog(t, log.String())
	if l["response_code"] != float64(200) || l["response_flags"] != "-" || l["response_code_details"] != "via_upstream" ||
		l["upstream_host"] != e.Addr() || l["request_id"] != "rid-1" || l["method"] != "POST" || l["path"] != "/v1/chat/completions" ||
		l["protocol"] != "HTTP/1.1" || l["bytes_received"] != float64(len(`{"model":"m","messages":[]}`)) || l["bytes_sent"] != float64(len(body)) {
		t.Fatalf("access log: %v", l)
	}
}

func TestFailOpenWithoutTheEPPFindsNoUpstream(t *testing.T) {
	s, log := proxy(t, "86400", nil) // nothing listens on 127.0.0.1:9002
	resp, body := post(t, s.URL+"/v1/chat/completions", `{}`, map[string]string{"x-gateway-destination-endpoint": "127.0.0.1:1"})
	if resp.StatusCode != 503 || body != "no healthy upstream" {
		t.Fatalf("failure_mode_allow lets the request through to ORIGINAL_DST, which has no address: %d %q", resp.StatusCode, body)
	}
	l := accessLog(t, log.String())
	if l["response_flags"] != "UH" || l["response_code_details"] != "no_healthy_upstream" || l["upstream_host"] != nil {
		t.Fatalf("access log: %v", l)
	}
	s2, _ := proxy(t, "86400", &picker{fail: true})
	if resp, _ := post(t, s2.URL+"/", `{}`, nil); resp.StatusCode != 503 {
		t.Fatalf("a failed ext_proc stream also fails open: %d", resp.StatusCode)
	}
}

func TestImmediateResponseIsAnsweredByTheProxy(t *testing.T) {
	s, log := proxy(t, "86400", &picker{immediate: &extproc.Immediate{Status: 503,
		Body: []byte("inference error: ServiceUnavailable - failed to find endpoint candidates for serving the request")}})
	resp, body := post(t, s.URL+"/v1/chat/completions", `{}`, nil)
	if resp.StatusCode != 503 || !strings.HasPrefix(body, "inference error: ServiceUnavailable") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if l := accessLog(t, log.String()); l["response_code"] != float64(503) || l["upstream_host"] != nil {
		t.Fatalf("%v", l)
	}
}

func TestRouteTimeoutAnswers504(t *testing.T) {
	e := llmdtest.StartEngine(t, "slow", "127.0.5.2", 0)
	e.Hold = make(chan struct{})
	defer close(e.Hold)
	s, log := proxy(t, "0.2", &picker{dst: e.Addr()})
	resp, body := post(t, s.URL+"/v1/chat/completions", `{"model":"m"}`, nil)
	if resp.StatusCode != 504 || body != "upstream request timeout" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if l := accessLog(t, log.String()); l["response_flags"] != "UT" || l["response_code_details"] != "upstream_response_timeout" {
		t.Fatalf("%v", l)
	}
}

func TestStreamsAreRelayedUnchanged(t *testing.T) {
	e := llmdtest.StartEngine(t, "s", "127.0.5.3", 0)
	direct, err := http.Post("http://"+e.Addr()+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(direct.Body)
	direct.Body.Close()
	s, _ := proxy(t, "86400", &picker{dst: e.Addr()})
	resp, got := post(t, s.URL+"/v1/chat/completions", `{"model":"m","stream":true}`, nil)
	if resp.Header.Get("Content-Type") != "text/event-stream" || got != string(want) {
		t.Fatalf("relayed stream differs:\n got %q\nwant %q", got, want)
	}
}

func TestOnlyTheOperatorsProcessingModeIsAccepted(t *testing.T) {
	yaml := strings.Replace(llmdtest.EnvoyYAML("86400"), "request_body_mode: FULL_DUPLEX_STREAMED", "request_body_mode: BUFFERED", 1)
	if _, err := envoy.ParseConfig([]byte(yaml)); err == nil || !strings.Contains(err.Error(), "request_body_mode: BUFFERED") {
		t.Fatalf("another body mode is refused by name: %v", err)
	}
}

func TestFailClosedWithoutTheEPPAnswers500(t *testing.T) {
	cfg, err := envoy.ParseConfig([]byte(strings.Replace(llmdtest.EnvoyYAML("86400"), "failure_mode_allow: true", "failure_mode_allow: false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client, err := extproc.NewClient(addr, cfg.ExtProcAuthority, cfg.ExtProcConnectTimeout)
	if err != nil {
		t.Fatal(err)
	}
	log := &proc.Buffer{}
	p := envoy.NewProxy(cfg, client, log)
	s := httptest.NewServer(p)
	defer func() { s.Close(); p.Close(); client.Close() }()
	if resp, _ := post(t, s.URL+"/v1/chat/completions", `{}`, nil); resp.StatusCode != 500 {
		t.Fatalf("failure_mode_allow: false answers 500: %d", resp.StatusCode)
	}
	if l := accessLog(t, log.String()); l["response_code_details"] != "ext_proc_error_gRPC_error_14" {
		t.Fatalf("a refused connection is gRPC status 14 (UNAVAILABLE): %v", l)
	}
}
