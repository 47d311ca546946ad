// Package framework holds the EPP's plugin contract as the emulation needs
// it: plugin identity, the extension points (filter, scorer, picker, profile
// handler, data producer, pre-request), the per-request endpoint view and the
// request. It mirrors llm-d/llm-d-router@71f4f099:pkg/epp/framework/interface
// (plugin, scheduling, requestcontrol) in shape, not in code.
package framework

import (
	"context"
	"fmt"
	"net"
	"time"
)

// TypedName is a plugin's type and instance name.
type TypedName struct {
	Type string
	Name string
}

// String is "name/type" (interface/plugin/typedname.go).
func (t TypedName) String() string { return t.Name + "/" + t.Type }

// Plugin is anything instantiated from the config's plugins list.
type Plugin interface {
	TypedName() TypedName
}

// DataKey names request-scoped data and its default producer
// (interface/plugin/datakey.go): String is "DataType/ProducerName".
type DataKey struct {
	DataType string
	Producer string
}

func (k DataKey) String() string { return k.DataType + "/" + k.Producer }

// WithNonEmptyProducerName returns k produced by name when name is set.
func (k DataKey) WithNonEmptyProducerName(name string) DataKey {
	if name != "" {
		k.Producer = name
	}
	return k
}

// The data keys the emulated plugins exchange.
var (
	// PrefixCacheMatchInfoKey defaults to the approximate producer
	// (datalayer/attribute/prefix/data_types.go).
	PrefixCacheMatchInfoKey = DataKey{"PrefixCacheMatchInfoDataKey", "approx-prefix-cache-producer"}
	// TokenizedPromptKey defaults to the token producer
	// (dataproducer/tokenizer/tokenizer.go).
	TokenizedPromptKey = DataKey{"TokenizedPrompt", "token-producer"}
)

// Producer writes per-request data before scheduling (requestcontrol.DataProducer).
type Producer interface {
	Plugin
	Produces() []DataKey
	Produce(ctx context.Context, req *Request, endpoints []*Endpoint) error
}

// Consumer declares the data keys a plugin requires.
type Consumer interface {
	Plugin
	Consumes() []DataKey
}

// PreRequest runs after scheduling, before the request is sent.
type PreRequest interface {
	Plugin
	PreRequest(ctx context.Context, req *Request, result *SchedulingResult) error
}

// Filter narrows the candidates of one profile.
type Filter interface {
	Plugin
	Filter(ctx context.Context, req *Request, endpoints []*Endpoint) []*Endpoint
}

// Scorer scores candidates; the framework clamps to [0,1] and weights.
type Scorer interface {
	Plugin
	Score(ctx context.Context, req *Request, endpoints []*Endpoint) map[*Endpoint]float64
}

// Picker chooses from weighted totals.
type Picker interface {
	Plugin
	Pick(ctx context.Context, scored []*ScoredEndpoint) *ProfileResult
}

// Profile is what a profile handler hands back to run.
type Profile interface {
	Run(ctx context.Context, req *Request, candidates []*Endpoint) (*ProfileResult, error)
}

// ProfileHandler picks the profiles to run and assembles their results.
type ProfileHandler interface {
	Plugin
	Pick(ctx context.Context, req *Request, profiles map[string]Profile, results map[string]*ProfileResult) map[string]Profile
	ProcessResults(ctx context.Context, req *Request, results map[string]*ProfileResult) (*SchedulingResult, error)
}

// Marker kinds for plugins the emulation accepts but that take no part in
// routing decisions it models (parsers, flow-control policies, the
// saturation detector, data sources and extractors).
type (
	// Parser is a request-handling parser (openai-parser, ...).
	Parser interface {
		Plugin
		Paths() []string
	}
	// Inert marks plugins that are instantiated for fidelity only.
	Inert interface {
		Plugin
		Inert()
	}
)

// EndpointMetadata identifies one model-server endpoint: one target port of
// one Pod (fwkdl.EndpointMetadata as the datastore builds it).
type EndpointMetadata struct {
	// Namespace and Name form the endpoint ID; Name is "<pod>-rank-<i>".
	Namespace string
	Name      string
	// PodName is the Pod's own name.
	PodName string
	Address string
	Port    string
	Labels  map[string]string
	// MetricsHost is "<podIP>:<port>".
	MetricsHost string
}

// ID is "namespace/name" (types.NamespacedName.String).
func (m *EndpointMetadata) ID() string { return m.Namespace + "/" + m.Name }

// HostPort is the address the proxy dials.
func (m *EndpointMetadata) HostPort() string { return net.JoinHostPort(m.Address, m.Port) }

// Metrics are the scraped values (fwkdl.Metrics, the fields the emulation reads).
type Metrics struct {
	WaitingQueueSize    int
	RunningRequestsSize int
	KVCacheUsagePercent float64
	CacheBlockSize      int
	CacheNumBlocks      int
	// UpdateTime is the last successful extraction; zero before the first.
	UpdateTime time.Time
}

// Endpoint is one candidate as a request sees it: shared metadata, a
// snapshot of its metrics, and request-scoped attributes.
type Endpoint struct {
	Meta    *EndpointMetadata
	Metrics Metrics
	attrs   map[string]any
}

// NewEndpoint snapshots an endpoint for one request.
func NewEndpoint(meta *EndpointMetadata, m Metrics) *Endpoint {
	return &Endpoint{Meta: meta, Metrics: m}
}

// Get reads a request-scoped attribute.
func (e *Endpoint) Get(key string) (any, bool) {
	v, ok := e.attrs[key]
	return v, ok
}

// Put writes a request-scoped attribute.
func (e *Endpoint) Put(key string, v any) {
	if e.attrs == nil {
		e.attrs = map[string]any{}
	}
	e.attrs[key] = v
}

func (e *Endpoint) String() string { return e.Meta.ID() }

// ScoredEndpoint is a candidate and its weighted total.
type ScoredEndpoint struct {
	*Endpoint
	Score float64
}

// ProfileResult is one profile's pick.
type ProfileResult struct {
	TargetEndpoints  []*Endpoint
	ScoredCandidates []ScoredEndpoint
}

// SchedulingResult is the handler's assembled answer.
type SchedulingResult struct {
	ProfileResults     map[string]*ProfileResult
	PrimaryProfileName string
}

// Request is the parsed request the scheduler sees (fwksched.InferenceRequest).
type Request struct {
	RequestID   string
	TargetModel string
	Headers     map[string]string
	Body        *RequestBody
	attrs       map[string]any
}

// PutAttribute stores request-scoped data (e.g. the P/D peer endpoint).
func (r *Request) PutAttribute(key string, v any) {
	if r.attrs == nil {
		r.attrs = map[string]any{}
	}
	r.attrs[key] = v
}

// Attribute reads request-scoped data.
func (r *Request) Attribute(key string) (any, bool) {
	v, ok := r.attrs[key]
	return v, ok
}

// RequestBody is the parsed OpenAI body (fwkrh.InferenceRequestBody, the
// APIs the emulation routes).
type RequestBody struct {
	Model  string
	Stream bool
	// Chat is set for chat completions, Completion for completions.
	Chat       *ChatRequest
	Completion *CompletionRequest
	// Tokens is the token producer's output (nil before it runs or when it fails).
	Tokens *TokenizedPrompt
	// Payload is the decoded JSON object.
	Payload map[string]any
}

// ChatRequest holds what the estimate tokenizer reads from a chat body.
type ChatRequest struct {
	Tools    []any
	Messages []ChatMessage
}

// ChatMessage is a role and its content: a plain string (Raw) or parts.
type ChatMessage struct {
	Role  string
	Raw   string
	Parts []ChatPart
}

// ChatPart is one structured content part.
type ChatPart struct {
	Type string
	Text string
}

// CompletionRequest is a completions prompt: one string, several, or token IDs.
type CompletionRequest struct {
	Strings  []string
	TokenIDs []uint32
}

// TokenizedPrompt is the token producer's output.
type TokenizedPrompt struct {
	PerPromptTokens [][]uint32
}

// TokenCount is the total token count over prompts.
func (t *TokenizedPrompt) TokenCount() int {
	if t == nil {
		return 0
	}
	n := 0
	for _, p := range t.PerPromptTokens {
		n += len(p)
	}
	return n
}

// PrefixCacheMatchInfo is a prefix producer's per-endpoint answer
// (datalayer/attribute/prefix/data_types.go).
type PrefixCacheMatchInfo struct {
	MatchBlocks      int
	TotalBlocks      int
	BlockSizeTokens  int
	CachedBlockCount int
}

// NewPrefixCacheMatchInfo sets CachedBlockCount to matchBlocks as the source does.
func NewPrefixCacheMatchInfo(match, total, blockSize int) *PrefixCacheMatchInfo {
	return &PrefixCacheMatchInfo{MatchBlocks: match, TotalBlocks: total, BlockSizeTokens: blockSize, CachedBlockCount: match}
}

func (p *PrefixCacheMatchInfo) String() string {
	return fmt.Sprintf("{match %d/%d blocks of %d}", p.MatchBlocks, p.TotalBlocks, p.BlockSizeTokens)
}

// Error is an EPP error with its canonical code (pkg/common/error/error.go).
type Error struct {
	Code string
	Msg  string
}

// Canonical codes.
const (
	CodeBadRequest         = "BadRequest"
	CodeInternal           = "Internal"
	CodeServiceUnavailable = "ServiceUnavailable"
	CodeResourceExhausted  = "ResourceExhausted"
	CodePreconditionFailed = "PreconditionFailed"
	CodeModelServerError   = "ModelServerError"
	CodeUnknown            = "Unknown"
)

func (e Error) Error() string { return fmt.Sprintf("inference error: %s - %s", e.Code, e.Msg) }

// HTTPStatus maps a code to the ImmediateResponse status (BuildErrResponse);
// 0 means the EPP answers with a gRPC error instead.
func (e Error) HTTPStatus() int {
	switch e.Code {
	case CodeBadRequest:
		return 400
	case "Unauthorized":
		return 401
	case "Forbidden":
		return 403
	case "NotFound":
		return 404
	case CodePreconditionFailed:
		return 412
	case CodeResourceExhausted:
		return 429
	case CodeInternal:
		return 500
	case CodeServiceUnavailable:
		return 503
	}
	return 0
}

// Every calls f each interval until ctx ends: the EPP's periodic loops
// (metrics collectors, the pool refresher, the prefix indexer's upkeep).
func Every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
