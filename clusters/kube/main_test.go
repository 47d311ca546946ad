package kube

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: port-forward proxies, tunnels
// and pollers all end with the contexts and Close calls that own them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, spdystreamShutdown...)
}

// spdystreamShutdown ignores the one goroutine pair that is not ours to end.
// When the API server connection drops while client-go's port-forward is
// opening a stream, spdystream registers the stream, fails to send it, and
// never removes it; the Close that follows then starts a shutdown that waits
// for that stream forever (moby/spdystream@v0.5.1 connection.go:683-709
// and 712-745; k8s.io/streaming@v0.37.2 pkg/httpstream/spdy/connection.go:107
// resets only the streams it was handed). These goroutines exist only after
// Close was called, so ignoring them cannot hide a Close we forgot.
var spdystreamShutdown = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown"),
	goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown.func1"),
}
