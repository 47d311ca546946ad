package routes

import "testing"

func TestFindFollowsStarletteMatching(t *testing.T) {
	tb := Table{Routes: []Route{
		{Path: "/health", Methods: []string{"GET"}},
		{Path: "/ping", Methods: []string{"GET", "POST"}},
		{Path: "/store", Methods: []string{"PUT"}},
		{Path: "/store", Methods: []string{"DELETE"}},
		{Path: "/v1/responses/{id}", Methods: []string{"GET"}},
		{Path: "/v1/responses/{id}/cancel", Methods: []string{"POST"}},
		{Path: "/v1/models/{model:path}", Methods: []string{"GET"}},
		{Path: "/metrics", Mount: true},
	}}
	for _, tc := range []struct {
		method, path string
		want         string // matched route path, "" for none
		ok           bool
	}{
		{"GET", "/health", "/health", true},
		{"HEAD", "/health", "/health", true},
		{"POST", "/health", "/health", false},
		{"GET", "/health/", "", false},
		{"POST", "/ping", "/ping", true},
		{"DELETE", "/store", "/store", true},
		{"GET", "/store", "/store", false},
		{"GET", "/v1/responses/abc", "/v1/responses/{id}", true},
		{"GET", "/v1/responses/", "", false},
		{"POST", "/v1/responses/abc/cancel", "/v1/responses/{id}/cancel", true},
		{"GET", "/v1/models/Qwen/Qwen3-0.6B", "/v1/models/{model:path}", true},
		{"GET", "/v1/models/", "/v1/models/{model:path}", true},
		{"POST", "/metrics", "/metrics", true},
		{"GET", "/metricsfoo", "/metrics", true},
		{"GET", "/nope", "", false},
	} {
		m := tb.Find(tc.method, tc.path)
		got := ""
		if m.Route != nil {
			got = m.Route.Path
		}
		if got != tc.want || m.MethodOK != tc.ok {
			t.Errorf("%s %s: %q %v, want %q %v", tc.method, tc.path, got, m.MethodOK, tc.want, tc.ok)
		}
	}
	if m := tb.Find("POST", "/health"); m.Route.Allow() != "GET, HEAD" {
		t.Errorf("Allow %q", m.Route.Allow())
	}
	if m := tb.Find("GET", "/store"); m.Route.Allow() != "PUT" {
		t.Errorf("the first partial match gives Allow: %q", m.Route.Allow())
	}
}
