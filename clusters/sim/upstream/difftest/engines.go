package difftest

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/api"
)

// Which engine served a request is read from the engines, never from the
// routers: each engine's arrivals are the requests it finished plus those
// it holds now, a count that only grows, so the engines whose arrivals grew
// while one request ran are the ones it reached.
//
//	vLLM:   vllm:request_success_total (all finished reasons)
//	        + vllm:num_requests_running + vllm:num_requests_waiting
//	SGLang: sglang:num_requests_total + num_reqs of GET /get_load (its
//	        scheduler gauges are set only at its stats log; /get_load is live)

// arrivals reads every engine's arrivals, by label.
func (d *Deployment) arrivals(ctx context.Context) (map[string]int, error) {
	out := make(map[string]int, len(d.Engines))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(d.Engines))
	for i, e := range d.Engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := e.arrivals(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("engine %s: %w", e.Label, err)
				return
			}
			mu.Lock()
			out[e.Label] = n
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e Engine) arrivals(ctx context.Context) (int, error) {
	names := []string{"sglang:num_requests_total"}
	if e.kind == api.EngineVLLM {
		names = []string{"vllm:request_success_total", "vllm:num_requests_running", "vllm:num_requests_waiting"}
	}
	n, err := scrapeSum(ctx, e.URL+"/metrics", names)
	if err != nil || e.kind == api.EngineVLLM {
		return n, err
	}
	var load []struct {
		NumReqs int `json:"num_reqs"`
	}
	if err := getJSON(e.URL+"/get_load", &load); err != nil {
		return 0, err
	}
	for _, l := range load {
		n += l.NumReqs
	}
	return n, nil
}

// scrapeSum adds up every sample of the named series in a /metrics text,
// read line by line: the arrivals are read a few times per request, and a
// vLLM engine's whole exposition is large to parse each time.
func scrapeSum(ctx context.Context, url string, names []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		if !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("GET %s: %q: %v", url, line, err)
		}
		sum += v
	}
	return int(sum), sc.Err()
}

// settleTimeout bounds how long a request's arrivals may take to appear.
const settleTimeout = 10 * time.Second

// waitArrivals reads the arrivals until done(current) holds on two reads in
// a row that agree (a request leaving an engine's queue for its finished
// count may be missed by one read, never by two); it returns them.
func (d *Deployment) waitArrivals(ctx context.Context, done func(map[string]int) bool) (map[string]int, error) {
	deadline := time.Now().Add(settleTimeout)
	var last map[string]int
	for {
		cur, err := d.arrivals(ctx)
		if err != nil {
			return nil, err
		}
		if last != nil && maps.Equal(cur, last) && done(cur) {
			return cur, nil
		}
		last = cur
		if time.Now().After(deadline) {
			return last, fmt.Errorf("the engines' arrivals did not settle within %s (last %v)", settleTimeout, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
