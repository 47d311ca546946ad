package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// HTTPGet reads at most limit bytes of a 200 and names any other status.
func TestHTTPGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("0123456789"))
	}))
	defer srv.Close()
	get := HTTPGet(srv.Client())
	body, err := get(context.Background(), srv.URL+"/view", time.Second, 4)
	if err != nil || string(body) != "0123" {
		t.Errorf("GET /view with limit 4: %q %v", body, err)
	}
	if _, err := get(context.Background(), srv.URL+"/down", time.Second, 4); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("GET /down: %v, want an error naming 503", err)
	}
}
