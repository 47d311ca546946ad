package programs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestServiceName(t *testing.T) {
	for host, want := range map[string][3]string{
		"m-server.ns.svc":               {"m-server", "ns", "true"},
		"m-server.ns.svc.cluster.local": {"m-server", "ns", "true"},
		"m.ns.svc.cluster.local.":       {"m", "ns", "true"},
		"10.244.0.3":                    {"", "", "false"},
		"m.a.b.svc":                     {"", "", "false"},
		"localhost":                     {"", "", "false"},
	} {
		svc, ns, ok := ServiceName(host)
		if got := [3]string{svc, ns, fmt.Sprint(ok)}; ok && got != want || !ok && want[2] != "false" {
			t.Errorf("ServiceName(%q) = %v, want %v", host, got, want)
		}
	}
}

// A Service name dials what the resolver answers; a plain address dials
// as given; a resolver's refusal is a lookup error naming the host.
func TestServiceClientDialsTheResolvedPod(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pod") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var asked []string
	c := ServiceClient(func(_ context.Context, svc, ns, p string) (string, error) {
		asked = append(asked, svc+"/"+ns+":"+p)
		if svc == "gone" {
			return "", fmt.Errorf("service %s/%s has no ready endpoint", ns, svc)
		}
		return srv.Listener.Addr().String(), nil
	})
	for _, url := range []string{"http://m-server.ns.svc:" + port + "/", srv.URL + "/"} {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "pod" {
			t.Errorf("GET %s: %q", url, body)
		}
	}
	if len(asked) != 1 || asked[0] != "m-server/ns:"+port {
		t.Errorf("resolver asked %v, want only the Service name", asked)
	}
	_, err := c.Get("http://gone.ns.svc:8000/")
	var dns *net.DNSError
	if !errors.As(err, &dns) || dns.Name != "gone.ns.svc" {
		t.Errorf("GET of a Service without endpoints: %v, want a lookup error for gone.ns.svc", err)
	}
}
