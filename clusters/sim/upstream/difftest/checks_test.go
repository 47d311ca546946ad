package difftest_test

import (
	"math"
	"strings"
	"testing"

	dt "github.com/gpustack/routing-conformance/clusters/sim/upstream/difftest"
)

// alpha is the chance that a check of a random policy fails although the
// router draws as it should (each tail).
const alpha = 1e-6

// binomialBounds is the smallest [lo, hi] that holds n draws of chance p
// but for at most alpha on each side.
func binomialBounds(n int, p float64) (lo, hi int) {
	pmf := func(k int) float64 {
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
		return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
	}
	var tail float64
	for lo = 0; lo <= n; lo++ {
		if tail+pmf(lo) > alpha {
			break
		}
		tail += pmf(lo)
	}
	tail = 0
	for hi = n; hi >= 0; hi-- {
		if tail+pmf(hi) > alpha {
			break
		}
		tail += pmf(hi)
	}
	return lo, hi
}

func TestBinomialBounds(t *testing.T) {
	lo, hi := binomialBounds(60, 0.5)
	if lo < 10 || lo > 16 || hi != 60-lo {
		t.Fatalf("60 fair draws: [%d, %d]", lo, hi)
	}
}

// eachRouter runs check on both routers' results.
func eachRouter(t testing.TB, o *dt.Outcome, check func(impl string, orders map[string]dt.Order, rs []dt.Result)) {
	check(dt.Emulated, o.EmuOrder, o.Emulated)
	check(dt.Upstream, o.UpOrder, o.Upstream)
}

// uniform: n requests over two workers per pool split as fair coin flips
// would, in every pool.
func uniform(n int) func(t testing.TB, o *dt.Outcome) {
	return func(t testing.TB, o *dt.Outcome) {
		lo, hi := binomialBounds(n, 0.5)
		eachRouter(t, o, func(impl string, orders map[string]dt.Order, rs []dt.Result) {
			counts := o.D.Counts(orders, rs)
			for _, pool := range o.D.Pools() {
				for _, pos := range []string{pool[:1] + "0", pool[:1] + "1"} {
					if c := counts[pool][pos]; c < lo || c > hi {
						t.Errorf("%s router: %s got %d of %d random picks, outside [%d, %d] (chance %g): %v", impl, pos, c, n, lo, hi, alpha, counts[pool])
					}
				}
			}
		})
	}
}

// notAlternating: in every pool of two workers, consecutive requests reach
// the same worker about half the time (a random pick), never none of the
// time (a round robin's strict alternation).
func notAlternating(t testing.TB, o *dt.Outcome) {
	eachRouter(t, o, func(impl string, _ map[string]dt.Order, rs []dt.Result) {
		lo, _ := binomialBounds(len(rs)-1, 0.5)
		for _, pool := range o.D.Pools() {
			repeats := 0
			for i := 1; i < len(rs); i++ {
				if strings.Join(rs[i].Picks[pool], "+") == strings.Join(rs[i-1].Picks[pool], "+") {
					repeats++
				}
			}
			if repeats < lo {
				t.Errorf("%s router: %s pool: %d of %d consecutive requests reached the same worker, fewer than %d: it alternates as a round robin would", impl, pool, repeats, len(rs)-1, lo)
			}
		}
	})
}

// heldNotAvoided: the first request is held on a worker; a router whose
// pick weighed its own in-flight count would send none of the next n
// there, one that does not (both routers outside cache_aware) about half.
func heldNotAvoided(n int) func(t testing.TB, o *dt.Outcome) {
	return func(t testing.TB, o *dt.Outcome) {
		lo, _ := binomialBounds(n, 0.5)
		eachRouter(t, o, func(impl string, _ map[string]dt.Order, rs []dt.Result) {
			held := rs[0].Picks["regular"]
			if len(held) != 1 {
				t.Errorf("%s router: the held request reached %v", impl, held)
				return
			}
			same := 0
			for _, r := range rs[1:] {
				if p := r.Picks["regular"]; len(p) == 1 && p[0] == held[0] {
					same++
				}
			}
			if same < lo {
				t.Errorf("%s router: %d of %d requests went to %s, which held a request: fewer than %d, as if its load counted", impl, same, n, held[0], lo)
			}
		})
	}
}

// sticky: every request with one routing key reaches one worker.
func sticky(t testing.TB, o *dt.Outcome) {
	eachRouter(t, o, func(impl string, _ map[string]dt.Order, rs []dt.Result) {
		byKey := map[string]string{}
		for i, r := range rs {
			key, ok := strings.CutPrefix(r.Note, "routing key ")
			if !ok {
				continue
			}
			p := strings.Join(r.Picks["regular"], "+")
			if first, seen := byKey[key]; seen && first != p {
				t.Errorf("%s router: request #%d with routing key %s reached %s, the key's first reached %s", impl, i+1, key, p, first)
			}
			byKey[key] = p
		}
	})
}
