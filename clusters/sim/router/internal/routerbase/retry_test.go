package routerbase

import (
	"context"
	"testing"
	"time"
)

func TestBackoffExponentialCappedWithoutJitter(t *testing.T) {
	cfg := RetryConfig{MaxRetries: 10, InitialBackoff: 100, MaxBackoff: 250, Multiplier: 2}
	for attempt, want := range []time.Duration{100, 200, 250, 250} {
		if got := RetryDelay(cfg, uint32(attempt)); got != want*time.Millisecond {
			t.Errorf("attempt %d: %v want %v", attempt, got, want*time.Millisecond)
		}
	}
}

func TestBackoffJitterStaysInBand(t *testing.T) {
	cfg := RetryConfig{InitialBackoff: 50, MaxBackoff: 30000, Multiplier: 1.5, Jitter: 0.2}
	for i := 0; i < 200; i++ {
		d := RetryDelay(cfg, 1) // 75 ms ± 20 %
		if d < 60*time.Millisecond || d > 90*time.Millisecond {
			t.Fatalf("delay %v outside 60..90ms", d)
		}
	}
}

func TestMaxRetriesCountsAttempts(t *testing.T) {
	cfg := RetryConfig{MaxRetries: 5, InitialBackoff: 0, MaxBackoff: 0, Multiplier: 1}
	calls, backoffs, exhausted := 0, 0, 0
	out := Retry(context.Background(), cfg, func(a uint32) int { calls++; return 503 },
		func(s int) bool { return Retryable(s) },
		func(time.Duration, uint32) { backoffs++ }, func() { exhausted++ })
	if out != 503 || calls != 5 || backoffs != 4 || exhausted != 1 {
		t.Fatalf("out %d calls %d backoffs %d exhausted %d", out, calls, backoffs, exhausted)
	}
	calls = 0
	Retry(context.Background(), RetryConfig{MaxRetries: 1}, func(uint32) int { calls++; return 500 }, func(s int) bool { return Retryable(s) }, nil, nil)
	if calls != 1 {
		t.Fatalf("disable-retries calls %d", calls)
	}
	calls = 0
	Retry(context.Background(), cfg, func(uint32) int { calls++; return 404 }, func(s int) bool { return Retryable(s) }, nil, nil)
	if calls != 1 {
		t.Fatalf("404 retried: %d", calls)
	}
}

func TestRetryableStatuses(t *testing.T) {
	for s, want := range map[int]bool{408: true, 429: true, 500: true, 502: true, 503: true, 504: true, 400: false, 404: false, 501: false, 200: false} {
		if Retryable(s) != want {
			t.Errorf("%d: %v", s, !want)
		}
	}
}
