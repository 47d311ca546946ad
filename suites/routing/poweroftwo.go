package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// ClaimPowerOfTwo: --policy power_of_two draws two workers and keeps the
// less loaded one. vllm-router keeps no load outside cache_aware, so every
// draw is a tie and the pick is uniform: its split is asserted binomial;
// sglang-gateway compares polled token loads, whose timing decides the
// split, so it is recorded. Both routers count every pick (PolicySpec).
const ClaimPowerOfTwo = "poweroftwo"

var _ = framework.Add(Registry, policyClaim(ClaimPowerOfTwo, "Power of two",
	"`--policy power_of_two`: banner; vllm-router uniform in practice (no load outside cache_aware), [42, 78] of 120; "+
		"sglang-gateway recorded (polled token loads); pick counter +120"))
