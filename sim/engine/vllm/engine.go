package vllm

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

// engine is the simulated EngineCore: FCFS admission under --max-num-seqs
// and the KV pool, block-hash prefix caching, TTFT/ITL pacing, and the
// per-request statistics vLLM records.
type engine struct {
	cfg   *config
	knobs server.Knobs
	m     *metrics
	sched *sched.Scheduler
	cache *prefixcache.BlockCache // nil with --no-enable-prefix-caching
}

func newEngine(cfg *config, knobs server.Knobs, m *metrics) *engine {
	e := &engine{cfg: cfg, knobs: knobs, m: m}
	blocks := cfg.kvBlocks()
	e.sched = sched.New(sched.Config{MaxRunning: cfg.maxNumSeqs, KVCapacity: blocks * cfg.blockSize, KVUnit: cfg.blockSize})
	m.sched.state = e.sched.State
	if cfg.prefixCaching {
		e.cache = prefixcache.NewBlockCache(cfg.blockSize, blocks)
	}
	return e
}

// seq is one request as the engine sees it.
type seq struct {
	prompt    []uint32
	salt      string
	skipCache bool // prompt_logprobs requests bypass the prefix cache
	out       openai.Output
	maxTokens int // SamplingParams.max_tokens: the request's, capped by the context window
	arrival   time.Time
	// cacheOnAdmit caches the prompt's full blocks as soon as the sequence
	// is admitted, as vLLM's KVCacheManager.allocate_slots does when it
	// allocates them (vllm-project/vllm@98dff2a81:vllm/v1/core/kv_cache_manager.py):
	// the children of an n > 1 request, scheduled one after another, find
	// the first child's blocks. A single request keeps caching them after
	// its prefill (the sim's way; see doc.go).
	cacheOnAdmit bool
	// remote is a decode engine's remote prefill: the prompt's KV, past
	// what the local cache holds, comes from the prefill engine.
	remote bool
	// admitted, if not nil, is called once the sequence was admitted and
	// looked up the cache.
	admitted func()
}

// result is what happened to a sequence.
type result struct {
	cached    int // prompt tokens found in the local prefix cache
	external  int // prompt tokens whose KV the connector loads (remote prefill)
	generated int
	finish    string // stop, length or abort
}

// run admits, prefills and decodes s. emit, if not nil, is called with each
// token index as the token is produced (streaming); its error (client gone)
// aborts the sequence, as does ctx ending.
func (e *engine) run(ctx context.Context, s *seq, emit func(i int, r *result) error) (result, error) {
	var res result
	n := s.out.Tokens
	tk, err := e.sched.Admit(ctx, len(s.prompt)+n)
	if err != nil {
		if !errors.Is(err, sched.ErrTooLarge) {
			e.m.success[openai.FinishAbort].Inc()
		}
		res.finish = openai.FinishAbort
		return res, err
	}
	defer tk.Release()

	p := len(s.prompt)
	if e.cache != nil && !s.skipCache {
		res.cached = e.cache.Match(s.prompt, s.salt)
		if s.cacheOnAdmit {
			e.cache.Insert(s.prompt, s.salt)
		}
	}
	if s.admitted != nil {
		s.admitted()
	}
	if e.cache != nil {
		e.m.prefixQueries.Add(float64(p))
		e.m.prefixHits.Add(float64(res.cached))
	}
	// With a KV connector the scheduler asks it, at the request's first
	// scheduling, for the tokens past the local hit; MooncakeConnector
	// offers the whole rest of the prompt on a remote prefill, nothing
	// otherwise. connector_prefix_cache_stats records the query (prompt
	// minus local hit) and the hit, and the request's PrefillStats split
	// its prompt into local hit, external transfer and local compute
	// (vllm-project/vllm@98dff2a81:vllm/v1/core/sched/scheduler.py schedule,
	// vllm/v1/metrics/stats.py PrefillStats). The engine then recomputes the
	// last prompt token (_update_waiting_for_remote_kv); the sim's TTFT
	// stands for transfer and step together.
	if s.remote {
		res.external = p - res.cached
	}
	if e.cfg.kvTransferConfig != "" && p > res.cached {
		e.m.extQueries.Add(float64(p - res.cached))
		e.m.extHits.Add(float64(res.external))
	}
	e.m.promptTokens.Add(float64(p))
	e.m.promptCached.Add(float64(res.cached + res.external))
	e.m.bySourceCompute.Add(float64(p - res.cached - res.external))
	e.m.bySourceCache.Add(float64(res.cached))
	e.m.bySourceExternal.Add(float64(res.external))

	var pace sched.Pacer
	defer pace.Stop()
	abort := func(err error) (result, error) {
		e.m.genTokens.Add(float64(res.generated))
		e.m.success[openai.FinishAbort].Inc()
		res.finish = openai.FinishAbort
		return res, err
	}

	// Prefill: the first token comes after TTFT.
	if err := pace.Wait(ctx, e.knobs.TTFT); err != nil {
		return abort(err)
	}
	if e.cache != nil && !s.skipCache {
		e.cache.Insert(s.prompt, s.salt)
	}
	firstTok := time.Now()
	if n > 0 {
		res.generated = 1
		e.m.ttft.Observe(firstTok.Sub(s.arrival).Seconds())
	}
	// iteration_tokens_total observes the tokens computed in a step: the
	// prompt less what was cached or transferred (PromptTokenStats.computed,
	// vllm/v1/metrics/loggers.py).
	e.m.iterationTokens.Observe(float64(p - res.cached - res.external + min(n, 1)))

	// Decode: one token per ITL.
	if emit != nil {
		if n > 0 {
			if err := emit(0, &res); err != nil {
				return abort(err)
			}
		}
		last := firstTok
		for i := 1; i < n; i++ {
			if err := pace.Wait(ctx, e.knobs.ITL); err != nil {
				return abort(err)
			}
			now := time.Now()
			e.m.itl.Observe(now.Sub(last).Seconds())
			e.m.iterationTokens.Observe(1)
			last = now
			res.generated = i + 1
			if err := emit(i, &res); err != nil {
				return abort(err)
			}
		}
	} else if n > 1 {
		if err := pace.Wait(ctx, time.Duration(n-1)*e.knobs.ITL); err != nil {
			return abort(err)
		}
		gap := time.Since(firstTok).Seconds() / float64(n-1)
		for range n - 1 {
			e.m.itl.Observe(gap)
			e.m.iterationTokens.Observe(1)
		}
		res.generated = n
	}
	end := time.Now()
	res.finish = s.out.Finish

	if e.cache != nil && !s.skipCache {
		// Completed blocks of the output are cached too.
		ip := tokenize.GetIDs()
		*ip = s.out.AppendIDs(append(*ip, s.prompt...))
		e.cache.Insert(*ip, s.salt)
		tokenize.PutIDs(ip)
	}

	e.m.genTokens.Add(float64(n))
	e.m.success[res.finish].Inc()
	e.m.e2e.Observe(end.Sub(s.arrival).Seconds())
	e.m.queue.Observe(tk.Queued.Seconds())
	e.m.inference.Observe(end.Sub(tk.Admitted).Seconds())
	e.m.prefill.Observe(firstTok.Sub(tk.Admitted).Seconds())
	e.m.decode.Observe(end.Sub(firstTok).Seconds())
	// mean_time_per_output_token is 0 for a request with one output token
	// (IterationStats.update_from_finished_request, vllm/v1/metrics/stats.py).
	tpot := 0.0
	if n > 1 {
		tpot = end.Sub(firstTok).Seconds() / float64(n-1)
	}
	e.m.tpot.Observe(tpot)
	e.m.promptTokensHist.Observe(float64(p))
	e.m.genTokensHist.Observe(float64(n))
	if s.maxTokens > 0 {
		e.m.paramsMaxTokens.Observe(float64(s.maxTokens))
	}
	e.m.prefillKV.Observe(float64(p - res.cached - res.external))
	return res, nil
}

// finishParent records what vLLM records once per request rather than per
// engine sequence, when the last of its n sequences finished
// (ParentRequest.observe_finished_request in
// vllm-project/vllm@98dff2a81:vllm/v1/engine/parallel_sampling.py):
// request_params_n observes n, and request_max_num_generation_tokens the
// most tokens any of its sequences generated.
func (e *engine) finishParent(n int, res []result) {
	most := 0
	for _, r := range res {
		most = max(most, r.generated)
	}
	e.m.paramsN.Observe(float64(n))
	e.m.maxGenTokens.Observe(float64(most))
}

// runN runs the n sequences of one request. vLLM's AsyncLLM.add_request
// fans a request with n > 1 out into n child requests "<i>_<id>", each with
// n=1, added one after another (vllm-project/vllm@98dff2a81:vllm/v1/engine/async_llm.py,
// parallel_sampling.py ParentRequest.get_child_info); the engine core
// schedules, counts and finishes each child as a request of its own. So
// does runN: child i+1 is admitted after child i, the children decode side
// by side, and each one's emit calls carry its index. The first error ends
// the others (a client gone aborts every child).
func (e *engine) runN(ctx context.Context, seqs []*seq, emit func(child, i int, r *result) error) ([]result, error) {
	if len(seqs) == 1 {
		var em func(int, *result) error
		if emit != nil {
			em = func(i int, r *result) error { return emit(0, i, r) }
		}
		r, err := e.run(ctx, seqs[0], em)
		return []result{r}, err
	}
	res := make([]result, len(seqs))
	admitted := make([]chan struct{}, len(seqs))
	for k, s := range seqs {
		admitted[k] = make(chan struct{})
		s.admitted = sync.OnceFunc(func() { close(admitted[k]) })
		s.cacheOnAdmit = true
	}
	err := sched.Fan(ctx, len(seqs), func(k int) <-chan struct{} { return admitted[k] }, func(ctx context.Context, k int) error {
		defer seqs[k].admitted()
		var em func(int, *result) error
		if emit != nil {
			em = func(i int, r *result) error { return emit(k, i, r) }
		}
		var err error
		res[k], err = e.run(ctx, seqs[k], em)
		return err
	})
	return res, err
}
