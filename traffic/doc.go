// Package traffic drives OpenAI-compatible traffic (chat and completions,
// streaming or not, serial or concurrent) at a router or engine and records
// what every request saw: status, error class, latency, time to first token,
// chunks, text length, response headers and the prompt group it belonged to.
//
// It is built on github.com/sashabaranov/go-openai. Fields the library does
// not model (session_params, arbitrary extra body fields) and per-request
// headers are added by an HTTP doer the library calls, so the library is used
// unmodified and every byte the server sees still comes from its encoder.
//
// Every run sends through one net/http Transport of its own (keep-alive
// connections for every worker, proxy from the environment, no compression,
// no redirects followed), so the driver reads HTTP exactly as net/http does.
//
// A run is described by a Plan (JSON-serialisable, so it can be attached to a
// report) and executed by Run, which returns a Report holding one Result per
// request and a Summary.
package traffic
