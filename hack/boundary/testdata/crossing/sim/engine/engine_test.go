// A test file counts too: sim/ importing report/ only in a test.
package engine

import (
	"testing"

	"github.com/gpustack/routing-conformance/report"
)

func TestServe(t *testing.T) { _ = report.File }
