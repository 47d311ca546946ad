// Package engine groups the sim's inference-engine emulators. Each program is
// a proc.Main that the sim kubelet runs as a Pod's "main" container:
//
//   - vllm.Main   — `vllm serve <model> [extraArgs] --host 0.0.0.0 --port 8000`
//     (argv after "vllm"), vLLM 0.29 behaviour;
//   - sglang.Main — `--model-path <model> --enable-metrics [extraArgs] --host
//     0.0.0.0 --port 8000` (argv after "python3 -m sglang.launch_server"),
//     SGLang 0.5.x behaviour.
//
// Shared pieces, one job each, under internal/ (the engines' helpers, not
// part of the sim's API): argparse (Python argparse semantics and
// error texts), tokenize (the tokenizer stand-in, ChatML template, token-id
// buffers), prefixcache (vLLM block cache, SGLang radix tree), sched
// (continuous batching admission in KV blocks/pages, and pacing), openai
// (reading and decoding requests, the response fields both engines share,
// output plan, ids), jsonw, pyrepr and promtext (the Python servers' JSON,
// reprs and Prometheus text, and serving /metrics), server (knobs, argparse
// exit, model-load wait, HTTP lifecycle, Starlette's 404/405, JSON and SSE
// responses, buffers) and enginetest (run a Main on loopback in tests,
// scrape it, post to it, read its streams).
//
// What the two engines do differently stays in their own packages, so each
// one reads as that engine's behaviour: response and chunk shapes and their
// nulls, ids, error bodies and codes, unknown-model handling, metric names,
// labels and when series appear, prefix-cache granularity, the SGLang
// warm-up request, /health during start-up and include_usage defaults.
//
// # Sim-only knobs (Pod env, all optional)
//
//	SIM_ENGINE_TTFT          Go duration, default 5ms: admission to first token
//	SIM_ENGINE_ITL           Go duration, default 1ms: gap between output tokens
//	SIM_ENGINE_OUTPUT_TOKENS int, default 16: tokens generated without max_tokens
//	                         (the last is the end-of-turn token, finish "stop")
//	SIM_ENGINE_STARTUP_DELAY Go duration, default 0: model loading time
//
// A bad value makes the program exit 1 with a message naming the variable.
// With TTFT and ITL at 0 no timer is created and answers are immediate.
//
// # The tokenizer stand-in
//
// Text is cut into 4-byte pieces between Qwen2 special tokens
// (<|im_start|>, <|im_end|>, <|endoftext|> are one token each); chat
// messages go through Qwen2.5's ChatML template, which inserts the default
// system prompt. A shared text prefix is therefore a shared token prefix, and
// token counts are about what a BPE tokenizer gives for English.
//
// # Known deviations from the real engines (see the references)
//
//   - Each engine dispatches through its route table (vllm.Routes,
//     sglang.Routes, read from the released packages and shown in
//     docs/engines.md): a route the real server registers on a default
//     launch but the sim does not emulate answers 501 with the engine's
//     error body, where the real server would serve it.
//   - A stop string's text never reaches a stream chunk; the real engines
//     hold back a stop-string-sized tail, so chunk boundaries differ (the
//     joined text is the same).
//   - KV accounting reserves prompt+planned output tokens at admission
//     (rounded to blocks/pages); the real engines grow it token by token and
//     share cached prefix blocks. The pool is 131,072 tokens at the default
//     --gpu-memory-utilization 0.9 / --mem-fraction-static 0.88 (scaled by
//     them; --num-gpu-blocks-override / --max-total-tokens set it).
//   - A single vLLM request's prompt blocks enter the prefix cache after its
//     prefill; vLLM caches them when it allocates them, so requests
//     scheduled in one step can hit each other's blocks. The children of an
//     n > 1 request are cached at admission, as vLLM does.
//   - TTFT does not depend on prompt length or cache hits; there is no
//     preemption (vllm:num_preemptions_total stays 0).
//   - Batched completion prompts are refused with a 400 that says so. n > 1
//     is served, but the filler output is deterministic, so every choice
//     has the same text and finish.
//   - A vLLM MooncakeConnector consumer given a remote prefill counts the
//     prompt as transferred without contacting the prefill (no KV moves);
//     given do_remote_prefill with incomplete params, or an engine id the
//     bootstrap server does not know, it prefills locally where the real
//     one waits for a pull that never starts. A producer frees its KV
//     blocks at once instead of holding them for the decode's pull.
//   - vLLM counts a client abort in request_success_total{finished_reason=
//     "abort"} (the reference left this unverified).
//   - SGLang's decode-stats log (which resets cache_hit_rate to 0) fires
//     every --decode-log-interval generated tokens summed over requests, not
//     per batched decode step.
//   - Python process/GC collectors (process_*, python_*) are not emitted;
//     SGLang's newer pool gauges (sglang:page_size, num_pages, ...) and
//     sglang:http_responses_total are not emitted.
//   - SGLang validation messages summarize the input ("<dict of N items>")
//     where pydantic prints the request as a Python dict.
//   - A non-streaming vLLM request decodes in one timer wait; its
//     inter_token_latency observations are the average gap.
//   - Per-request engine log lines (SGLang "Prefill batch ...") are not
//     printed; uvicorn access lines and vLLM's 10 s stats line are.
package engine
