package difftest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// HoldTokens is the max_tokens of a held request (with ignore_eos): with
// the engines' 1 ms per token it stays in flight about three seconds,
// longer than any phase of a sequence takes; a held request answered
// before its Drain fails the run as too slow a machine, never as a router
// difference.
const HoldTokens = 3000

// Step is one step of a request sequence.
type Step struct {
	// Note says what the step exercises (the picks table shows it).
	Note string
	// Route is the path posted to, e.g. /v1/chat/completions.
	Route string
	// Body is the request body; max_tokens defaults to 1 (but on
	// /generate, whose body has no such field).
	Body map[string]any
	// Raw, when set, is sent as the body instead, byte for byte (bodies a
	// router must refuse).
	Raw string
	// Get sends a GET of Route instead (no body).
	Get bool
	// Whole compares a 2xx answer's body too (an answer the router builds
	// itself; an engine's carries ids and times).
	Whole bool
	// Fault, when set, makes the engines at these candidate positions of
	// the router's order (e.g. "r0" or "r0,r1") answer every inference
	// request with FaultStatus while the step runs, as a chaos proxy in
	// their Pods would (the engines never see those requests).
	Fault       string
	FaultStatus int
	// Header are request headers besides Content-Type.
	Header map[string]string
	// Hold keeps the request in flight (max_tokens HoldTokens, or Tokens
	// when set) until the next Drain step or the end of the sequence.
	Hold   bool
	Tokens int
	// Drain sends nothing: it waits until every held request is answered.
	Drain bool
	// Repeat sends the step this many times (0 is once).
	Repeat int
}

// Chat is a /v1/chat/completions step with one user message.
func Chat(note, text string) Step {
	return Step{Note: note, Route: "/v1/chat/completions", Body: map[string]any{
		"model": Model, "messages": []any{map[string]any{"role": "user", "content": text}}}}
}

// Completion is a /v1/completions step.
func Completion(note, prompt string) Step {
	return Step{Note: note, Route: "/v1/completions", Body: map[string]any{"model": Model, "prompt": prompt}}
}

// Generate is a /generate step (SGLang's native API) with text.
func Generate(note, text string) Step {
	return Step{Note: note, Route: "/generate", Body: map[string]any{"text": text, "sampling_params": map[string]any{"max_new_tokens": 1}}}
}

// Get is a GET of route.
func Get(note, route string) Step { return Step{Note: note, Route: route, Get: true} }

// Faulted makes the engine at position pos answer status during s.
func (s Step) Faulted(pos string, status int) Step { s.Fault, s.FaultStatus = pos, status; return s }

// Compared compares s's 2xx body too.
func (s Step) Compared() Step { s.Whole = true; return s }

// Raw is a step posting body as it is.
func Raw(note, route, body string) Step { return Step{Note: note, Route: route, Raw: body} }

// Drain waits for the held requests.
func Drain() Step { return Step{Note: "drain", Drain: true} }

// Times repeats s n times.
func (s Step) Times(n int) Step { s.Repeat = n; return s }

// Held holds s in flight.
func (s Step) Held() Step { s.Hold = true; return s }

// HeldFor holds s in flight for about tokens milliseconds.
func (s Step) HeldFor(tokens int) Step { s.Hold, s.Tokens = true, tokens; return s }

// With adds a header.
func (s Step) With(name, value string) Step {
	h := map[string]string{}
	for k, v := range s.Header {
		h[k] = v
	}
	h[name] = value
	s.Header = h
	return s
}

// Field sets a body field.
func (s Step) Field(name string, value any) Step {
	b := make(map[string]any, len(s.Body)+1)
	for k, v := range s.Body {
		b[k] = v
	}
	b[name] = value
	s.Body = b
	return s
}

// Without drops a body field.
func (s Step) Without(name string) Step {
	b := make(map[string]any, len(s.Body))
	for k, v := range s.Body {
		if k != name {
			b[k] = v
		}
	}
	s.Body = b
	return s
}

// expand unrolls Repeat.
func expand(steps []Step) []Step {
	var out []Step
	for _, s := range steps {
		for range max(s.Repeat, 1) {
			out = append(out, s)
		}
	}
	return out
}

// Result is what one request of a sequence did.
type Result struct {
	Note string
	Held bool
	// Status is the router's answer (0 while a held request was not yet
	// answered, or when the request failed; Err says why).
	Status int
	// Body is the answer's body when it is not 2xx (the router's own error).
	Body string
	// Picks are the engines the request reached, by pool, in label order
	// (one per pool; more when the router retried, none when it answered
	// without an engine).
	Picks map[string][]string
	Err   error
}

// Run sends steps to r one after another, each once the previous one's
// arrivals have settled (a held one once it reached its engines), and
// returns a Result per request once every held one is answered. An error
// is the harness's, not a router's.
func (d *Deployment) Run(ctx context.Context, r *Router, steps []Step) ([]Result, error) {
	run, err := d.Start(ctx, r, steps)
	if err != nil {
		return nil, err
	}
	return run.Wait()
}

// Running is a sequence sent in full whose last held requests may still
// be in flight: the engines' arrivals no longer move for them, so another
// sequence can start over the same engines meanwhile.
type Running struct {
	wait func() ([]Result, error)
}

// Wait waits for the held requests and returns every request's Result.
func (r *Running) Wait() ([]Result, error) { return r.wait() }

// Start is Run up to the last request sent and picked, its held requests
// checked still in flight; Wait does the rest.
func (d *Deployment) Start(ctx context.Context, r *Router, steps []Step) (*Running, error) {
	base, err := d.waitArrivals(ctx, func(map[string]int) bool { return true })
	if err != nil {
		return nil, err
	}
	steps = expand(steps)
	n := 0
	for _, s := range steps {
		if !s.Drain {
			n++
		}
	}
	// Allocated once: a held request's goroutine writes its own element.
	results := make([]Result, n)
	var mu sync.Mutex
	type held struct {
		idx, tokens int
		done        chan struct{}
	}
	var holds []held
	waitHolds := func(hs []held) error {
		for _, h := range hs {
			limit := time.Duration(h.tokens)*time.Millisecond + settleTimeout
			select {
			case <-h.done:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(limit):
				return fmt.Errorf("held request #%d was not answered within %s", h.idx+1, limit)
			}
		}
		return nil
	}
	early := func() error {
		for _, h := range holds {
			select {
			case <-h.done:
				return fmt.Errorf("held request #%d was answered before its drain: the engines' %d ms hold was too short for this machine's load (a harness limit, not a router difference)",
					h.idx+1, h.tokens)
			default:
			}
		}
		return nil
	}
	idx := 0
	for _, s := range steps {
		if s.Drain {
			if err := waitHolds(holds); err != nil {
				return nil, err
			}
			holds = nil
			if base, err = d.waitArrivals(ctx, func(map[string]int) bool { return true }); err != nil {
				return nil, err
			}
			continue
		}
		if err := early(); err != nil {
			return nil, err
		}
		if s.Hold && s.Fault != "" {
			return nil, fmt.Errorf("step %q: a held request cannot carry a fault", s.Note)
		}
		body := map[string]any{"max_tokens": 1}
		if s.Route == "/generate" {
			body = map[string]any{}
		}
		for k, v := range s.Body {
			body[k] = v
		}
		tokens := HoldTokens
		if s.Tokens > 0 {
			tokens = s.Tokens
		}
		if s.Hold {
			// ignore_eos (a vLLM and SGLang sampling parameter) makes the
			// engine generate all max_tokens.
			body["max_tokens"], body["ignore_eos"] = tokens, true
		}
		i := idx
		idx++
		results[i] = Result{Note: s.Note, Held: s.Hold}
		lift := func() {}
		if s.Fault != "" {
			if lift, err = d.fault(r, s.Fault, s.FaultStatus); err != nil {
				return nil, fmt.Errorf("request #%d (%s): %w", i+1, s.Note, err)
			}
		}
		send := func() {
			var status int
			var text string
			var err error
			if s.Get {
				status, text, err = get(ctx, r.Base()+s.Route)
			} else {
				status, text, err = post(ctx, r.Base()+s.Route, body, s.Raw, s.Header)
			}
			mu.Lock()
			defer mu.Unlock()
			results[i].Status, results[i].Err = status, err
			if status/100 != 2 || s.Whole {
				results[i].Body = text
			}
		}
		var cur map[string]int
		if s.Hold {
			done := make(chan struct{})
			holds = append(holds, held{i, tokens, done})
			go func() { defer close(done); send() }()
			// Held: wait until it reached an engine in every pool.
			cur, err = d.waitArrivals(ctx, func(cur map[string]int) bool {
				for _, pool := range d.Pools() {
					if d.poolDelta(base, cur, pool) == 0 {
						return false
					}
				}
				return true
			})
		} else {
			send()
			lift()
			cur, err = d.waitArrivals(ctx, func(map[string]int) bool { return true })
		}
		if err != nil {
			return nil, fmt.Errorf("request #%d (%s): %w", i+1, s.Note, err)
		}
		mu.Lock()
		results[i].Picks = d.picks(base, cur)
		mu.Unlock()
		base = cur
	}
	if err := early(); err != nil {
		return nil, err
	}
	return &Running{wait: func() ([]Result, error) {
		if err := waitHolds(holds); err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(results), nil
	}}, nil
}

func (d *Deployment) poolDelta(before, after map[string]int, pool string) int {
	n := 0
	for _, e := range d.Engines {
		if e.Pool == pool {
			n += after[e.Label] - before[e.Label]
		}
	}
	return n
}

// picks are the engines whose arrivals grew, by pool, one entry per arrival.
func (d *Deployment) picks(before, after map[string]int) map[string][]string {
	out := map[string][]string{}
	for _, e := range d.Engines {
		for range after[e.Label] - before[e.Label] {
			out[e.Pool] = append(out[e.Pool], e.Label)
		}
	}
	return out
}

// get sends one GET and reads the whole answer.
func get(ctx context.Context, url string) (int, string, error) {
	return send(ctx, http.MethodGet, url, nil, nil)
}

// post sends one JSON request (raw, when set, as the body) and reads the
// whole answer.
func post(ctx context.Context, url string, body map[string]any, raw string, header map[string]string) (int, string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	if raw != "" {
		b = []byte(raw)
	}
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range header {
		h[k] = v
	}
	return send(ctx, http.MethodPost, url, b, h)
}

func send(ctx context.Context, method, url string, body []byte, header map[string]string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(text)), err
}
