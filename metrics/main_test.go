package metrics_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Scrapes go over real loopback HTTP; no connection goroutine may outlive
// the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
