package traffic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// errorBodyLimit bounds how much of an error answer's body a Result keeps.
const errorBodyLimit = 4 << 10

// drainLimit bounds how much unread body is drained after an answer so that
// the connection can be reused.
const drainLimit = 64 << 10

// answerLimit bounds a non-streaming answer's body (a chat completion of a
// few thousand tokens is tens of KiB).
const answerLimit = 16 << 20

// worker is one of a run's workers: the buffers and decoders it reuses from
// one request to the next, so that a request allocates little (every
// allocation brings the next garbage collection closer, and its pauses land
// in the latencies the driver reports).
type worker struct {
	r   *runner
	ctx context.Context // the worker's child of the run's context

	clock     arrivalClock
	events    eventReader
	answer    bytes.Buffer // a non-streaming answer's body
	errBody   bytes.Buffer // the start of a non-2xx answer's body
	decoded   answerJSON
	decodeErr error
	scratch   [512]byte

	// the request: go-openai's values and their encoder, reused
	chat       openai.ChatCompletionRequest
	completion openai.CompletionRequest
	message    [1]openai.ChatCompletionMessage
	encoded    bytes.Buffer
	encoder    *json.Encoder

	// stream chunks are decoded by one json.Decoder, which keeps its
	// state's buffers from one chunk to the next (json.Unmarshal builds
	// them anew for every chunk)
	chunk   chunkSource
	decoder *json.Decoder
}

// exchange is what one request saw on the wire.
type exchange struct {
	stream   bool
	sentAt   time.Time // handed to the transport
	status   int
	header   http.Header
	sawDone  bool
	mergeErr error

	// end is when the answer's last byte (a stream's [DONE] line) arrived;
	// firstEvent and firstText when a stream's first event, and its first
	// event carrying text, arrived.
	end        time.Time
	firstEvent time.Time
	firstText  time.Time

	chunks int
	chars  int
	finish string
	id     string
	usage  *Usage
	models []Model
}

// arrivalClock wraps an answer's body and notes when each read returned
// bytes: the time they reached the driver, before any decoding.
type arrivalClock struct {
	body io.Reader
	last time.Time
}

func (c *arrivalClock) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	if n > 0 {
		c.last = time.Now()
	}
	return n, err
}

// request builds the HTTP request go-openai would send for text: its request
// types encoded by encoding/json (the bytes its client sends), the plan's
// extra body fields, go-openai's headers, then the plan's headers. The
// request values and the encoding buffer are the worker's, reused; the body
// is a copy of exactly its size, since net/http may read it after RoundTrip
// returns, and a *bytes.Reader, which net/http writes with the headers in
// one write (another reader type makes it flush the headers first).
func (w *worker) request(ctx context.Context, ex *exchange, text string, headers map[string]string, extra map[string]json.RawMessage) (*http.Request, error) {
	r := w.r
	if r.plan.Endpoint == EndpointModels {
		return r.listRequest(ctx, headers)
	}
	w.encoded.Reset()
	if w.encoder == nil {
		w.encoder = json.NewEncoder(&w.encoded)
	}
	var err error
	path := "/chat/completions"
	if r.plan.Endpoint == EndpointCompletions {
		path = "/completions"
		w.completion = openai.CompletionRequest{Model: r.plan.Model, Prompt: text, MaxTokens: r.plan.MaxTokens,
			Stream: ex.stream, StreamOptions: r.streamOptions(ex.stream)}
		err = w.encoder.Encode(&w.completion)
	} else {
		w.message[0] = openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: text}
		w.chat = openai.ChatCompletionRequest{Model: r.plan.Model, MaxTokens: r.plan.MaxTokens, Messages: w.message[:],
			Stream: ex.stream, StreamOptions: r.streamOptions(ex.stream)}
		err = w.encoder.Encode(&w.chat)
	}
	if err != nil {
		return nil, fmt.Errorf("traffic: encoding the request: %w", err)
	}
	raw := bytes.Clone(bytes.TrimSuffix(w.encoded.Bytes(), []byte("\n"))) // Encode's newline; Marshal writes none
	if len(extra) > 0 {
		if raw, err = mergeFields(raw, extra); err != nil {
			ex.mergeErr = err
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.baseURL+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = jsonType
	if ex.stream {
		h["Accept"] = eventStreamType
		h["Cache-Control"] = noCache
		h["Connection"] = keepAlive
	} else {
		h["Accept"] = jsonType
	}
	r.addHeaders(h, headers)
	return req, nil
}

// listRequest builds GET /v1/models as go-openai's ListModels sends it: no
// body, Accept and Content-Type application/json (its sendRequest sets both
// on every request), then the plan's headers.
func (r *runner) listRequest(ctx context.Context, headers map[string]string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.baseURL+"/models", nil)
	if err != nil {
		return nil, err
	}
	req.Header["Accept"], req.Header["Content-Type"] = jsonType, jsonType
	r.addHeaders(req.Header, headers)
	return req, nil
}

// addHeaders adds the Authorization header, when the plan has an API key,
// then the request's plan headers.
func (r *runner) addHeaders(h http.Header, headers map[string]string) {
	if r.auth != nil {
		h["Authorization"] = r.auth
	}
	for name, value := range headers {
		h.Set(name, value)
	}
}

// The header values go-openai sends; shared, never modified.
var (
	jsonType        = []string{"application/json"}
	eventStreamType = []string{"text/event-stream"}
	noCache         = []string{"no-cache"}
	keepAlive       = []string{"keep-alive"}
)

func (r *runner) streamOptions(stream bool) *openai.StreamOptions {
	if !stream || !r.plan.IncludeUsage {
		return nil
	}
	return &openai.StreamOptions{IncludeUsage: true}
}

// mergeFields adds fields to the JSON object raw.
func mergeFields(raw []byte, fields map[string]json.RawMessage) ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("traffic: request body is not a JSON object: %w", err)
	}
	for k, v := range fields {
		body[k] = v
	}
	merged, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("traffic: encoding request body: %w", err)
	}
	return merged, nil
}

// send is what an http.Client does for the driver's requests, less the copy
// of the request headers Client.Do makes on every request for redirects (the
// driver follows none: a 3xx is the answer). Errors are *url.Error as from
// Client.Do. A URL with credentials goes through Client.Do, which turns them
// into an Authorization header.
func (r *runner) send(req *http.Request) (*http.Response, error) {
	if req.URL.User != nil {
		return r.httpClient.Do(req)
	}
	resp, err := r.httpClient.Transport.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// urlErrorOp is how Client.Do names the method in a *url.Error ("Post").
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// exchange sends req and reads its answer into ex. The error is what ended
// the exchange; classify judges it with what ex recorded.
func (w *worker) exchange(req *http.Request, ex *exchange) error {
	ex.sentAt = time.Now()
	resp, err := w.r.send(req)
	if err != nil {
		return err
	}
	ex.status, ex.header = resp.StatusCode, resp.Header
	w.clock = arrivalClock{body: resp.Body}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return w.readError(ex)
	case ex.stream:
		return w.readStream(ex)
	default:
		return w.readAnswer(ex)
	}
}

// readError keeps the start of a non-2xx answer's body and drains the rest.
func (w *worker) readError(ex *exchange) error {
	w.errBody.Reset()
	_, err := io.Copy(&w.errBody, io.LimitReader(&w.clock, errorBodyLimit))
	if err == nil {
		w.drain()
	}
	ex.end = w.clock.last
	return err
}

// drain reads what is left of the body, up to drainLimit, so that net/http
// can put the connection back in the pool.
func (w *worker) drain() {
	for n := 0; n < drainLimit; {
		m, err := w.clock.Read(w.scratch[:])
		n += m
		if err != nil {
			return
		}
	}
}

// readAnswer reads a non-streaming answer whole, then decodes it: the end is
// when its last byte arrived, not when decoding finished.
func (w *worker) readAnswer(ex *exchange) error {
	w.answer.Reset()
	n, err := w.answer.ReadFrom(io.LimitReader(&w.clock, answerLimit+1))
	ex.end = w.clock.last
	if err != nil {
		return err
	}
	if n > answerLimit {
		return fmt.Errorf("traffic: the answer's body is larger than %d MiB", answerLimit>>20)
	}
	if w.r.plan.Endpoint == EndpointModels {
		return ex.readModels(w.answer.Bytes())
	}
	a := w.decodeAnswer(bytes.TrimSpace(w.answer.Bytes())) // a trailing newline is common
	if a == nil {
		return w.decodeErr
	}
	ex.id = a.ID
	for i := range a.Choices {
		c := &a.Choices[i]
		ex.chars += utf8.RuneCountInString(c.Message.Content) + utf8.RuneCountInString(c.Message.ReasoningContent) + utf8.RuneCountInString(c.Text)
		ex.setFinish(c.FinishReason)
	}
	ex.setUsage(a.Usage)
	return nil
}

// readStream reads a stream's events until [DONE], the body's end or an
// error; it returns streamEnd when the body ended, so that classify decides
// from ex whether the stream finished.
func (w *worker) readStream(ex *exchange) error {
	w.events.reset(&w.clock)
	defer func() {
		if ex.end.IsZero() {
			ex.end = w.clock.last
		}
	}()
	for {
		data, err := w.events.next()
		at := w.clock.last
		switch {
		case err == errDone:
			ex.sawDone = true
			ex.end = at
			w.drain()
			return streamEnd{}
		case err == io.EOF:
			return streamEnd{}
		case err != nil:
			return err
		}
		c := w.decodeAnswer(data)
		if c == nil {
			return w.decodeErr
		}
		if ex.chunks == 0 {
			ex.firstEvent = at
		}
		ex.chunks++
		if ex.id == "" {
			ex.id = c.ID
		}
		for i := range c.Choices {
			ch := &c.Choices[i]
			n := utf8.RuneCountInString(ch.Delta.Content) + utf8.RuneCountInString(ch.Delta.ReasoningContent) + utf8.RuneCountInString(ch.Text)
			if n > 0 && ex.firstText.IsZero() {
				ex.firstText = at
			}
			ex.chars += n
			ex.setFinish(ch.FinishReason)
		}
		ex.setUsage(c.Usage)
	}
}

// readModels decodes a model list as go-openai's ListModels does (one JSON
// value read from the body into its ModelsList) and keeps each model's id
// and owned_by.
func (ex *exchange) readModels(body []byte) error {
	var list openai.ModelsList
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&list); err != nil {
		return err
	}
	ex.models = make([]Model, 0, len(list.Models))
	for _, m := range list.Models {
		ex.models = append(ex.models, Model{ID: m.ID, OwnedBy: m.OwnedBy})
	}
	return nil
}

func (ex *exchange) setFinish(f string) {
	if f != "" && f != string(openai.FinishReasonNull) {
		ex.finish = f
	}
}

func (ex *exchange) setUsage(u *usageJSON) {
	if u == nil || (u.PromptTokens == 0 && u.CompletionTokens == 0) {
		return
	}
	ex.usage = &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		ex.usage.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
}

// answerJSON is the part of a completion, chat completion or stream chunk
// that the driver records, spelled as go-openai's types spell it (the
// choices' message, delta or text; finish_reason; usage). Decoding into it
// instead of go-openai's whole types saves most of a request's allocations.
type answerJSON struct {
	ID      string       `json:"id"`
	Choices []choiceJSON `json:"choices"`
	Usage   *usageJSON   `json:"usage"`
}

type choiceJSON struct {
	Message      textJSON `json:"message"`
	Delta        textJSON `json:"delta"`
	Text         string   `json:"text"`
	FinishReason string   `json:"finish_reason"`
}

type textJSON struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
}

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// decodeAnswer decodes data into the worker's reused answerJSON, cleared
// first: encoding/json leaves a field that is null or absent as it was, and
// decodes a list into the elements already there. It returns nil, with
// w.decodeErr set, when data is not such an object: the error is
// json.Unmarshal's, so that it reads and classifies the same.
func (w *worker) decodeAnswer(data []byte) *answerJSON {
	w.clearDecoded()
	if w.decoder == nil {
		w.decoder = json.NewDecoder(&w.chunk)
	}
	w.chunk.data = data
	start := w.decoder.InputOffset()
	if err := w.decoder.Decode(&w.decoded); err == nil && w.decoder.InputOffset()-start == int64(len(data)) {
		return &w.decoded // data was exactly one JSON value
	}
	// Not one JSON object: start over with a fresh decoder, and let
	// json.Unmarshal say what is wrong.
	w.decoder = nil
	w.clearDecoded()
	if err := json.Unmarshal(data, &w.decoded); err != nil {
		w.decodeErr = err
		return nil
	}
	return &w.decoded
}

func (w *worker) clearDecoded() {
	choices := w.decoded.Choices[:cap(w.decoded.Choices)]
	clear(choices)
	w.decoded = answerJSON{Choices: choices[:0]}
}

// chunkSource feeds one chunk at a time to the worker's json.Decoder.
type chunkSource struct{ data []byte }

func (c *chunkSource) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}

// errDone is eventReader.next's answer to "data: [DONE]".
var errDone = fmt.Errorf("traffic: data: [DONE]")

// emptyMessagesLimit is go-openai's default ClientConfig.EmptyMessagesLimit:
// how many lines in a row that are not data events a stream may send.
const emptyMessagesLimit = 300

// lineLimit bounds one line of an event stream.
const lineLimit = 8 << 20

// eventReader reads an SSE body line by line as go-openai's stream reader
// does (a "data:" line is an event, "data: [DONE]" ends the stream, a
// "data: {"error": ...}" line is an in-band error, more than
// emptyMessagesLimit other lines in a row is an error, and other lines that
// together form an OpenAI error body are that error at the end), reusing
// its buffers from one stream to the next.
type eventReader struct {
	br    *bufio.Reader
	long  []byte       // a line longer than br's buffer, assembled
	other bytes.Buffer // the lines that were not data events, as go-openai keeps them
}

func (e *eventReader) reset(body io.Reader) {
	if e.br == nil {
		e.br = bufio.NewReaderSize(body, 4096)
	} else {
		e.br.Reset(body)
	}
	e.other.Reset()
}

// next returns the next event's data, errDone after [DONE], io.EOF at the
// body's end, or the error that ended the read. data is valid until the next
// call.
func (e *eventReader) next() ([]byte, error) {
	other := 0
	for {
		line, readErr := e.line()
		if readErr != nil {
			// A last line without its newline counts only as [DONE]; go-openai
			// drops it, and a line cut by a broken connection is no event.
			if readErr == io.EOF && isDoneLine(line) {
				return nil, errDone
			}
			if err := e.errorBody(); err != nil {
				return nil, err
			}
			return nil, readErr
		}
		line = bytes.TrimSpace(line)
		data, isData := cutData(line)
		if isData && bytes.HasPrefix(data, []byte(`{"error":`)) {
			return nil, inBandError(data)
		}
		if !isData {
			if e.other.Len() < errorBodyLimit {
				e.other.Write(line)
			}
			if other++; other > emptyMessagesLimit {
				return nil, openai.ErrTooManyEmptyStreamMessages
			}
			continue
		}
		if string(data) == "[DONE]" {
			return nil, errDone
		}
		return data, nil
	}
}

// isDoneLine matches `data:[ws][DONE][ws]` as go-openai does.
func isDoneLine(line []byte) bool {
	data, ok := cutData(bytes.TrimSpace(line))
	return ok && string(data) == "[DONE]"
}

// line returns the next line without its newline; the body's last line may
// come without one, together with the read's error.
func (e *eventReader) line() ([]byte, error) {
	line, err := e.br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	e.long = append(e.long[:0], line...)
	for err == bufio.ErrBufferFull {
		if len(e.long) > lineLimit {
			return nil, fmt.Errorf("traffic: an event stream line is longer than %d MiB", lineLimit>>20)
		}
		line, err = e.br.ReadSlice('\n')
		e.long = append(e.long, line...)
	}
	return e.long, err
}

// cutData strips "data:" and the whitespace after it, as go-openai's
// `^data:\s*` does.
func cutData(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return nil, false
	}
	return bytes.TrimLeft(rest, " \t\r\n\f"), true
}

// inBandError is the error a "data: {"error": ...}" event carries, wrapped
// as go-openai wraps it.
func inBandError(data []byte) error {
	var resp openai.ErrorResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return err
	}
	if resp.Error == nil {
		return fmt.Errorf("traffic: an error event without an error: %s", data)
	}
	return fmt.Errorf("error, %w", resp.Error)
}

// errorBody is the OpenAI error the stream's other lines spell together,
// if they do (a server that answered a stream with a plain error body).
func (e *eventReader) errorBody() error {
	if e.other.Len() == 0 {
		return nil
	}
	var resp openai.ErrorResponse
	if json.Unmarshal(e.other.Bytes(), &resp) != nil || resp.Error == nil {
		return nil
	}
	return fmt.Errorf("error, %w", resp.Error)
}

// headerName is a response header to capture: its canonical form for the
// lookup and its lower-case form for the Result.
type headerName struct{ canonical, lower string }

func headerNames(names []string) []headerName {
	out := make([]headerName, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		c := http.CanonicalHeaderKey(n)
		if !seen[c] {
			seen[c] = true
			out = append(out, headerName{canonical: c, lower: strings.ToLower(n)})
		}
	}
	return out
}

// capture returns the wanted response headers that are present, keyed by
// lower-case name.
func capture(h http.Header, names []headerName) map[string]string {
	var out map[string]string
	for _, n := range names {
		if v := h[n.canonical]; len(v) > 0 && v[0] != "" {
			if out == nil {
				out = make(map[string]string, len(names))
			}
			out[n.lower] = v[0]
		}
	}
	return out
}
