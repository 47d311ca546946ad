package kube

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: port-forward proxies, tunnels
// and pollers all end with the contexts and Close calls that own them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
