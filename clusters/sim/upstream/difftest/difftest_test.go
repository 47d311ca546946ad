package difftest_test

import (
	"slices"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	dt "github.com/gpustack/routing-conformance/clusters/sim/upstream/difftest"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream/upstreamtest"
)

func TestDifferential(t *testing.T) {
	in := upstreamtest.Install(t)
	k := upstreamtest.Kubelet(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			dt.RunCase(t, k, in, c)
		})
	}
}

// Texts the sequences share. Prefix matching counts characters, so the
// threshold cases use texts whose shared part is an exact fraction.
const (
	fox    = "The quick brown fox jumps over the lazy dog"
	lorem  = "Lorem ipsum dolor sit amet, consectetur adipiscing elit"
	jugs   = "Pack my box with five dozen liquor jugs"
	sphinx = "Sphinx of black quartz, judge my vow"
	half   = "aaaaabbbbb" // with halfOff: 5 of 10 characters shared
	halfOf = "aaaaaccccc"
	most   = "aaaaabbbcc" // 8 of 10 characters shared with half
)

// session is a chat carrying vllm-router's session_params.session_id.
func session(note, id string) dt.Step {
	return dt.Chat(note, "hello").Field("session_params", map[string]any{"session_id": id})
}

var cases = slices.Concat(vllmRouterCases, sglangGatewayCases, bothRouters)

// bothRouters are the cases run the same way on each router; kind is the
// request the threshold sequences use (vllm-router's chat routes on "",
// so its prefix cases take completions).
var bothRouters = slices.Concat(both(api.RouterVLLM, dt.Completion), both(api.RouterSGLang, dt.Chat))

func both(router string, kind func(note, text string) dt.Step) []dt.Case {
	setup := func(workers int, args ...string) dt.Setup {
		return dt.Setup{Router: router, Workers: workers, Args: args}
	}
	return []dt.Case{
		{Name: router + "/answers", Setup: setup(2), Steps: answerSteps},
		{Name: router + "/retries", Setup: setup(2, "--policy", "round_robin", "--retry-initial-backoff-ms", "1"), Steps: retrySteps},
		{Name: router + "/round_robin", Setup: setup(3, "--policy", "round_robin"), Steps: []dt.Step{
			dt.Chat("chat", "hello").Times(4),
			dt.Completion("completion shares the counter", fox).Times(3),
			dt.Chat("held", "hello").Held().Times(2),
			dt.Chat("round robin ignores load", "hello"),
		}},
		{Name: router + "/random", Setup: setup(2, "--policy", "random"), Compare: dt.Drawn, Check: uniform(40),
			Steps: []dt.Step{dt.Chat("chat", "hello").Times(40)}},
		{Name: router + "/power_of_two", Setup: setup(2, "--policy", "power_of_two"), Compare: dt.Drawn, Check: heldNotAvoided(20),
			Steps: []dt.Step{
				dt.Chat("held: the load a load-aware pick would avoid", "hello").HeldFor(8000),
				dt.Chat("chat while one is held", "hello").Times(20),
			}},
		{Name: router + "/cache-threshold", Setup: setup(2, "--cache-threshold", "0.5"), Steps: thresholdSteps(kind)},
		{Name: router + "/balance-abs-threshold", Setup: setup(2, "--balance-abs-threshold", "1"), Steps: absSteps(kind)},
		{Name: router + "/balance-rel-threshold", Setup: setup(2, "--balance-abs-threshold", "0", "--balance-rel-threshold", "3"), Steps: relSteps(kind)},
	}
}

// vllmRouterCases: vllm-router v0.1.15 over vLLM engines. Its chat routes
// on session_params.session_id (else ""), its completions on the prompt.
var vllmRouterCases = []dt.Case{
	{
		Name:  "vllm-router/cache_aware",
		Setup: dt.Setup{Router: api.RouterVLLM, Workers: 3},
		Steps: []dt.Step{
			dt.Chat("chat routes on \"\": least load, first on ties", "first chat"),
			dt.Chat("chat, other text: same worker", "second chat"),
			dt.Completion("completion, new prompt: least load", fox),
			dt.Completion("completion, another new prompt", lorem).Held(),
			dt.Completion("completion, another new prompt", jugs).Held(),
			dt.Completion("completion sharing a prompt's prefix: its worker", fox+" again"),
			dt.Chat("chat while two are held: least load", "third chat").Held(),
			session("chat with a session id: least load", "user-42"),
			session("same session id: its worker", "user-42"),
			session("blank session id routes on \"\"", "   "),
			dt.Chat("streamed chat", "fourth chat").Field("stream", true),
			dt.Drain(),
			dt.Completion("after the drain: the prefix's worker", jugs+" and more"),
			dt.Completion("streamed completion", sphinx).Field("stream", true),
		},
	},
	{
		// Serial chats route on "": all on the first candidate, so the
		// others never serve (and have no per-worker series).
		Name:  "vllm-router/cache_aware-serial",
		Setup: dt.Setup{Router: api.RouterVLLM, Workers: 2},
		Steps: []dt.Step{dt.Chat("serial chat", "hello").Times(4)},
	},
	{
		Name:  "vllm-router/get-routes",
		Setup: dt.Setup{Router: api.RouterVLLM, Workers: 2},
		Steps: []dt.Step{
			dt.Get("liveness", "/liveness").Compared(),
			dt.Get("health", "/health").Compared(),
			dt.Get("readiness", "/readiness").Compared(),
			dt.Get("models, the first worker's", "/v1/models"),
			dt.Get("server info, the first worker's", "/get_server_info"),
			dt.Get("an unknown path: the transparent proxy", "/no/such/path"),
		},
	},
	{
		Name:    "vllm-router/consistent_hash",
		Setup:   dt.Setup{Router: api.RouterVLLM, Workers: 3, Args: []string{"--policy", "consistent_hash"}},
		Steps:   hashSteps,
		Compare: dt.ByEngine,
	},
	{
		Name:    "vllm-router/rendezvous_hash",
		Setup:   dt.Setup{Router: api.RouterVLLM, Workers: 3, Args: []string{"--policy", "rendezvous_hash"}},
		Refused: "argument --policy: invalid choice: 'rendezvous_hash'",
	},
	{
		Name:  "vllm-router/pd-cache_aware",
		Setup: dt.Setup{Router: api.RouterVLLM, PD: true, Workers: 2},
		Steps: pdSteps,
	},
	{
		Name:  "vllm-router/pd-round_robin",
		Setup: dt.Setup{Router: api.RouterVLLM, PD: true, Workers: 2, Args: []string{"--prefill-policy", "round_robin", "--decode-policy", "round_robin"}},
		Steps: pdSteps,
	},
	{
		Name:  "vllm-router/pd-mixed",
		Setup: dt.Setup{Router: api.RouterVLLM, PD: true, Workers: 2, Args: []string{"--policy", "round_robin", "--decode-policy", "cache_aware"}},
		Steps: pdSteps,
	},
}

// sglangGatewayCases: sgl-model-gateway gateway-v0.3.1 in IGW mode over
// SGLang engines. Its chat routes on the messages' text.
var sglangGatewayCases = []dt.Case{
	{
		Name:  "sglang-gateway/cache_aware",
		Setup: dt.Setup{Router: api.RouterSGLang, Workers: 3},
		Steps: []dt.Step{
			dt.Chat("new text: least load, first on ties", fox),
			dt.Chat("same text: its worker", fox),
			dt.Chat("new text", lorem).Held(),
			dt.Chat("new text while one is held: least load", jugs).Held(),
			dt.Chat("shared prefix: its worker despite load", fox+" again"),
			dt.Chat("new text while two are held", sphinx).Held(),
			systemChat("system and user messages join", "You are a helpful assistant.", jugs),
			dt.Completion("completion with a chat's text", jugs),
			dt.Chat("streamed chat", lorem+" streamed").Field("stream", true),
			dt.Drain(),
			dt.Chat("after the drain", lorem),
		},
	},
	{
		Name:  "sglang-gateway/routing-text",
		Setup: dt.Setup{Router: api.RouterSGLang, Workers: 2},
		Steps: []dt.Step{
			dt.Chat("text parts", "").Field("messages", []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": fox}, map[string]any{"type": "text", "text": "again"}}}}),
			dt.Completion("hold the first worker", "zzzzzzzzzzzzzz").Held(),
			dt.Chat("the parts' text joined by a space", fox+" again and again"),
			dt.Chat("multi-turn", "").Field("messages", []any{
				map[string]any{"role": "user", "content": lorem},
				map[string]any{"role": "assistant", "content": "Sure.", "reasoning_content": "thinking"},
				map[string]any{"role": "user", "content": "more"}}),
			dt.Chat("the turns' text joined", lorem+" Sure. thinking more please"),
			dt.Generate("/generate routes on text", fox+" again"),
			dt.Generate("/generate, new text", sphinx),
		},
	},
	{
		Name:  "sglang-gateway/get-routes",
		Setup: dt.Setup{Router: api.RouterSGLang, Workers: 2},
		Steps: []dt.Step{
			dt.Get("liveness", "/liveness").Compared(),
			dt.Get("health", "/health").Compared(),
			dt.Get("readiness", "/readiness").Compared(),
			dt.Get("models, from the registry", "/v1/models").Compared(),
			dt.Get("server info", "/get_server_info").Compared(),
			dt.Get("model info, the first worker's", "/get_model_info"),
			dt.Get("health_generate", "/health_generate").Compared(),
			dt.Get("an unknown path: 404", "/no/such/path").Compared(),
		},
	},
	{
		Name:  "sglang-gateway/manual",
		Setup: dt.Setup{Router: api.RouterSGLang, Workers: 3, Args: []string{"--policy", "manual"}},
		Steps: slices.Concat(
			[]dt.Step{dt.Chat("no routing key: random", "hello").Times(4)},
			keyed("k1", 3), keyed("k2", 3), keyed("k3", 3), keyed("k4", 3),
		),
		Compare: dt.Drawn,
		Check:   sticky,
	},
	{
		Name:    "sglang-gateway/prefix_hash",
		Setup:   dt.Setup{Router: api.RouterSGLang, Workers: 2, Args: []string{"--policy", "prefix_hash"}},
		Refused: "argument --policy: invalid choice: 'prefix_hash'",
	},
	{
		Name:  "sglang-gateway/pd-round_robin",
		Setup: dt.Setup{Router: api.RouterSGLang, PD: true, Workers: 2, Args: []string{"--policy", "round_robin"}},
		Steps: pdSteps,
	},
	{
		// gateway-v0.3.1 seeds no cache-aware tree for the P/D pools, so
		// each pool picks at random: one text sent 24 times does not stay
		// on one worker.
		Name:    "sglang-gateway/pd-cache_aware",
		Setup:   dt.Setup{Router: api.RouterSGLang, PD: true, Workers: 2},
		Steps:   []dt.Step{dt.Chat("one text", fox).Times(24)},
		Compare: dt.Drawn,
		Check:   uniform(24),
	},
	{
		// IGW builds the P/D router from --policy alone: the pool flags
		// route nothing (cache_aware, which picks at random here; round
		// robin would alternate).
		Name:    "sglang-gateway/pd-pool-flags",
		Setup:   dt.Setup{Router: api.RouterSGLang, PD: true, Workers: 2, Args: []string{"--prefill-policy", "round_robin", "--decode-policy", "round_robin"}},
		Steps:   []dt.Step{dt.Chat("chat", "hello").Times(24)},
		Compare: dt.Drawn,
		Check:   notAlternating,
	},
}

// answerSteps are requests whose answer, the router's own or an engine's
// it relays, must be the same; the refusals exercise serde_json's syntax
// errors and the extractors' envelopes. (A body of the wrong JSON type is
// left out: serde_json's message for it depends on each request struct's
// derive, which is not emulated.)
var answerSteps = []dt.Step{
	dt.Chat("unknown model", "hello").Field("model", "no-such-model"),
	dt.Chat("no model field", "hello").Without("model"),
	dt.Chat("no messages", "hello").Field("messages", []any{}),
	dt.Raw("a key that is not a string", "/v1/chat/completions", "{not json"),
	dt.Raw("EOF in an object", "/v1/chat/completions", `{"model":`),
	dt.Raw("a trailing comma", "/v1/chat/completions", `{"model":"m",}`),
	dt.Raw("a bad literal", "/v1/chat/completions", `{"stream":tru}`),
	dt.Raw("trailing characters", "/v1/chat/completions", "{}\n x"),
	dt.Raw("no prompt", "/v1/completions", `{"model":"`+dt.Model+`"}`),
	dt.Raw("no prompt, on two lines", "/v1/completions", "{\"model\":\n\""+dt.Model+"\"}"),
	dt.Raw("EOF in a completion", "/v1/completions", `{"prompt":"abc`),
	dt.Chat("after the errors", "hello"),
}

// retrySteps (round robin over two): a 503 is retried, the policy run
// again on each attempt; a 404 is relayed as it is; when every worker
// answers 503 the retries run out.
var retrySteps = []dt.Step{
	dt.Chat("r0 answers 503: retried on r1", "hello").Faulted("r0", 503),
	dt.Chat("r0 answers 404: relayed, no retry", "hello").Faulted("r0", 404),
	dt.Chat("no fault", "hello"),
	dt.Chat("every worker answers 503: retries run out", "hello").Faulted("r0,r1", 503),
	dt.Chat("no fault", "hello").Times(2),
}

func systemChat(note, system, user string) dt.Step {
	s := dt.Chat(note, user)
	return s.Field("messages", []any{
		map[string]any{"role": "system", "content": system},
		map[string]any{"role": "user", "content": user},
	})
}

func keyed(key string, n int) []dt.Step {
	return []dt.Step{dt.Chat("routing key "+key, "hello").With("X-SMG-Routing-Key", key).Times(n)}
}

// hashSteps exercise the hash policies' keys: a session header first, a
// key in the routing text, else the text itself (hashed past 100 bytes).
var hashSteps = []dt.Step{
	dt.Chat("chat without a header: key \"request:\"", "hello").Times(2),
	dt.Chat("x-session-id s1", "hello").With("X-Session-Id", "s1").Times(2),
	dt.Chat("x-session-id s2", "hello").With("X-Session-Id", "s2"),
	dt.Chat("x-session-id s3", "hello").With("X-Session-Id", "s3"),
	dt.Chat("x-session-id s4", "hello").With("X-Session-Id", "s4"),
	dt.Chat("x-session-id s5", "hello").With("X-Session-Id", "s5"),
	dt.Chat("x-user-id u1", "hello").With("X-User-Id", "u1"),
	dt.Chat("x-correlation-id before x-request-id", "hello").With("X-Request-Id", "r1").With("X-Correlation-Id", "c1"),
	dt.Completion("prompt key", fox).Times(2),
	dt.Completion("another prompt key", lorem),
	dt.Completion("prompt over 100 bytes: hashed", fox+" "+lorem+" "+jugs),
	dt.Completion("a user field in the text", `{"user": "bob"}`),
	session("session id in chat text", "sess-9"),
}

// thresholdSteps: --cache-threshold 0.5 and a prompt sharing exactly half
// of its characters (the test is strict: not a hit), then one sharing 80%.
func thresholdSteps(mk func(note, text string) dt.Step) []dt.Step {
	return []dt.Step{
		mk("learn a text", half),
		mk("hold the first worker", "zzzzzzzzzz").Held(),
		mk("5 of 10 characters shared: no hit at 0.5", halfOf),
		mk("8 of 10 characters shared: a hit", most),
	}
}

// absSteps: --balance-abs-threshold 1; prefix hits pile load on one
// worker until the difference exceeds 1.
func absSteps(mk func(note, text string) dt.Step) []dt.Step {
	return []dt.Step{
		mk("learn a text", fox),
		mk("prefix hit, loads 0/0", fox+" 1").Held(),
		mk("prefix hit, loads 1/0", fox+" 2").Held(),
		mk("loads 2/0: imbalanced", fox+" 3").Held(),
		mk("loads 2/1", fox+" 4"),
	}
}

// relSteps: --balance-abs-threshold 0 --balance-rel-threshold 3: the
// relative test decides once both workers hold load.
func relSteps(mk func(note, text string) dt.Step) []dt.Step {
	return []dt.Step{
		mk("learn a text", fox),
		mk("new text, loads 0/0", lorem).Held(),
		mk("loads 1/0: imbalanced", fox+" 1").Held(),
		mk("prefix hit", fox+" 2").Held(),
		mk("prefix hit", fox+" 3").Held(),
		mk("prefix hit", fox+" 4").Held(),
		mk("prefix hit", fox+" 5").Held(),
	}
}

var pdSteps = []dt.Step{
	dt.Chat("chat", "hello").Times(2),
	dt.Completion("completion", fox).Times(2),
	dt.Completion("completion, new prompt", lorem),
	dt.Chat("held chat", "hello").Held(),
	dt.Chat("chat while one is held", jugs),
	dt.Completion("held completion", sphinx).Held(),
	dt.Completion("completion while two are held", fox),
	dt.Drain(),
	dt.Chat("after the drain", "hello"),
	dt.Chat("streamed chat", lorem).Field("stream", true),
	dt.Completion("streamed completion", jugs).Field("stream", true),
}
