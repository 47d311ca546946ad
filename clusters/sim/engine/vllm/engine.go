package vllm

import (
	"context"
	"errors"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/openai"
	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/prefixcache"
	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/sched"
	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/tokenize"
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
}

// result is what happened to a sequence.
type result struct {
	cached    int
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
	}
	if e.cache != nil {
		e.m.prefixQueries.Add(float64(p))
		e.m.prefixHits.Add(float64(res.cached))
	}
	e.m.promptTokens.Add(float64(p))
	e.m.promptCached.Add(float64(res.cached))
	e.m.bySourceCompute.Add(float64(p - res.cached))
	e.m.bySourceCache.Add(float64(res.cached))

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
	e.m.iterationTokens.Observe(float64(p + min(n, 1)))

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
	if n > 1 {
		e.m.tpot.Observe(end.Sub(firstTok).Seconds() / float64(n-1))
	}
	e.m.promptTokensHist.Observe(float64(p))
	e.m.genTokensHist.Observe(float64(n))
	e.m.paramsN.Observe(1)
	maxGen := e.cfg.maxModelLen - p
	if s.maxTokens >= 0 {
		e.m.paramsMaxTokens.Observe(float64(s.maxTokens))
		maxGen = s.maxTokens
	}
	e.m.maxGenTokens.Observe(float64(maxGen))
	e.m.prefillKV.Observe(float64(p - res.cached))
	return res, nil
}
