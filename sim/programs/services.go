package programs

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"
)

// ResolveService maps port of Service ns/svc to the address of a ready Pod
// behind it (host:port), as kube-proxy would.
type ResolveService func(ctx context.Context, svc, ns, port string) (string, error)

// ServiceClient is the HTTP client in-cluster programs use (Deps.HTTPClient):
// <svc>.<ns>.svc[.cluster.local]:<port> dials what resolve answers, anything
// else dials as given. It keeps enough idle connections for every render
// call in flight at the suite's and the benchmark's concurrency, so calls do
// not dial anew.
func ServiceClient(resolve ResolveService) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     5 * time.Second,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				if svc, ns, ok := ServiceName(host); ok {
					if addr, err = resolve(ctx, svc, ns, port); err != nil {
						return nil, &net.DNSError{Err: err.Error(), Name: host, IsNotFound: true}
					}
				}
				return d.DialContext(ctx, network, addr)
			},
		},
	}
}

// ServiceName splits <svc>.<ns>.svc[.cluster.local].
func ServiceName(host string) (svc, ns string, ok bool) {
	host = strings.TrimSuffix(strings.TrimSuffix(host, "."), ".cluster.local")
	rest, found := strings.CutSuffix(host, ".svc")
	if !found {
		return "", "", false
	}
	svc, ns, ok = strings.Cut(rest, ".")
	return svc, ns, ok && svc != "" && ns != "" && !strings.Contains(ns, ".")
}
