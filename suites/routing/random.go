package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// ClaimRandom: --policy random picks a worker uniformly at random for
// every request, independently of load and text, so each replica's share
// of serial chats is binomial: the spec asserts the banner, that each
// replica's count lies in the 99.9% acceptance interval its row derives
// (PolicySpec with a binomial split), and that the router's pick counter
// rose by every request.
const ClaimRandom = "random"

var _ = framework.Add(Registry, policyClaim(ClaimRandom, "Random policy",
	"`--policy random`: banner `policy: Random`; 120 chats, each replica within the 99.9% binomial interval [42, 78]; "+
		"the router's pick counter +120"))
