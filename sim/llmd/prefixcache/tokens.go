// Package prefixcache holds the EPP's prefix-cache data producers: the
// token producer (tokenizer-free "estimate" backend and the vLLM /render
// backend), the approximate producer (per-endpoint LRU of prompt block
// hashes) and the precise producer (KV-block index fed by engine KV events).
//
// Sources, llm-d/llm-d-router@71f4f099: pkg/epp/framework/plugins/requestcontrol/dataproducer/
// {tokenizer/{tokenizer,estimate,vllm_http}.go, prefixhash/hashing.go,
// approximateprefix/{plugin,indexer,types}.go, preciseprefixcache/producer.go},
// pkg/kvcache/{kvblock/token_processor.go,kvblock_scorer.go}.
package prefixcache

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// TokenProducerType is the token producer's plugin type.
const TokenProducerType = "token-producer"

// bytesPerToken is the estimate backend's packing (estimate.go).
const bytesPerToken = 4

// TokenProducer is token-producer. It fills Body.Tokens once per request;
// on a backend error the request goes on without tokens (the director
// logs and continues).
type TokenProducer struct {
	name    string
	backend func(ctx context.Context, body *fw.RequestBody) (*fw.TokenizedPrompt, error)
	// Backend is "estimate" or "vllm".
	Backend string
}

type tokenParams struct {
	UDSTokenizerConfig json.RawMessage `json:"udsTokenizerConfig,omitempty"`
	VLLM               *struct {
		URL       string `json:"url,omitempty"`
		Timeout   string `json:"timeout,omitempty"`
		MMTimeout string `json:"mmTimeout,omitempty"`
	} `json:"vllm,omitempty"`
	Estimate  json.RawMessage `json:"estimate,omitempty"`
	ModelName string          `json:"modelName"`
}

// NewTokenProducer is the token-producer factory: "vllm" (or modelName)
// selects the /render backend, otherwise the estimate backend. client
// carries the render calls.
func NewTokenProducer(name string, dec *json.Decoder, client *http.Client) (*TokenProducer, error) {
	var p tokenParams
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("failed to parse the parameters of the '%s' plugin - %w", TokenProducerType, err)
		}
	}
	estimate := len(p.Estimate) > 0
	uds := len(p.UDSTokenizerConfig) > 0
	vllm := p.VLLM != nil || p.ModelName != ""
	if (estimate && (uds || vllm)) || (uds && vllm) {
		return nil, fmt.Errorf("invalid configuration for '%s' plugin: only one of 'estimate', 'vllm', or 'udsTokenizerConfig' may be set", TokenProducerType)
	}
	if (uds || vllm) && p.ModelName == "" {
		return nil, fmt.Errorf("invalid configuration for '%s' plugin: 'modelName' must be specified", TokenProducerType)
	}
	if uds {
		return nil, errors.New("the sim does not emulate the deprecated udsTokenizerConfig backend")
	}
	tp := &TokenProducer{name: name, Backend: "estimate", backend: estimateTokens}
	if vllm {
		r := &renderer{model: p.ModelName, url: "http://localhost:8000", timeout: 5 * time.Second, client: client}
		if p.VLLM != nil {
			if u := strings.TrimRight(p.VLLM.URL, "/"); u != "" {
				r.url = u
			}
			if p.VLLM.Timeout != "" {
				d, err := time.ParseDuration(p.VLLM.Timeout)
				if err != nil {
					return nil, fmt.Errorf("failed to initialize vLLM HTTP renderer for '%s' plugin - %w", TokenProducerType, fmt.Errorf("invalid 'timeout': %w", err))
				}
				r.timeout = d
			}
		}
		if r.client == nil {
			r.client = &http.Client{}
		}
		tp.Backend, tp.backend = "vllm", r.render
	}
	return tp, nil
}

// TypedName implements fw.Plugin.
func (t *TokenProducer) TypedName() fw.TypedName {
	return fw.TypedName{Type: TokenProducerType, Name: t.name}
}

// Produces implements fw.Producer.
func (t *TokenProducer) Produces() []fw.DataKey {
	return []fw.DataKey{fw.TokenizedPromptKey.WithNonEmptyProducerName(t.name)}
}

// Produce implements fw.Producer.
func (t *TokenProducer) Produce(ctx context.Context, req *fw.Request, _ []*fw.Endpoint) error {
	if req.Body == nil || req.Body.Tokens != nil {
		return nil
	}
	tp, err := t.backend(ctx, req.Body)
	if err != nil {
		return err
	}
	req.Body.Tokens = tp
	return nil
}

// estimateTokens is the estimate backend: pre-tokenized prompts pass
// through; chat flattens tools JSON, then each message's role and text;
// completions use the prompt text, one prompt per string when several.
// The bytes are packed four per pseudo-token, little-endian, zero-padded.
func estimateTokens(_ context.Context, body *fw.RequestBody) (*fw.TokenizedPrompt, error) {
	if c := body.Completion; c != nil && len(c.TokenIDs) > 0 {
		return &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{c.TokenIDs}}, nil
	}
	if chat := body.Chat; chat != nil {
		var out []byte
		if len(chat.Tools) > 0 {
			if raw, err := json.Marshal(chat.Tools); err == nil {
				out = append(out, raw...)
			}
		}
		for _, m := range chat.Messages {
			out = append(out, m.Role...)
			if m.Raw != "" {
				out = append(out, m.Raw...)
				continue
			}
			for _, p := range m.Parts {
				if p.Type == "text" {
					out = append(out, p.Text...)
				}
			}
		}
		return &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{PackBytes(out)}}, nil
	}
	if c := body.Completion; c != nil {
		if len(c.Strings) > 1 {
			tp := &fw.TokenizedPrompt{}
			for _, s := range c.Strings {
				tp.PerPromptTokens = append(tp.PerPromptTokens, PackBytes([]byte(s)))
			}
			return tp, nil
		}
		return &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{PackBytes([]byte(strings.Join(c.Strings, "")))}}, nil
	}
	return nil, errors.New("unsupported request body type, skipping estimation")
}

// PackBytes packs bytes into little-endian uint32 pseudo-tokens.
func PackBytes(raw []byte) []uint32 {
	if len(raw) == 0 {
		return nil
	}
	if r := len(raw) % bytesPerToken; r != 0 {
		raw = append(raw, make([]byte, bytesPerToken-r)...)
	}
	out := make([]uint32, len(raw)/bytesPerToken)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(raw[i*bytesPerToken:])
	}
	return out
}

// renderer is the vLLM HTTP /render backend.
type renderer struct {
	model, url string
	timeout    time.Duration
	client     *http.Client
}

func (r *renderer) render(ctx context.Context, body *fw.RequestBody) (*fw.TokenizedPrompt, error) {
	payload := map[string]any{}
	for k, v := range body.Payload {
		payload[k] = v
	}
	payload["model"] = r.model
	if body.Chat != nil {
		var resp struct {
			TokenIDs []uint32 `json:"token_ids"`
		}
		if err := r.post(ctx, "/v1/chat/completions/render", payload, &resp); err != nil {
			return nil, err
		}
		return &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{resp.TokenIDs}}, nil
	}
	var resp []struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	if err := r.post(ctx, "/v1/completions/render", payload, &resp); err != nil {
		return nil, err
	}
	if len(resp) == 0 {
		return nil, errors.New("vLLM render returned empty response")
	}
	tp := &fw.TokenizedPrompt{}
	for _, x := range resp {
		tp.PerPromptTokens = append(tp.PerPromptTokens, x.TokenIDs)
	}
	return tp, nil
}

func (r *renderer) post(ctx context.Context, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("vLLM render request to %s failed: %w", r.url+path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("vLLM render %s returned status %d: %s", path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}
