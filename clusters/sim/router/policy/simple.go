package policy

import (
	"fmt"
	"sync/atomic"
)

// roundRobin is round_robin.rs (both routers): one counter per policy
// instance, shared by every endpoint and every retry.
type roundRobin struct {
	base
	counter atomic.Uint64
}

func (p *roundRobin) Select(ws []Worker, _ Request) Decision {
	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		return None()
	}
	n := p.counter.Add(1) - 1
	return picked(healthy[n%uint64(len(healthy))])
}

// random is random.rs: uniform over healthy workers.
type random struct{ base }

func (p *random) Select(ws []Worker, _ Request) Decision {
	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		return None()
	}
	return picked(healthy[p.rng.intN(len(healthy))])
}

// powerOfTwo is power_of_two.rs. Both routers draw two distinct healthy
// workers and keep the lower load, the first drawn on ties.
//   - VR draws the second by rejection, returns a lone healthy worker without
//     recording metrics, and reads each worker's cached load if present, else
//     its local in-flight count (0 outside cache_aware).
//   - SG draws the second by offset, and compares cached (polled) loads only
//     when both workers have one, else both local counts.
type powerOfTwo struct {
	base
	source LoadSource
	loads  atomic.Pointer[map[string]int64]
}

func (p *powerOfTwo) UpdateLoads(loads map[string]int64) {
	cp := make(map[string]int64, len(loads))
	for k, v := range loads {
		cp[k] = v
	}
	p.loads.Store(&cp)
}

func (p *powerOfTwo) cached(url string) (int64, bool) {
	if p.source != nil {
		return p.source.PolledLoad(url)
	}
	if m := p.loads.Load(); m != nil {
		v, ok := (*m)[url]
		return v, ok
	}
	return 0, false
}

func (p *powerOfTwo) Select(ws []Worker, _ Request) Decision {
	healthy := healthyIndices(ws)
	switch len(healthy) {
	case 0:
		return None()
	case 1:
		d := picked(healthy[0])
		d.Record = p.flavor != FlavorVR // VR returns before recording
		return d
	}
	n := len(healthy)
	i1 := p.rng.intN(n)
	var i2 int
	if p.flavor == FlavorVR {
		i2 = p.rng.intN(n)
		for i2 == i1 {
			i2 = p.rng.intN(n)
		}
	} else {
		i2 = (i1 + 1 + p.rng.intN(n-1)) % n
	}
	w1, w2 := healthy[i1], healthy[i2]
	var l1, l2 int64
	if p.flavor == FlavorVR {
		l1, l2 = p.vrLoad(ws[w1]), p.vrLoad(ws[w2])
	} else {
		c1, ok1 := p.cached(ws[w1].URL())
		c2, ok2 := p.cached(ws[w2].URL())
		if ok1 && ok2 {
			l1, l2 = c1, c2
		} else {
			l1, l2 = ws[w1].Load(), ws[w2].Load()
		}
	}
	sel := w2
	if l1 <= l2 {
		sel = w1
	}
	if p.flavor == FlavorVR {
		p.info("src/policies/power_of_two.rs", 82, fmt.Sprintf("Power-of-two selection: %s=%d vs %s=%d -> selected %s",
			ws[w1].URL(), l1, ws[w2].URL(), l2, ws[sel].URL()))
	}
	return picked(sel)
}

func (p *powerOfTwo) vrLoad(w Worker) int64 {
	if v, ok := p.cached(w.URL()); ok {
		return v
	}
	return w.Load()
}
