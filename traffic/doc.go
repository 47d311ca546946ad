// Package traffic drives OpenAI-compatible traffic (chat and completions,
// streaming or not, serial or concurrent) at a router or engine and records
// what every request saw: status, error class, latency, time to first token,
// chunks, text length, response headers and the prompt group it belonged to.
// It also lists the models (GET /v1/models, EndpointModels), timed,
// classified and reported the same way.
//
// Requests are github.com/sashabaranov/go-openai's request types, encoded by
// encoding/json as its client encodes them and sent with its headers; the
// plan's extra body fields and per-request headers are added after. The
// answers are read by the driver itself, as go-openai's stream reader reads
// them (data lines, [DONE], in-band error events, the empty-line limit), into
// the fields a Result records. A model list is the GET go-openai's
// ListModels sends, its answer decoded into go-openai's ModelsList. go-openai's own client allocated about 26 KB
// per streamed request (a 4 KiB buffer per stream, a copy and two regular
// expression passes per line, its whole response types per event), and the
// garbage collections that paid for it landed in the latencies the driver
// reported (bench/overhead.sh); each worker now reuses its buffers and
// decoded values.
//
// Timestamps are taken where the bytes arrive: a request is timed from the
// moment it is handed to the transport to the read that brought its last byte
// (a stream's [DONE] line), and a stream's TTFT to the read that brought its
// first event with text, never after decoding. traffic/overhead measures what
// is left of the driver's own time in those figures.
//
// Every run sends through one net/http Transport of its own (keep-alive
// connections for every worker, proxy from the environment, no compression,
// no redirects followed), so the driver reads HTTP exactly as net/http does.
//
// A run is described by a Plan (JSON-serialisable, so it can be attached to a
// report) and executed by Run, which returns a Report holding one Result per
// request and a Summary.
package traffic
