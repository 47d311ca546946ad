package traffic

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Endpoint is the OpenAI route a plan sends to.
type Endpoint string

const (
	// EndpointChat is POST /v1/chat/completions.
	EndpointChat Endpoint = "/v1/chat/completions"
	// EndpointCompletions is POST /v1/completions.
	EndpointCompletions Endpoint = "/v1/completions"
	// EndpointModels is GET /v1/models, sent as go-openai's ListModels
	// sends it (no body; Accept and Content-Type application/json) and its
	// answer decoded into go-openai's ModelsList: Result.Models lists it.
	// It sends no prompt: Model may be empty, Mode must be non-stream, and
	// the body fields (MaxTokens, IncludeUsage, SessionParams, ExtraBody)
	// must be unset.
	EndpointModels Endpoint = "/v1/models"
)

// Mode says which requests of a plan stream.
type Mode string

const (
	// ModeNonStream sends every request with "stream": false.
	ModeNonStream Mode = "non-stream"
	// ModeStream sends every request with "stream": true (SSE).
	ModeStream Mode = "stream"
	// ModeAlternate streams even-indexed requests (0, 2, ...) and not the
	// odd ones, the "streaming and non-streaming in turn" pattern.
	ModeAlternate Mode = "alternate"
)

// PromptKind selects how prompts are built.
type PromptKind string

const (
	// PromptsSharedPrefix gives every request the same prefix of
	// PrefixChars characters followed by a question unique to the request.
	PromptsSharedPrefix PromptKind = "shared-prefix"
	// PromptsPrefixGroups interleaves Groups distinct prefixes: request i uses
	// prefix i % Groups, followed by a unique question.
	PromptsPrefixGroups PromptKind = "prefix-groups"
	// PromptsUnrelated gives every request its own text with no prefix shared
	// with any other request.
	PromptsUnrelated PromptKind = "unrelated"
)

// Defaults applied by Run to zero-valued plan fields.
const (
	DefaultPrefixChars    = 500
	DefaultRequestTimeout = 60 * time.Second
	DefaultConcurrency    = 1
	DefaultEndpoint       = EndpointChat
	DefaultMode           = ModeNonStream
	DefaultPromptKind     = PromptsSharedPrefix
	DefaultProgressEvery  = time.Second
)

// DefaultCaptureHeaders are the response headers every Result records when
// present: the routers' request id, llm-d's serving-pod identity headers and
// SMG's error code.
var DefaultCaptureHeaders = []string{
	"x-request-id",
	"x-inference-pod",
	"x-inference-port",
	"x-inference-namespace",
	"x-smg-error-code",
}

// Plan describes one traffic run. The zero value of an optional field means
// its default (see the Default* constants). Plans are JSON-serialisable;
// APIKey is never serialised.
type Plan struct {
	// BaseURL is the OpenAI base URL, e.g. http://127.0.0.1:8081/v1 (what
	// clusters.Deployment.OpenAIBaseURL returns). "/v1" is appended when the
	// path does not already end with it.
	BaseURL string `json:"base_url"`
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey string `json:"-"`
	// Endpoint is EndpointChat (default) or EndpointCompletions.
	Endpoint Endpoint `json:"endpoint,omitempty"`
	// Model is the "model" field of every request (required, except for
	// EndpointModels, which sends none).
	Model string `json:"model"`
	// Requests is how many requests the run sends (> 0).
	Requests int `json:"requests"`
	// FirstIndex numbers the run's prompts from here: request k sends
	// prompt FirstIndex+k (its question, prefix group and {index}), so a
	// later run with the same nonce can continue a plan's prompt sequence,
	// e.g. after its first request was sent alone. Default 0.
	FirstIndex int `json:"first_index,omitempty"`
	// Concurrency is how many requests may be in flight at once (default 1,
	// which makes the run serial and in index order).
	Concurrency int `json:"concurrency,omitempty"`
	// RPS caps the start rate: request i starts no earlier than i/RPS seconds
	// after the run starts. 0 means no cap.
	RPS float64 `json:"rps,omitempty"`
	// Mode is ModeNonStream (default), ModeStream or ModeAlternate.
	Mode Mode `json:"mode,omitempty"`
	// MaxTokens is sent as "max_tokens" when > 0; 0 leaves it to the server.
	MaxTokens int `json:"max_tokens,omitempty"`
	// IncludeUsage sends stream_options {"include_usage": true} on streaming
	// requests. It is never sent on non-streaming ones (vLLM answers 400) and
	// never sent as false: vLLM 0.29.0 defaults include_usage to false, so
	// absent and false are the same (docs/engines.md).
	IncludeUsage bool `json:"include_usage,omitempty"`
	// Prompts selects the prompt set.
	Prompts PromptSet `json:"prompts"`
	// Headers are added to every request. Values may use the placeholders
	// {index}, {group} and {nonce}, expanded per request, e.g.
	// "X-Session-Id": "session-{group}".
	Headers map[string]string `json:"headers,omitempty"`
	// SessionParams, when non-empty, is sent as the body field
	// "session_params" (e.g. {"session_id": "s-{group}"}; placeholders as in
	// Headers). vllm-router's cache-aware chat routing keys on it.
	SessionParams map[string]string `json:"session_params,omitempty"`
	// ExtraBody holds further top-level body fields (e.g. "temperature",
	// "ignore_eos"), sent verbatim. Keys the driver sets itself are refused.
	ExtraBody map[string]any `json:"extra_body,omitempty"`
	// RequestTimeout bounds each request from send to the end of its body
	// (default 60s).
	RequestTimeout time.Duration `json:"request_timeout_ns,omitempty"`
	// CaptureHeaders are response headers recorded in addition to
	// DefaultCaptureHeaders (case-insensitive).
	CaptureHeaders []string `json:"capture_headers,omitempty"`
	// Progress, when set, is called every ProgressEvery while the run goes
	// on and once more, Final, when it ends: from one goroutine at a time,
	// never after Run returns. It must not block.
	Progress func(Progress) `json:"-"`
	// ProgressEvery is the interval between Progress calls (default 1s).
	ProgressEvery time.Duration `json:"-"`
	// NewConnectionPerRequest opens a connection for every request instead
	// of keeping one alive per worker: behind a Service that spreads
	// connections (several router Pods), each request draws a Pod.
	NewConnectionPerRequest bool `json:"new_connection_per_request,omitempty"`
}

// PromptSet says how prompts are built. Every prefix starts with a seed
// derived from the run's nonce, so an earlier run cannot have pre-seeded a
// prefix cache with it.
type PromptSet struct {
	// Kind is PromptsSharedPrefix (default), PromptsPrefixGroups or
	// PromptsUnrelated.
	Kind PromptKind `json:"kind,omitempty"`
	// PrefixChars is the length of the shared prefix in characters (default
	// 500). For PromptsUnrelated it is the length of each request's own
	// leading text.
	PrefixChars int `json:"prefix_chars,omitempty"`
	// Groups is the number of distinct prefixes for PromptsPrefixGroups
	// (>= 1). It must be 0 for PromptsUnrelated and 0 or 1 for
	// PromptsSharedPrefix.
	Groups int `json:"groups,omitempty"`
	// Nonce starts every prefix. Empty means a fresh random nonce per run;
	// the one used is recorded in Report.Plan.
	Nonce string `json:"nonce,omitempty"`
}

// fieldsTheDriverSets are body fields ExtraBody may not override: the plan
// has a dedicated field for each.
var fieldsTheDriverSets = map[string]string{
	"model":          "Model",
	"messages":       "Prompts",
	"prompt":         "Prompts",
	"stream":         "Mode",
	"stream_options": "IncludeUsage",
	"max_tokens":     "MaxTokens",
	"session_params": "SessionParams",
}

// headersTheTransportOwns may not be set through Plan.Headers.
var headersTheTransportOwns = map[string]bool{
	"content-length":    true,
	"content-type":      true,
	"host":              true,
	"transfer-encoding": true,
	"connection":        true,
}

// withDefaults returns a copy of p with defaults filled in. The nonce is left
// alone; Run fills it.
func (p Plan) withDefaults() Plan {
	if p.Endpoint == "" {
		p.Endpoint = DefaultEndpoint
	}
	if p.Mode == "" {
		p.Mode = DefaultMode
	}
	if p.Concurrency == 0 {
		p.Concurrency = DefaultConcurrency
	}
	if p.RequestTimeout == 0 {
		p.RequestTimeout = DefaultRequestTimeout
	}
	if p.Prompts.Kind == "" {
		p.Prompts.Kind = DefaultPromptKind
	}
	if p.Prompts.PrefixChars == 0 {
		p.Prompts.PrefixChars = DefaultPrefixChars
	}
	if p.Prompts.Kind == PromptsSharedPrefix && p.Prompts.Groups == 0 {
		p.Prompts.Groups = 1
	}
	if p.ProgressEvery <= 0 {
		p.ProgressEvery = DefaultProgressEvery
	}
	return p
}

// Validate reports the first problem with the plan (after defaults), naming
// the field and what it must be.
func (p Plan) Validate() error {
	p = p.withDefaults()
	if p.Requests <= 0 {
		return fmt.Errorf("traffic: plan.Requests must be > 0 (got %d)", p.Requests)
	}
	if p.FirstIndex < 0 {
		return fmt.Errorf("traffic: plan.FirstIndex must be >= 0 (got %d)", p.FirstIndex)
	}
	if p.Concurrency < 0 {
		return fmt.Errorf("traffic: plan.Concurrency must be >= 0 (0 means %d; got %d)", DefaultConcurrency, p.Concurrency)
	}
	if p.RPS < 0 || math.IsNaN(p.RPS) || math.IsInf(p.RPS, 0) {
		return fmt.Errorf("traffic: plan.RPS must be a finite number >= 0 (0 means no cap; got %v)", p.RPS)
	}
	if p.MaxTokens < 0 {
		return fmt.Errorf("traffic: plan.MaxTokens must be >= 0 (0 leaves it to the server; got %d)", p.MaxTokens)
	}
	if p.RequestTimeout < 0 {
		return fmt.Errorf("traffic: plan.RequestTimeout must be > 0 (0 means %s; got %s)", DefaultRequestTimeout, p.RequestTimeout)
	}
	if strings.TrimSpace(p.Model) == "" && p.Endpoint != EndpointModels {
		return fmt.Errorf("traffic: plan.Model must name the served model (got %q)", p.Model)
	}
	if _, err := openAIBaseURL(p.BaseURL); err != nil {
		return err
	}
	switch p.Endpoint {
	case EndpointChat, EndpointCompletions:
	case EndpointModels:
		if err := p.checkBodiless(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("traffic: plan.Endpoint must be %q, %q or %q (got %q)", EndpointChat, EndpointCompletions, EndpointModels, p.Endpoint)
	}
	switch p.Mode {
	case ModeNonStream, ModeStream, ModeAlternate:
	default:
		return fmt.Errorf("traffic: plan.Mode must be %q, %q or %q (got %q)", ModeNonStream, ModeStream, ModeAlternate, p.Mode)
	}
	if err := p.Prompts.validate(); err != nil {
		return err
	}
	for _, name := range sortedKeys(p.Headers) {
		if err := checkHeader(name, p.Headers[name]); err != nil {
			return err
		}
	}
	if p.SessionParams != nil && len(p.SessionParams) == 0 {
		return fmt.Errorf("traffic: plan.SessionParams is empty; leave it nil or give it a key such as session_id")
	}
	for _, key := range sortedKeys(p.ExtraBody) {
		if field, taken := fieldsTheDriverSets[key]; taken {
			return fmt.Errorf("traffic: plan.ExtraBody[%q] is set by the driver; use plan.%s instead", key, field)
		}
	}
	for i, h := range p.CaptureHeaders {
		if !validHeaderName(h) {
			return fmt.Errorf("traffic: plan.CaptureHeaders[%d] %q is not a valid header name", i, h)
		}
	}
	return nil
}

// checkBodiless refuses, for a GET, the fields that only a request body
// carries: set, they would be silently ignored.
func (p Plan) checkBodiless() error {
	switch {
	case p.Mode != ModeNonStream:
		return fmt.Errorf("traffic: plan.Mode must be %q for %s, which does not stream (got %q)", ModeNonStream, p.Endpoint, p.Mode)
	case p.MaxTokens != 0:
		return fmt.Errorf("traffic: plan.MaxTokens must be 0 for %s, which sends no body (got %d)", p.Endpoint, p.MaxTokens)
	case p.IncludeUsage:
		return fmt.Errorf("traffic: plan.IncludeUsage must be false for %s, which sends no body", p.Endpoint)
	case p.SessionParams != nil:
		return fmt.Errorf("traffic: plan.SessionParams must be nil for %s, which sends no body", p.Endpoint)
	case p.ExtraBody != nil:
		return fmt.Errorf("traffic: plan.ExtraBody must be nil for %s, which sends no body", p.Endpoint)
	}
	return nil
}

func (s PromptSet) validate() error {
	if s.PrefixChars < 0 {
		return fmt.Errorf("traffic: plan.Prompts.PrefixChars must be >= 0 (0 means %d; got %d)", DefaultPrefixChars, s.PrefixChars)
	}
	switch s.Kind {
	case PromptsSharedPrefix:
		if s.Groups != 1 {
			return fmt.Errorf("traffic: plan.Prompts.Groups must be 0 or 1 for kind %q (got %d); use kind %q for several prefixes", s.Kind, s.Groups, PromptsPrefixGroups)
		}
	case PromptsPrefixGroups:
		if s.Groups < 1 {
			return fmt.Errorf("traffic: plan.Prompts.Groups must be >= 1 for kind %q (got %d)", s.Kind, s.Groups)
		}
	case PromptsUnrelated:
		if s.Groups != 0 {
			return fmt.Errorf("traffic: plan.Prompts.Groups must be 0 for kind %q (got %d)", s.Kind, s.Groups)
		}
	default:
		return fmt.Errorf("traffic: plan.Prompts.Kind must be %q, %q or %q (got %q)", PromptsSharedPrefix, PromptsPrefixGroups, PromptsUnrelated, s.Kind)
	}
	if strings.ContainsAny(s.Nonce, "\r\n") {
		return fmt.Errorf("traffic: plan.Prompts.Nonce must be one line (got %q)", s.Nonce)
	}
	return nil
}

// openAIBaseURL checks raw and returns it without a trailing slash, ending in /v1.
func openAIBaseURL(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", fmt.Errorf("traffic: plan.BaseURL must be set, e.g. http://127.0.0.1:8081/v1 (got %q)", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("traffic: plan.BaseURL %q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("traffic: plan.BaseURL must start with http:// or https:// (got %q)", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("traffic: plan.BaseURL must name a host (got %q)", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("traffic: plan.BaseURL must not have a query or fragment (got %q)", raw)
	}
	base := strings.TrimRight(raw, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base, nil
}

func checkHeader(name, value string) error {
	if !validHeaderName(name) {
		return fmt.Errorf("traffic: plan.Headers key %q is not a valid header name", name)
	}
	if headersTheTransportOwns[strings.ToLower(name)] {
		return fmt.Errorf("traffic: plan.Headers[%q] is set by the HTTP client and cannot be overridden", name)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("traffic: plan.Headers[%q] value must not contain CR, LF or NUL (got %q)", name, value)
	}
	return nil
}

// validHeaderName accepts RFC 9110 tokens.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// streams reports whether request i of a plan (after defaults) streams.
func (p Plan) streams(i int) bool {
	switch p.Mode {
	case ModeStream:
		return true
	case ModeAlternate:
		return i%2 == 0
	default:
		return false
	}
}
