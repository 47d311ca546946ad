package enginetest

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/routes"
)

var param = regexp.MustCompile(`\{[^}]*\}`)

// Do sends method path with an empty JSON body (for methods that carry
// one) and returns the status, the Allow header and the body.
func (e *Engine) Do(t testing.TB, method, path string) (int, string, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPut {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, e.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Allow"), string(b)
}

// CheckRoutes asserts that the engine answers every route of tb as the
// table says: a served route with something other than the router's 404,
// 405 or the not-emulated 501; a route the real server registers by default
// but the sim does not serve with 501; a conditional one it does not serve
// with Starlette's 404; a method the route does not take with Starlette's
// 405 and the route's Allow. handlers are the paths the engine has
// handlers for: exactly the served ones.
func CheckRoutes(t *testing.T, e *Engine, tb *routes.Table, handlers []string) {
	t.Helper()
	served := tb.Served()
	slices.Sort(served)
	served = slices.Compact(served)
	slices.Sort(handlers)
	if !slices.Equal(served, handlers) {
		t.Errorf("the engine's handlers %v are not the table's served routes %v", handlers, served)
	}
	const notFound, notAllowed = `{"detail":"Not Found"}`, `{"detail":"Method Not Allowed"}`
	for _, r := range tb.Routes {
		path := param.ReplaceAllString(r.Path, "x")
		methods := r.Methods
		if r.Mount {
			methods = []string{http.MethodGet, http.MethodPost}
		}
		for _, m := range methods {
			code, _, body := e.Do(t, m, path)
			switch {
			case r.Served && (code == 405 || code == 501 || body == notFound):
				t.Errorf("%s %s is served by the table but answered %d %s", m, path, code, body)
			case !r.Served && r.Default() && code != 501:
				t.Errorf("%s %s (not emulated) answered %d %s, want 501", m, path, code, body)
			case !r.Served && !r.Default() && (code != 404 || body != notFound):
				t.Errorf("%s %s (registered only %s) answered %d %s, want Starlette's 404", m, path, r.When, code, body)
			}
		}
		if r.Mount {
			continue
		}
		if tb.Find(http.MethodPatch, path).MethodOK {
			continue
		}
		code, allow, body := e.Do(t, http.MethodPatch, path)
		want := tb.Find(http.MethodPatch, path).Route.Allow()
		if code != 405 || body != notAllowed || allow != want {
			t.Errorf("PATCH %s answered %d %q %s, want 405 Allow %q %s", path, code, allow, body, want, notAllowed)
		}
	}
	for _, p := range []string{"/nope", "/v1/nope", "/v1/chat/completion"} {
		if code, _, body := e.Do(t, http.MethodPost, p); code != 404 || body != notFound {
			t.Errorf("POST %s answered %d %s, want Starlette's 404", p, code, body)
		}
	}
}
