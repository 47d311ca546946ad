package routerbase

// The routers' RetryExecutor (core/retry.rs): the attempt loop with
// exponential backoff and jitter. --retry-max-retries counts attempts, not
// retries: with 5 the operation runs at most 5 times; --disable-retries makes
// it 1.

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// RetryConfig is --retry-* (f32 fields kept as float32 as in Rust).
type RetryConfig struct {
	MaxRetries     uint32
	InitialBackoff uint64 // ms
	MaxBackoff     uint64 // ms
	Multiplier     float32
	Jitter         float32
}

// Retryable is is_retryable_status: 408, 429, 500, 502, 503, 504.
func Retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

var (
	rngMu sync.Mutex
	rng   = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
)

// RetryDelay is BackoffCalculator::calculate_delay for attempt (0-based).
func RetryDelay(cfg RetryConfig, attempt uint32) time.Duration {
	pow := float32(math.Pow(float64(cfg.Multiplier), float64(attempt)))
	ms := uint64(float32(cfg.InitialBackoff) * pow)
	if ms > cfg.MaxBackoff {
		ms = cfg.MaxBackoff
	}
	j := cfg.Jitter
	if j < 0 {
		j = 0
	}
	if j > 1 {
		j = 1
	}
	if j > 0 {
		rngMu.Lock()
		scale := (rng.Float32()*2 - 1) * j
		rngMu.Unlock()
		jit := float32(math.Round(float64(float32(ms) * scale)))
		if jit < -float32(ms) {
			jit = -float32(ms)
		}
		adj := int64(ms) + int64(jit)
		if adj < 0 {
			adj = 0
		}
		return time.Duration(adj) * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}

// Retry runs op until it returns a non-retryable outcome or the attempts are
// used up. onBackoff gets the delay and the next attempt number before each
// sleep; onExhausted runs when the last attempt was still retryable. A done
// ctx cuts the sleep short and returns the last outcome.
func Retry[T any](ctx context.Context, cfg RetryConfig, op func(attempt uint32) T, retryable func(T) bool,
	onBackoff func(d time.Duration, next uint32), onExhausted func()) T {
	max := cfg.MaxRetries
	if max < 1 {
		max = 1
	}
	var attempt uint32
	for {
		out := op(attempt)
		if !retryable(out) {
			return out
		}
		if attempt+1 >= max {
			if onExhausted != nil {
				onExhausted()
			}
			return out
		}
		d := RetryDelay(cfg, attempt)
		next := attempt + 1
		if onBackoff != nil {
			onBackoff(d, next)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return out
		case <-t.C:
		}
		attempt = next
	}
}
