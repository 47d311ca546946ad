package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultScrapeTimeout bounds one scrape when the caller gives no timeout and
// its context has no earlier deadline.
const DefaultScrapeTimeout = 10 * time.Second

// ScrapeOption adjusts Scrape.
type ScrapeOption func(*scrapeConfig)

type scrapeConfig struct {
	client  *http.Client
	timeout time.Duration
	source  string
}

// WithHTTPClient scrapes through c (e.g. a client that tunnels through the
// API server's Pod proxy) instead of http.DefaultClient.
func WithHTTPClient(c *http.Client) ScrapeOption { return func(s *scrapeConfig) { s.client = c } }

// WithTimeout bounds the whole scrape, body included.
func WithTimeout(d time.Duration) ScrapeOption { return func(s *scrapeConfig) { s.timeout = d } }

// WithSource names the snapshot's source (default: the URL), e.g. the Pod
// name, which is what Merge puts into SourceLabel.
func WithSource(name string) ScrapeOption { return func(s *scrapeConfig) { s.source = name } }

// Scrape GETs a Prometheus /metrics URL and parses it. Errors name the URL and,
// for an HTTP failure, the status and the start of the body.
func Scrape(ctx context.Context, url string, opts ...ScrapeOption) (Snapshot, error) {
	cfg := scrapeConfig{client: http.DefaultClient, timeout: DefaultScrapeTimeout, source: url}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.client == nil {
		cfg.client = http.DefaultClient
	}
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	// Ask for the classic text format: every exporter in play serves it, and
	// it is what expfmt's text parser reads.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	resp, err := cfg.client.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Snapshot{}, fmt.Errorf("scrape %s: HTTP %s: %q", url, resp.Status, strings.TrimSpace(string(head)))
	}
	if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "protobuf") {
		return Snapshot{}, fmt.Errorf("scrape %s: server answered %q; only the text exposition format is read", url, ct)
	}
	snap, err := Parse(cfg.source, resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return Snapshot{}, fmt.Errorf("scrape %s: reading the body: %w", url, ctx.Err())
		}
		return Snapshot{}, err
	}
	return snap, nil
}
