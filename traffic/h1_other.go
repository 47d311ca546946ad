//go:build !linux

package traffic

import "net"

// h1Supported: elsewhere runs use net/http's Transport, which notices closed
// idle connections with its per-connection reader.
const h1Supported = false

type connProbe struct{}

func newConnProbe(net.Conn) *connProbe { return nil }

func (*connProbe) idleConnAlive() bool { return false }
