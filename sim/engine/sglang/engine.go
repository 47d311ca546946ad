package sglang

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/sim/engine/internal/openai"
	"github.com/gpustack/routing-conformance/sim/engine/internal/prefixcache"
	"github.com/gpustack/routing-conformance/sim/engine/internal/sched"
	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// forceStreamInterval is SGLang's DEFAULT_FORCE_STREAM_INTERVAL: a
// non-streaming request's output reaches the tokenizer manager only every 50
// tokens and at the end, which is when its TTFT/ITL are observed.
const forceStreamInterval = 50

// idleLogInterval is how often an idle scheduler still logs its stats
// (check_memory: "During idle time, also collect metrics every 30 seconds").
const idleLogInterval = 30 * time.Second

// engine is the simulated scheduler + tokenizer manager.
type engine struct {
	cfg   *config
	knobs server.Knobs
	m     *metrics // nil without --enable-metrics
	sched *sched.Scheduler
	cache *prefixcache.RadixCache // nil with --disable-radix-cache

	mu          sync.Mutex
	decodeSteps int
	decodeSince int // decode tokens since the last stats log
	lastLog     time.Time
	lastHitRate float64
	lastThr     float64
}

func newEngine(cfg *config, knobs server.Knobs, m *metrics) *engine {
	e := &engine{cfg: cfg, knobs: knobs, m: m}
	e.sched = sched.New(sched.Config{MaxRunning: cfg.maxRunning, KVCapacity: cfg.maxTotal, KVUnit: cfg.pageSize})
	if !cfg.noRadix {
		e.cache = prefixcache.NewRadixCache(cfg.pageSize, cfg.maxTotal)
	}
	return e
}

// seq is one request.
type seq struct {
	prompt  []uint32
	out     openai.Output
	stream  bool // outputs every token (else every forceStreamInterval)
	arrival time.Time
	labels  string // the custom-labels header
	// counted is false for requests SGLang does not log metrics for
	// (health checks).
	counted bool
}

type result struct {
	cached    int
	generated int
	finish    string
}

// run admits, prefills and decodes s. emit is called at every output the
// tokenizer manager receives with the number of tokens generated so far
// (streaming: every token; otherwise every 50 tokens and the last).
func (e *engine) run(ctx context.Context, s *seq, emit func(upto int, r *result) error) (result, error) {
	var res result
	n := s.out.Tokens
	tk, err := e.sched.Admit(ctx, len(s.prompt)+n)
	if err != nil {
		if !errors.Is(err, sched.ErrTooLarge) {
			e.abortMetrics(s)
		}
		res.finish = openai.FinishAbort
		return res, err
	}
	defer func() {
		tk.Release()
		e.maybeIdleLog()
	}()
	p := len(s.prompt)
	if e.cache != nil {
		res.cached = e.cache.Match(s.prompt)
	}
	e.prefillLog(s, p, res.cached, tk.Queued)

	var pace sched.Pacer
	defer pace.Stop()
	var tok *tokChildren
	if e.m != nil && s.counted {
		tok = e.m.tokenizer(s.labels)
	}
	// A PD prefill node does not record TTFT (collect_metrics skips it).
	recordTTFT := e.cfg.disaggMode != "prefill"
	abort := func(err error) (result, error) {
		e.abortMetrics(s)
		res.finish = openai.FinishAbort
		return res, err
	}

	if err := pace.Wait(ctx, e.knobs.TTFT); err != nil {
		return abort(err)
	}
	if e.cache != nil {
		e.cache.Insert(s.prompt) // cache_unfinished_req after the prefill
	}
	interval := forceStreamInterval
	if s.stream {
		interval = 1
	}
	// Outputs happen at token counts interval, 2*interval, ... and n.
	var firstOut, lastOut time.Time
	lastCount := 0
	output := func(upto int) error {
		now := time.Now()
		if tok != nil {
			if firstOut.IsZero() {
				if recordTTFT {
					tok.ttft.get().Observe(now.Sub(s.arrival).Seconds())
				}
			} else if k := upto - lastCount; k > 0 {
				// observe_inter_token_latency: the raw interval once in the
				// sum, num_new_tokens in the bucket of interval/num_new_tokens.
				gap := now.Sub(lastOut).Seconds() / float64(k)
				for range k {
					tok.itl.get().Observe(gap)
				}
			}
		}
		if firstOut.IsZero() {
			firstOut = now
		}
		lastOut, lastCount = now, upto
		res.generated = upto
		if emit != nil {
			return emit(upto, &res)
		}
		return nil
	}
	done := 0
	if n > 0 {
		done = 1
		if done == n || done%interval == 0 {
			if err := output(done); err != nil {
				return abort(err)
			}
		}
	}
	for done < n {
		next := min((done/interval+1)*interval, n)
		if err := pace.Wait(ctx, time.Duration(next-done)*e.knobs.ITL); err != nil {
			res.generated = done
			return abort(err)
		}
		e.decodeTokens(next - done)
		done = next
		if err := output(done); err != nil {
			return abort(err)
		}
	}
	if n == 0 {
		if err := output(0); err != nil {
			return abort(err)
		}
	}
	end := time.Now()
	res.finish = s.out.Finish
	if e.cache != nil {
		ip := tokenize.GetIDs()
		*ip = s.out.AppendIDs(append(*ip, s.prompt...))
		e.cache.Insert(*ip) // cache_finished_req
		tokenize.PutIDs(ip)
	}
	if tok != nil {
		tok.prompt.get().Add(float64(p))
		tok.gen.get().Add(float64(n))
		if res.cached > 0 {
			tok.cached.get().Add(float64(res.cached))
		}
		tok.requests.get().Inc()
		tok.e2e.get().Observe(end.Sub(s.arrival).Seconds())
	}
	return res, nil
}

func (e *engine) abortMetrics(s *seq) {
	if e.m != nil && s.counted {
		e.m.tokenizer(s.labels).aborted.get().Inc()
	}
}

// prefillLog is log_prefill_stats for a prefill batch of this one request:
// the running count excludes the batch being prefilled, and cache_hit_rate
// is this batch's hit/(hit+new).
func (e *engine) prefillLog(s *seq, p, cached int, queued time.Duration) {
	if e.m == nil {
		return
	}
	st := e.sched.State()
	hit := 0.0
	if p > 0 {
		hit = float64(cached) / float64(p)
	}
	e.mu.Lock()
	decoded := e.decodeSince
	e.decodeSince = 0
	e.lastLog = time.Now()
	e.lastHitRate = hit
	thr := e.lastThr
	e.mu.Unlock()
	e.m.queueTime.WithLabelValues(e.m.schedValues...).Observe(queued.Seconds())
	e.m.logStats(schedStats{running: st.Running - 1, queue: st.Waiting, used: st.UsedKV, usage: st.Usage(), hitRate: hit, genThroughput: thr, maxTotal: e.cfg.maxTotal})
	e.m.addRealtime(p-cached, cached, decoded)
	_ = s
}

// decodeTokens advances the decode step counter; every --decode-log-interval
// steps the scheduler logs decode stats, which resets cache_hit_rate to 0.
func (e *engine) decodeTokens(k int) {
	if e.m == nil {
		return
	}
	e.mu.Lock()
	before := e.decodeSteps
	e.decodeSteps += k
	e.decodeSince += k
	if e.decodeSteps/e.cfg.decodeLog == before/e.cfg.decodeLog {
		e.mu.Unlock()
		return
	}
	now := time.Now()
	decoded := e.decodeSince
	e.decodeSince = 0
	if el := now.Sub(e.lastLog).Seconds(); el > 0 {
		e.lastThr = float64(decoded) / el
	}
	e.lastLog = now
	e.lastHitRate = 0
	thr := e.lastThr
	e.mu.Unlock()
	st := e.sched.State()
	e.m.logStats(schedStats{running: st.Running, queue: st.Waiting, used: st.UsedKV, usage: st.Usage(), hitRate: 0, genThroughput: thr, maxTotal: e.cfg.maxTotal})
	e.m.addRealtime(0, 0, decoded)
}

// maybeIdleLog is the idle-time stats log: when the scheduler has nothing
// to do and has not logged for 30 s, it logs the (empty) state once.
func (e *engine) maybeIdleLog() {
	if e.m == nil {
		return
	}
	st := e.sched.State()
	if st.Running > 0 || st.Waiting > 0 {
		return
	}
	e.mu.Lock()
	if e.lastLog.IsZero() || time.Since(e.lastLog) < idleLogInterval {
		e.mu.Unlock()
		return
	}
	e.lastLog = time.Now()
	hit := e.lastHitRate
	e.mu.Unlock()
	e.m.logStats(schedStats{running: st.Running, queue: st.Waiting, used: st.UsedKV, usage: st.Usage(), hitRate: hit, maxTotal: e.cfg.maxTotal})
}

// idleLoop runs maybeIdleLog once a second until stop closes.
func (e *engine) idleLoop(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			e.maybeIdleLog()
		}
	}
}

// runParallel runs the sequences of a request with n > 1 side by side: the
// tokenizer manager sends each of them to the scheduler as a request of its
// own with a fresh rid, and streams or collects their outputs as they come
// (_handle_batch_request in
// sgl-project/sglang@v0.5.18:python/sglang/srt/managers/tokenizer_manager.py).
// emit carries the sequence's index. The first error ends the others.
func (e *engine) runParallel(ctx context.Context, seqs []*seq, emit func(k, upto int, r *result) error) ([]result, error) {
	res := make([]result, len(seqs))
	err := sched.Fan(ctx, len(seqs), nil, func(ctx context.Context, k int) error {
		var em func(int, *result) error
		if emit != nil {
			em = func(upto int, r *result) error { return emit(k, upto, r) }
		}
		var err error
		res[k], err = e.run(ctx, seqs[k], em)
		return err
	})
	return res, err
}
