package assertions_test

import (
	"testing"

	. "github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/fixtures"
)

var (
	replicas = []string{"md-engine-0", "md-engine-1"}
	even     = split.New(split.VLLMRequestCounter, replicas, map[string]int{"md-engine-0": 60, "md-engine-1": 60})
	affine   = split.New(split.SGLangRequestCounter, replicas, map[string]int{"md-engine-1": 354})
	skewed   = split.New(split.VLLMRequestCounter, replicas, map[string]int{"md-engine-0": 70, "md-engine-1": 50})
	nothing  = split.New(split.VLLMRequestCounter, replicas, nil)
)

func TestBeAllOnOneReplica(t *testing.T) {
	mustPass(t, failure(affine, BeAllOnOneReplica(), false))
	mustPass(t, failure(&affine, BeAllOnOneReplica(), false))
	mustContain(t, failure(even, BeAllOnOneReplica(), false),
		"to be all on one replica, but 2 replicas served requests (md-engine-0, md-engine-1)",
		"vllm:request_success_total per replica: 60/60 (total 120)", "md-engine-0      60   50.0%")
	mustContain(t, failure(nothing, BeAllOnOneReplica(), false), "no replica counted any request", "0/0")
	mustContain(t, failure(affine, BeAllOnOneReplica(), true), "not to be all on one replica", "0/354")
}

func TestHaveTotal(t *testing.T) {
	mustPass(t, failure(even, HaveTotal(120), false))
	mustContain(t, failure(skewed, HaveTotal(119), false), "to sum to 119", "it sums to 120")
}

func TestHaveCounts(t *testing.T) {
	mustPass(t, failure(even, HaveCounts(60, 60), false))
	mustContain(t, failure(skewed, HaveCounts(60, 60), false), "to be exactly 60/60, but it is 70/50", "md-engine-1      50")
	mustContain(t, failure(even, HaveCounts(40, 40, 40), false), "it has 2 replicas, not 3")
}

func TestSplitMatchersRefuseOtherTypes(t *testing.T) {
	mustContain(t, failure(map[string]int{"a": 1}, HaveTotal(1), false), "expects a split.Split")
	mustContain(t, failure(split.Split{}, HaveTotal(0), false), "no replicas")
}

func TestBeMadeOfWholeGroups(t *testing.T) {
	mustPass(t, failure(affine, BeMadeOfWholeGroups(154, 200), false)) // both groups on one replica
	mustPass(t, failure(skewed, BeMadeOfWholeGroups(50, 70), false))   // a group each
	mustContain(t, failure(even, BeMadeOfWholeGroups(54, 66), false),
		"to be made of the whole groups 54/66, but no assignment of the groups 54/66 to replicas gives 60/60: a group was split over replicas")
	mustContain(t, failure(even, BeMadeOfWholeGroups(), false), "no assignment")
}

func TestUseEveryReplica(t *testing.T) {
	mustPass(t, failure(skewed, UseEveryReplica(), false))
	mustContain(t, failure(affine, UseEveryReplica(), false), "to use every replica, but md-engine-0 served nothing", "0/354")
}

func TestHaveEachCountWithin(t *testing.T) {
	mustPass(t, failure(skewed, HaveEachCountWithin(42, 78, "Bin(120, 1/2)"), false))
	mustContain(t, failure(skewed, HaveEachCountWithin(55, 65, "Bin(120, 1/2), both tails under 0.05"), false),
		"to have every count within [55, 65] (Bin(120, 1/2), both tails under 0.05), but md-engine-0 has 70, md-engine-1 has 50",
		"md-engine-0", "70")
}

func TestBeAllOn(t *testing.T) {
	mustPass(t, failure(affine, BeAllOn("md-engine-1"), false))
	mustContain(t, failure(affine, BeAllOn("md-engine-0"), false), "to be all on md-engine-0, but it was served by md-engine-1")
	mustContain(t, failure(even, BeAllOn("md-engine-0"), false), "served by md-engine-0, md-engine-1")
	mustContain(t, failure(nothing, BeAllOn("md-engine-0"), false), "no replica counted any request")
	mustContain(t, failure(affine, BeAllOn("other"), false), "other is not one of its replicas")
}

func TestHaveCountsByReplica(t *testing.T) {
	mustPass(t, failure(skewed, HaveCountsByReplica(map[string]int{"md-engine-0": 70, "md-engine-1": 50}), false))
	mustPass(t, failure(affine, HaveCountsByReplica(map[string]int{"md-engine-1": 354}), false))
	mustContain(t, failure(skewed, HaveCountsByReplica(map[string]int{"md-engine-1": 70, "md-engine-0": 50}), false),
		"to be exactly md-engine-0=50, md-engine-1=70, but md-engine-0 has 70, md-engine-1 has 50")
}

func TestHaveShape(t *testing.T) {
	oneReplica := fixtures.Split{Shape: fixtures.ShapeOneReplica, Documented: "the affinity section"}
	mustPass(t, failure(affine, HaveShape(oneReplica, 354), false))
	mustContain(t, failure(affine, HaveShape(oneReplica, 355), false), "to sum to 355, but it sums to 354")
	mustContain(t, failure(even, HaveShape(oneReplica, 120), false), "documented: all on one replica (the affinity section)\nExpected the split to be all on one replica")

	evenShape := fixtures.Split{Shape: fixtures.ShapeEven, Documented: "round robin"}
	mustPass(t, failure(even, HaveShape(evenShape, 120), false))
	mustContain(t, failure(skewed, HaveShape(evenShape, 120), false), "documented: round robin", "to be exactly 60/60, but it is 70/50")
	mustContain(t, failure(split.New(split.VLLMRequestCounter, replicas, map[string]int{"md-engine-0": 61, "md-engine-1": 60}), HaveShape(evenShape, 121), false),
		"121 requests do not divide evenly over 2 replicas; set traffic.requests to a multiple")

	binomial := fixtures.Split{Shape: fixtures.ShapeBinomial, Confidence: 0.999}
	mustPass(t, failure(skewed, HaveShape(binomial, 120), false))
	mustContain(t, failure(affine, HaveShape(binomial, 354), false), "to have every count within", "Bin(354, 1/2)", "md-engine-0 has 0")

	spread := fixtures.Split{Shape: fixtures.ShapeSpread, Documented: "least load"}
	mustPass(t, failure(even, HaveShape(spread, 120), false))
	mustContain(t, failure(affine, HaveShape(spread, 354), false), "derived: least load", "md-engine-0 served nothing")

	recorded := fixtures.Split{Shape: fixtures.ShapeRecorded}
	mustPass(t, failure(affine, HaveShape(recorded, 354), false))
	mustContain(t, failure(affine, HaveShape(recorded, 1), false), "to sum to 1")
	mustContain(t, failure(affine, HaveShape(fixtures.Split{Shape: "zigzag"}, 354), false), `unknown split shape "zigzag"`)
	mustContain(t, failure(affine, HaveShape(recorded, 354), true), "not to have the shape recorded")
}
