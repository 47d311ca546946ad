package traffic_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gpustack/routing-conformance/traffic"
)

// A serial affinity run: a shared ~500-character prefix, streaming and
// non-streaming in turn, with a session key per prefix group.
func ExampleRun() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Inference-Pod", "engine-0")
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()

	rep, err := traffic.Run(context.Background(), traffic.Plan{
		BaseURL:        srv.URL + "/v1",
		Model:          "Qwen/Qwen3-0.6B",
		Requests:       4,
		Mode:           traffic.ModeAlternate,
		MaxTokens:      16,
		Headers:        map[string]string{"X-Session-Id": "session-{group}"},
		SessionParams:  map[string]string{"session_id": "session-{group}"},
		RequestTimeout: 10 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ok:", rep.Summary.OK, "streams timed:", rep.Summary.TTFT.Count, "by pod:", rep.Summary.ByInferencePod)
	// Output: ok: 4 streams timed: 2 by pod: map[engine-0:4]
}
