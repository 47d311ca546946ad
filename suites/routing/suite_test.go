package routing

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The whole run: the setup, every registered claim for every documented
// pair, and the qualification report.
var _ = Registry.Suite()

func TestRouting(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Routing conformance")
}
