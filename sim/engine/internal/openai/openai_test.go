package openai

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

func TestDecodeChatFlattensContentParts(t *testing.T) {
	req, err := DecodeChat([]byte(`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"text","text":"b"}]},{"role":"assistant","content":null}],"stream":true,"stream_options":{"include_usage":false},"max_completion_tokens":7,"request_id":"r1","ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "m" || !req.Stream || req.MaxTokens != 7 || req.RequestID != "r1" || !req.IgnoreEOS || req.N != 1 {
		t.Fatalf("common %+v", req.Common)
	}
	if req.StreamOptions == nil || req.StreamOptions.IncludeUsage == nil || *req.StreamOptions.IncludeUsage {
		t.Fatalf("stream options %+v", req.StreamOptions)
	}
	want := []tokenize.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "a\nb"}, {Role: "assistant", Content: ""}}
	if len(req.Messages) != 3 || req.Messages[1] != want[1] || req.Messages[2] != want[2] {
		t.Fatalf("messages %+v", req.Messages)
	}
}

func fieldErr(t *testing.T, err error) FieldError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) == 0 {
		t.Fatalf("err = %v, want *ValidationError", err)
	}
	return ve.Errors[0]
}

func TestDecodeErrorsAreReportedAsPydanticWould(t *testing.T) {
	_, err := DecodeChat([]byte(`{"model":"m","stream":false}`))
	if fe := fieldErr(t, err); fe.Type != "missing" || strings.Join(fe.Loc, ".") != "body.messages" || fe.Input != "<dict of 2 items>" {
		t.Fatalf("missing messages: %+v", fe)
	}
	_, err = DecodeChat([]byte(`{"model":`))
	if fe := fieldErr(t, err); fe.Type != "json_invalid" || fe.Loc[0] != "body" {
		t.Fatalf("bad JSON: %+v", fe)
	}
	_, err = DecodeChat([]byte(`[1,2]`))
	if fe := fieldErr(t, err); fe.Type != "model_attributes_type" {
		t.Fatalf("non-object: %+v", fe)
	}
	_, err = DecodeChat([]byte(`{"messages":[],"max_tokens":"x"}`))
	if fe := fieldErr(t, err); fe.Type != "int_parsing" || strings.Join(fe.Loc, ".") != "body.max_tokens" {
		t.Fatalf("bad int string: %+v", fe)
	}
	_, err = DecodeChat([]byte(`{"messages":[],"max_tokens":[1]}`))
	if fe := fieldErr(t, err); fe.Type != "int_type" {
		t.Fatalf("bad int: %+v", fe)
	}
	_, err = DecodeChat([]byte(`{"messages":[],"n":1.5}`))
	if fe := fieldErr(t, err); fe.Type != "int_from_float" {
		t.Fatalf("fractional int: %+v", fe)
	}
	_, err = DecodeChat([]byte(`{"messages":[],"temperature":"hot"}`))
	if fe := fieldErr(t, err); fe.Type != "float_parsing" || strings.Join(fe.Loc, ".") != "body.temperature" {
		t.Fatalf("bad float string: %+v", fe)
	}
	_, err = DecodeChat([]byte(`{"messages":[],"top_p":{}}`))
	if fe := fieldErr(t, err); fe.Type != "float_type" {
		t.Fatalf("bad float: %+v", fe)
	}
	// pydantic's lax mode takes numeric strings and integral floats.
	req, err := DecodeChat([]byte(`{"messages":[],"max_tokens":"7","n":1.0,"temperature":"0.5","top_k":3}`))
	if err != nil || req.MaxTokens != 7 || req.N != 1 || *req.Sampling.Temperature != 0.5 || *req.Sampling.TopK != 3 || req.MaxTokensField != "max_tokens" {
		t.Fatalf("lax values: %+v %v", req, err)
	}
	_, err = DecodeChat([]byte(`{"messages":[],"stream":"yes"}`))
	if fe := fieldErr(t, err); fe.Type != "bool_type" {
		t.Fatalf("bad bool: %+v", fe)
	}
}

func TestDecodeCompletionPromptForms(t *testing.T) {
	for body, want := range map[string]string{
		`{"prompt":"hello"}`:   "hello",
		`{"prompt":["hello"]}`: "hello",
	} {
		req, err := DecodeCompletion([]byte(body))
		if err != nil || req.Prompt != want {
			t.Fatalf("%s: %+v %v", body, req, err)
		}
	}
	req, err := DecodeCompletion([]byte(`{"prompt":[1,2,3],"max_tokens":null}`))
	if err != nil || len(req.PromptIDs) != 3 || !req.MaxTokensNull || req.MaxTokens != -1 {
		t.Fatalf("ids: %+v %v", req, err)
	}
	req, err = DecodeCompletion([]byte(`{"prompt":[[4,5]]}`))
	if err != nil || len(req.PromptIDs) != 2 {
		t.Fatalf("nested ids: %+v %v", req, err)
	}
	_, err = DecodeCompletion([]byte(`{"prompt":["a","b"]}`))
	if fe := fieldErr(t, err); !strings.Contains(fe.Msg, "one prompt per request") {
		t.Fatalf("batch: %+v", fe)
	}
}

func TestPlanStopVersusLength(t *testing.T) {
	for _, tc := range []struct {
		max, natural, min int
		ignore            bool
		want              Output
	}{
		{-1, 16, 0, false, Output{Tokens: 16, Finish: FinishStop}},
		{5, 16, 0, false, Output{Tokens: 5, Finish: FinishLength}},
		{16, 16, 0, false, Output{Tokens: 16, Finish: FinishStop}},
		{100, 16, 0, false, Output{Tokens: 16, Finish: FinishStop}},
		{100, 16, 0, true, Output{Tokens: 100, Finish: FinishLength}},
		{-1, 16, 30, false, Output{Tokens: 31, Finish: FinishStop}},
	} {
		if got := Plan(tc.max, tc.natural, tc.min, tc.ignore); got != tc.want {
			t.Errorf("Plan(%d,%d,%d,%v) = %+v, want %+v", tc.max, tc.natural, tc.min, tc.ignore, got, tc.want)
		}
	}
	o := Plan(-1, 4, 0, false)
	if o.TokenText(3) != "" || o.TokenText(0) == "" || o.Text() != tokenize.TokenText(0)+tokenize.TokenText(1)+tokenize.TokenText(2) {
		t.Fatalf("stop output text %q", o.Text())
	}
	ids := o.AppendIDs(nil)
	if len(ids) != 4 || ids[3] != tokenize.IMEnd {
		t.Fatalf("ids %v", ids)
	}
}

func TestNewIDIsUUID4Hex(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	a, b := NewID(), NewID()
	if !re.MatchString(a) || a == b {
		t.Fatalf("ids %q %q", a, b)
	}
}

func TestDecodeTokenizesChatThroughTheTemplateAndCompletionsAsSent(t *testing.T) {
	chat, err := Decode([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`), true, make([]uint32, 7))
	if err != nil {
		t.Fatal(err)
	}
	want := tokenize.Encode(nil, tokenize.ApplyChatTemplate([]tokenize.Message{{Role: "user", Content: "hi"}}))
	if !slices.Equal(chat.Prompt, want) || chat.MaxTokens != 3 || len(chat.Messages) != 1 {
		t.Fatalf("chat %+v, want prompt %v", chat, want)
	}
	ids, err := Decode([]byte(`{"prompt":[5,6,7],"max_tokens":null}`), false, nil)
	if err != nil || !slices.Equal(ids.Prompt, []uint32{5, 6, 7}) || !ids.MaxTokensNull || ids.Messages != nil {
		t.Fatalf("token-id completion %+v %v", ids, err)
	}
	text, err := Decode([]byte(`{"prompt":"hello there"}`), false, nil)
	if err != nil || !slices.Equal(text.Prompt, tokenize.Encode(nil, "hello there")) {
		t.Fatalf("text completion %+v %v", text, err)
	}
	if _, err := Decode([]byte(`{"prompt":"x"}`), true, nil); fieldErr(t, err).Type != "missing" {
		t.Fatal("a completion body decoded as chat")
	}
}

func TestReadRequestRefusesOtherMediaTypesAndOversizedBodies(t *testing.T) {
	body := `{"prompt":"hi"}`
	r := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "text/plain")
	_, err := ReadRequest(r, false, 1<<10, nil)
	if fe := fieldErr(t, err); strings.Join(fe.Loc, ".") != "header.content-type" || fe.Input != "text/plain" || !strings.Contains(fe.Msg, "Only 'application/json'") {
		t.Fatalf("media type error %+v", fe)
	}
	r = httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	_, err = ReadRequest(r, false, 4, nil)
	var ve *ValidationError
	if err == nil || errors.As(err, &ve) {
		t.Fatalf("oversized body: %v, want a read error", err)
	}
	r = httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	req, err := ReadRequest(r, false, 1<<10, nil)
	if err != nil || !slices.Equal(req.Prompt, tokenize.Encode(nil, "hi")) {
		t.Fatalf("good request %+v %v", req, err)
	}
}

func TestResponseHeadAndUsageCountsInDeclaredOrder(t *testing.T) {
	b := AppendHead(nil, "chatcmpl-1", "chat.completion", 1700000000, `m "q"`)
	if got := string(append(b, '}')); got != `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m \"q\""}` {
		t.Fatalf("head %s", got)
	}
	b = AppendUsageCounts(nil, 12, 5)
	if got := string(append(b, '}')); got != `{"prompt_tokens":12,"total_tokens":17,"completion_tokens":5}` {
		t.Fatalf("usage %s", got)
	}
}

// filler is the model's text for tokens [0, n).
func filler(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(tokenize.TokenText(i))
	}
	return b.String()
}

func TestStopStringsEndTheOutputAtTheTokenThatCompletesThem(t *testing.T) {
	// The filler starts " The sky is a map": " is" is token 2.
	if got := filler(5); got != " The sky is a map" {
		t.Fatalf("filler changed: %q", got)
	}
	base := Plan(-1, 16, 0, false)
	for _, tc := range []struct {
		name  string
		out   Output
		rules StopRules
		want  Output
		text  string
	}{
		{"trimmed", base, StopRules{Strings: []string{" is"}}, Output{Tokens: 3, Finish: FinishStop, StopStr: " is", Trim: true, Cut: 8}, " The sky"},
		{"kept", base, StopRules{Strings: []string{" is"}, Keep: true}, Output{Tokens: 3, Finish: FinishStop, StopStr: " is", Trim: true, Cut: 11}, " The sky is"},
		{"spans two tokens", base, StopRules{Strings: []string{"ky i"}}, Output{Tokens: 3, Finish: FinishStop, StopStr: "ky i", Trim: true, Cut: 6}, " The s"},
		{"beats the length limit on the same token", Plan(3, 16, 0, false), StopRules{Strings: []string{" is"}}, Output{Tokens: 3, Finish: FinishStop, StopStr: " is", Trim: true, Cut: 8}, " The sky"},
		{"beyond the limit: length", Plan(2, 16, 0, false), StopRules{Strings: []string{" is"}}, Output{Tokens: 2, Finish: FinishLength}, " The sky"},
		{"applies under ignore_eos", Plan(100, 16, 0, true), StopRules{Strings: []string{"map"}}, Output{Tokens: 5, Finish: FinishStop, StopStr: "map", Trim: true, Cut: 14}, " The sky is a "},
		{"vLLM: earliest end wins", base, StopRules{Strings: []string{"map", " m"}}, Output{Tokens: 5, Finish: FinishStop, StopStr: " m", Trim: true, Cut: 13}, " The sky is a"},
		{"SGLang: list order wins", base, StopRules{Strings: []string{"map", " m"}, ListOrder: true}, Output{Tokens: 5, Finish: FinishStop, StopStr: "map", Trim: true, Cut: 14}, " The sky is a "},
		{"vLLM: not looked for within min_tokens", Plan(-1, 40, 3, false), StopRules{Strings: []string{" sky"}, MinTokens: 3}, Output{Tokens: 34, Finish: FinishStop, StopStr: " sky", Trim: true, Cut: len(filler(33))}, filler(33)},
		{"stop token id", base, StopRules{TokenIDs: []uint32{tokenize.TokenID(1)}}, Output{Tokens: 2, Finish: FinishStop, StopToken: tokenize.TokenID(1), HasStopToken: true, Trim: true, Cut: 4}, " The"},
		{"stop token id kept", base, StopRules{TokenIDs: []uint32{tokenize.TokenID(1)}, Keep: true}, Output{Tokens: 2, Finish: FinishStop, StopToken: tokenize.TokenID(1), HasStopToken: true, Trim: true, Cut: 8}, " The sky"},
		{"SGLang: ignore_eos drops stop token ids", Plan(5, 16, 0, true), StopRules{TokenIDs: []uint32{tokenize.TokenID(1)}, IgnoreTokenIDs: true}, Output{Tokens: 5, Finish: FinishLength}, " The sky is a map"},
		{"no match: unchanged", base, StopRules{Strings: []string{"zebra"}}, base, filler(15)},
	} {
		got := tc.out.Stop(tc.rules)
		if got != tc.want || got.Text() != tc.text {
			t.Errorf("%s: %+v %q, want %+v %q", tc.name, got, got.Text(), tc.want, tc.text)
		}
		var streamed strings.Builder
		for i := range got.Tokens {
			streamed.WriteString(got.TokenText(i))
		}
		if streamed.String() != got.Text() {
			t.Errorf("%s: streamed %q, whole %q", tc.name, streamed.String(), got.Text())
		}
	}
}
