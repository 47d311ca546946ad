package sched

import (
	"context"
	"sync"
)

// Fan runs run(ctx, k) for k = 0..n-1 side by side, as an engine runs the
// sequences of one request with n > 1. When gate is not nil, sequence k+1
// starts only once gate(k) is closed (or ctx ends): vLLM adds its children
// one after another. The first sequence to fail cancels the others' ctx;
// Fan returns the first error in index order once all have returned.
func Fan(ctx context.Context, n int, gate func(k int) <-chan struct{}, run func(ctx context.Context, k int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[k] = run(ctx, k); errs[k] != nil {
				cancel()
			}
		}()
		if gate != nil {
			select {
			case <-gate(k):
			case <-ctx.Done():
			}
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
