package harness

import (
	"testing"

	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

func TestMain(m *testing.M) { netns.Main(m) }
