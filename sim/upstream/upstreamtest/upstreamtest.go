// Package upstreamtest is what the tests that run the built routers
// share: the install, or a skip without one (a failure under CI=true, where
// a tier that cannot run fails), and a sim kubelet stopped when the test
// ends.
package upstreamtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// Install is the project's router build (make routers).
func Install(t testing.TB) *upstream.Install {
	t.Helper()
	in, err := upstream.Load("")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err)
	}
	return in
}

// stopTimeout bounds the kubelet's stop at the end of a test.
const stopTimeout = 60 * time.Second

// Kubelet is a fresh kubelet, stopped (every Pod ended, checked) when the
// test ends.
func Kubelet(t testing.TB) *kubelet.Kubelet {
	t.Helper()
	k := kubelet.New(kubelet.Options{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := k.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return k
}
