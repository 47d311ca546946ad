package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/internal/exposition"
	"github.com/gpustack/routing-conformance/metrics"
)

const model = "Qwen/Qwen3-0.6B"

func serve(t *testing.T, body string) (*exposition.Server, string) {
	t.Helper()
	srv := exposition.Serve(t, body)
	return srv, srv.URL
}

func scrape(t *testing.T, url string) metrics.Snapshot {
	t.Helper()
	s, err := metrics.Scrape(t.Context(), url)
	if err != nil {
		t.Fatalf("Scrape: %v", err)
	}
	return s
}

func TestScrapeParsesVLLMColonNames(t *testing.T) {
	_, url := serve(t, exposition.VLLM(model, map[string]int{"stop": 7, "length": 2}, 1, 3, 700, 96))
	s := scrape(t, url)
	if len(s.Sources) != 1 || s.Sources[0] != url {
		t.Errorf("Sources = %q, want [%q]", s.Sources, url)
	}
	if s.Time.IsZero() {
		t.Error("Time not set")
	}
	got, err := s.Sum("vllm:request_success_total")
	if err != nil || got != 9 {
		t.Errorf("Sum(request_success_total) = %v, %v; want 9 summed over finished_reason", got, err)
	}
	stop, err := s.Sum("vllm:request_success_total", metrics.Eq("finished_reason", "stop"))
	if err != nil || stop != 7 {
		t.Errorf("stop = %v, %v; want 7", stop, err)
	}
	if v, _ := s.Sum("vllm:num_requests_waiting"); v != 3 {
		t.Errorf("num_requests_waiting = %v, want 3", v)
	}
	if f := s.Families["vllm:request_success_total"]; f.Type != "counter" || f.Help != "Count of successfully processed requests." {
		t.Errorf("family = %+v", f)
	}
	if f := s.Families["vllm:prefix_cache_hits_created"]; f.Type != "gauge" {
		t.Errorf("_created family = %+v, want a gauge", f)
	}
	info, _ := s.Select("vllm:cache_config_info")
	if len(info) != 1 || info[0].Labels["block_size"] != "16" {
		t.Errorf("cache_config_info = %v", info)
	}
}

func TestHistogramIsFlattenedAsOnTheWire(t *testing.T) {
	_, url := serve(t, exposition.VLLM(model, map[string]int{"stop": 4}, 0, 0, 0, 0))
	s := scrape(t, url)
	if got := s.TypeOf("vllm:time_to_first_token_seconds_bucket"); got != "histogram" {
		t.Errorf("TypeOf(_bucket) = %q", got)
	}
	for _, c := range []struct {
		name string
		ms   []metrics.Matcher
		want float64
	}{
		{"vllm:time_to_first_token_seconds_count", nil, 4},
		{"vllm:time_to_first_token_seconds_bucket", []metrics.Matcher{metrics.Eq("le", "+Inf")}, 4},
		{"vllm:time_to_first_token_seconds_bucket", []metrics.Matcher{metrics.Eq("le", "0.005")}, 0},
		// vLLM writes "1.0"; the match is numeric so "1" names the same bucket.
		{"vllm:time_to_first_token_seconds_bucket", []metrics.Matcher{metrics.Eq("le", "1")}, 4},
		{"vllm:time_to_first_token_seconds_bucket", []metrics.Matcher{metrics.Eq("le", "1.0")}, 4},
	} {
		got, err := s.Sum(c.name, c.ms...)
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", metrics.Selector(c.name, c.ms), got, err, c.want)
		}
	}
	sum, _ := s.Sum("vllm:time_to_first_token_seconds_sum")
	if sum < 0.0243 || sum > 0.0245 {
		t.Errorf("_sum = %v", sum)
	}
	buckets, _ := s.Select("vllm:time_to_first_token_seconds_bucket")
	if len(buckets) != 23 {
		t.Errorf("%d buckets, want 23 (22 bounds and +Inf)", len(buckets))
	}
}

func TestScrapeParsesSGLangMultiprocessPage(t *testing.T) {
	_, url := serve(t, exposition.SGLang(model, 5, 500, 120, 0))
	s := scrape(t, url)
	if v, err := s.Sum("sglang:num_requests_total"); err != nil || v != 5 {
		t.Errorf("num_requests_total = %v, %v", v, err)
	}
	if v, err := s.Sum("sglang:cached_tokens_total", metrics.Eq("cache_source", "device")); err != nil || v != 120 {
		t.Errorf("cached_tokens_total = %v, %v", v, err)
	}
	if sel, _ := s.Select("sglang:num_retracted_reqs", metrics.Has("pid")); len(sel) != 1 {
		t.Errorf("pid-labelled gauge: %v", sel)
	}
}

func TestSGLangLazySeriesIsNoSeries(t *testing.T) {
	_, url := serve(t, exposition.SGLang(model, 0, 0, 0, 0))
	s := scrape(t, url)
	_, err := s.Sum("sglang:num_requests_total")
	if !metrics.IsNoSeries(err) {
		t.Fatalf("err = %v, want a NoSeriesError", err)
	}
	if !strings.Contains(err.Error(), "sglang:num_running_reqs") {
		t.Errorf("error does not offer the nearest names: %v", err)
	}
}

func TestScrapeParsesVLLMRouterPage(t *testing.T) {
	w1, w2 := "http://127.3.0.7:8000", "http://127.3.0.8:8000"
	_, url := serve(t, exposition.VLLMRouter("round_robin", map[string]int{w1: 60, w2: 60}, 2))
	s := scrape(t, url)
	by, err := s.SumBy("vllm_router_policy_decisions_total", "worker", metrics.Eq("policy", "round_robin"))
	if err != nil || by[w1] != 60 || by[w2] != 60 || len(by) != 2 {
		t.Errorf("SumBy worker = %v, %v", by, err)
	}
	if v, _ := s.Sum("vllm_router_generate_duration_seconds_bucket", metrics.Eq("le", "+Inf")); v != 120 {
		t.Errorf("+Inf bucket = %v", v)
	}
	if sel, _ := s.Select("vllm_router_running_requests"); len(sel) != 0 {
		t.Errorf("running_requests exists outside cache_aware: %v", sel)
	}
}

func TestScrapeParsesSMGPage(t *testing.T) {
	_, url := serve(t, exposition.SMG("round_robin", model, 120, []string{"http://127.3.0.7:8000", "http://127.3.0.8:8000"}))
	s := scrape(t, url)
	v, err := s.Sum("smg_worker_selection_total", metrics.Labels("policy", "round_robin", "worker_type", "regular")...)
	if err != nil || v != 120 {
		t.Errorf("smg_worker_selection_total = %v, %v", v, err)
	}
	if sel, _ := s.Select("smg_worker_selection_total", metrics.Has("worker")); len(sel) != 0 {
		t.Errorf("smg_worker_selection_total has a worker label: %v", sel)
	}
	if sel, _ := s.Select("smg_worker_health", metrics.Re("worker", `http://127\.3\.0\.\d+:8000`)); len(sel) != 2 {
		t.Errorf("regex selection: %v", sel)
	}
}

func TestPrefixHashPageHasNoHelpLine(t *testing.T) {
	s, err := metrics.ParseText("smg", []byte(exposition.SMG("prefix_hash", model, 3, []string{"http://a:8000"})))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Families["smg_prefix_hash_policy_branch_total"]; f.Type != "counter" || f.Help != "" {
		t.Errorf("family = %+v", f)
	}
}

func TestParseErrorQuotesTheLine(t *testing.T) {
	text := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_running{engine=\"0\" 2\n"
	_, err := metrics.ParseText("http://pod:8000/metrics", []byte(text))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"http://pod:8000/metrics", "line 3", `vllm:num_requests_running{engine=\"0\" 2`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestParseAcceptsBodyWithoutFinalNewline(t *testing.T) {
	s, err := metrics.ParseText("x", []byte("# TYPE a counter\na_total 3"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Sum("a_total"); v != 3 {
		t.Errorf("a_total = %v", v)
	}
}

func TestScrapeErrorNamesURLAndStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Not Found: metrics are off, start sglang with --enable-metrics", http.StatusNotFound)
	}))
	defer srv.Close()
	_, err := metrics.Scrape(t.Context(), srv.URL+"/metrics")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{srv.URL + "/metrics", "404 Not Found", "--enable-metrics"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestScrapeTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, err := metrics.Scrape(t.Context(), srv.URL, metrics.WithTimeout(50*time.Millisecond))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("err = %v, want a deadline error naming the URL", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("timeout not honoured")
	}
}

func TestScrapeHonoursCancelledContext(t *testing.T) {
	_, url := serve(t, "a 1\n")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := metrics.Scrape(ctx, url); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestScrapeUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/metrics"
	srv.Close()
	_, err := metrics.Scrape(t.Context(), url)
	if err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v", err)
	}
}

func TestScrapeWithSourceAndClient(t *testing.T) {
	_, url := serve(t, "x_total 1\n")
	s, err := metrics.Scrape(t.Context(), url, metrics.WithSource("router-0"), metrics.WithHTTPClient(&http.Client{}))
	if err != nil || s.Sources[0] != "router-0" {
		t.Fatalf("%v %v", s.Sources, err)
	}
}

func TestMergeAddsSourceLabelAndSums(t *testing.T) {
	w1 := "http://127.3.0.7:8000"
	a, _ := metrics.ParseText("router-a", []byte(exposition.SMG("round_robin", model, 70, []string{w1})))
	b, _ := metrics.ParseText("router-b", []byte(exposition.SMG("round_robin", model, 50, []string{w1})))
	m, err := metrics.Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.Sources, ",") != "router-a,router-b" {
		t.Errorf("Sources = %v", m.Sources)
	}
	if v, _ := m.Sum("smg_worker_selection_total"); v != 120 {
		t.Errorf("merged sum = %v, want 120", v)
	}
	by, _ := m.SumBy("smg_worker_selection_total", metrics.SourceLabel)
	if by["router-a"] != 70 || by["router-b"] != 50 {
		t.Errorf("by source = %v", by)
	}
	// Merging a merged snapshot keeps its labels.
	c, _ := metrics.ParseText("router-c", []byte(exposition.SMG("round_robin", model, 5, []string{w1})))
	m2, err := metrics.Merge(m, c)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := m2.Sum("smg_worker_selection_total"); v != 125 {
		t.Errorf("re-merged sum = %v", v)
	}
	if _, err := metrics.Merge(a, a); err == nil || !strings.Contains(err.Error(), `"router-a"`) {
		t.Errorf("duplicate source: %v", err)
	}
	if _, err := metrics.Merge(metrics.Snapshot{Samples: []metrics.Sample{{Name: "x"}}}); err == nil || !strings.Contains(err.Error(), "part 0") {
		t.Errorf("no source: %v", err)
	}
}

func TestDeltaOfEngineCounterAcrossScrapes(t *testing.T) {
	p, url := serve(t, exposition.VLLM(model, map[string]int{"stop": 10}, 0, 0, 100, 0))
	before := scrape(t, url)
	p.Set(exposition.VLLM(model, map[string]int{"stop": 70, "length": 2}, 0, 0, 900, 512))
	after := scrape(t, url)
	d, err := metrics.Delta(before, after, "vllm:request_success_total")
	if err != nil || d != 62 {
		t.Errorf("Delta = %v, %v; want 62", d, err)
	}
	by, err := metrics.DeltaBy(before, after, "vllm:request_success_total", "finished_reason")
	if err != nil || by["stop"] != 60 || by["length"] != 2 || by["abort"] != 0 {
		t.Errorf("DeltaBy = %v, %v", by, err)
	}
	if d, _ := metrics.Delta(before, after, "vllm:prefix_cache_hits_total"); d != 512 {
		t.Errorf("hits delta = %v", d)
	}
}

func TestCounterResetIsAnError(t *testing.T) {
	p, url := serve(t, exposition.VLLM(model, map[string]int{"stop": 50}, 0, 0, 0, 0))
	before := scrape(t, url)
	p.Set(exposition.VLLM(model, map[string]int{"stop": 3}, 0, 0, 0, 0))
	after := scrape(t, url)
	ds, err := metrics.Deltas(before, after, "vllm:request_success_total")
	var reset *metrics.CounterResetError
	if !errors.As(err, &reset) {
		t.Fatalf("err = %v, want CounterResetError", err)
	}
	if len(reset.Series) != 1 || reset.Series[0].Before != 50 || reset.Series[0].After != 3 {
		t.Errorf("reset series = %v", reset.Series)
	}
	if !strings.Contains(err.Error(), `finished_reason="stop"`) || !strings.Contains(err.Error(), "50 → 3") || !strings.Contains(err.Error(), "restarted") {
		t.Errorf("message = %v", err)
	}
	if len(ds) != 5 {
		t.Errorf("evidence has %d series, want all 5", len(ds))
	}
	if d, err := metrics.Delta(before, after, "vllm:request_success_total"); err == nil || d != 0 {
		t.Errorf("Delta = %v, %v; want 0 and an error, never a negative number", d, err)
	}
}

func TestVanishedSeriesIsAReset(t *testing.T) {
	before, _ := metrics.ParseText("a", []byte("# TYPE c counter\nc_total{w=\"1\"} 4\nc_total{w=\"2\"} 4\n"))
	after, _ := metrics.ParseText("a", []byte("# TYPE c counter\nc_total{w=\"1\"} 9\n"))
	_, err := metrics.Delta(before, after, "c_total")
	var reset *metrics.CounterResetError
	if !errors.As(err, &reset) || !reset.Series[0].AfterMissing || !strings.Contains(err.Error(), `c_total{w="2"}: 4 → absent`) {
		t.Fatalf("err = %v", err)
	}
}

func TestGaugeMayGoDown(t *testing.T) {
	before, _ := metrics.ParseText("a", []byte(exposition.VLLM(model, nil, 5, 0, 0, 0)))
	after, _ := metrics.ParseText("a", []byte(exposition.VLLM(model, nil, 1, 0, 0, 0)))
	if d, err := metrics.Delta(before, after, "vllm:num_requests_running"); err != nil || d != -4 {
		t.Errorf("gauge delta = %v, %v", d, err)
	}
}

func TestSeriesAppearingCountsFromZero(t *testing.T) {
	w1, w2 := "http://127.3.0.7:8000", "http://127.3.0.8:8000"
	before, _ := metrics.ParseText("r", []byte(exposition.VLLMRouter("round_robin", map[string]int{w1: 3}, 2)))
	after, _ := metrics.ParseText("r", []byte(exposition.VLLMRouter("round_robin", map[string]int{w1: 5, w2: 2}, 2)))
	ds, err := metrics.Deltas(before, after, "vllm_router_processed_requests_total")
	if err != nil || len(ds) != 2 {
		t.Fatalf("%v %v", ds, err)
	}
	if !ds[1].BeforeMissing || ds[1].Delta() != 2 || !strings.Contains(ds[1].String(), "absent(0) → 2 (+2)") {
		t.Errorf("new series = %+v (%s)", ds[1], ds[1])
	}
	if by := metrics.SumDeltasBy(ds, "worker"); len(by) != 2 || by[w1] != 2 || by[w2] != 2 {
		t.Errorf("SumDeltasBy = %v; want 2 on each worker", by)
	}
	if sum := metrics.SumDeltas(ds); sum != 4 {
		t.Errorf("SumDeltas = %v; want 4", sum)
	}
}

func TestNoSeriesOffersNearestNames(t *testing.T) {
	s, _ := metrics.ParseText("http://e:8000/metrics", []byte(exposition.VLLM(model, nil, 0, 0, 0, 0)))
	_, err := metrics.Delta(s, s, "vllm:request_sucess_total")
	var ns *metrics.NoSeriesError
	if !errors.As(err, &ns) {
		t.Fatalf("err = %v", err)
	}
	if len(ns.Nearest) == 0 || ns.Nearest[0] != "vllm:request_success_total" {
		t.Errorf("Nearest = %v", ns.Nearest)
	}
	if !strings.Contains(err.Error(), "http://e:8000/metrics") {
		t.Errorf("message lacks the source: %v", err)
	}
	// Right name, wrong labels: show the series of that name instead.
	_, err = s.Sum("vllm:request_success_total", metrics.Eq("finished_reason", "done"))
	if !errors.As(err, &ns) || len(ns.SameName) != 5 || !strings.Contains(err.Error(), `finished_reason="stop"`) {
		t.Errorf("err = %v", err)
	}
	// NoSeries is that same error, for a caller whose Select came back empty.
	if direct := s.NoSeries("vllm:request_success_total", metrics.Eq("finished_reason", "done")); direct.Error() != err.Error() {
		t.Errorf("NoSeries = %v; want Sum's error %v", direct, err)
	}
}

func TestBadMatchersAreErrors(t *testing.T) {
	s, _ := metrics.ParseText("a", []byte("x 1\n"))
	if _, err := s.Select("x", metrics.Re("w", "(")); err == nil || !strings.Contains(err.Error(), `w=~"("`) {
		t.Errorf("bad regex: %v", err)
	}
	if _, err := s.Select("x", metrics.Labels("policy")...); err == nil || !strings.Contains(err.Error(), "odd") {
		t.Errorf("odd labels: %v", err)
	}
	if _, err := s.Select("x", metrics.Matcher{Label: "w"}); err == nil {
		t.Error("zero Matcher accepted")
	}
}

func TestMatcherSemantics(t *testing.T) {
	l := map[string]string{"policy": "round_robin", "worker": "http://a:8000"}
	for _, c := range []struct {
		m    metrics.Matcher
		want bool
	}{
		{metrics.Eq("policy", "round_robin"), true},
		{metrics.Eq("missing", ""), true},
		{metrics.Ne("policy", "random"), true},
		{metrics.Has("worker"), true},
		{metrics.Has("missing"), false},
		{metrics.Re("worker", "http://a:.*"), true},
		{metrics.Re("worker", "a"), false}, // anchored
		{metrics.NotRe("policy", "cache_.*"), true},
	} {
		if got := c.m.Matches(l); got != c.want {
			t.Errorf("%s.Matches = %v", c.m, got)
		}
	}
	if got := metrics.Selector("x", []metrics.Matcher{metrics.Eq("a", "1"), metrics.Has("b")}); got != `x{a="1",b!=""}` {
		t.Errorf("Selector = %s", got)
	}
}
