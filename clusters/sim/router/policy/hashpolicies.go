package policy

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

type ringEntry struct {
	hash uint64
	url  string
}

// consistentHash is VR consistent_hash.rs: a ring of VirtualNodes entries per
// worker ("<url>:<i>" under fbi_hash), rebuilt when the candidate URL list
// changes; a key goes to the first entry at or after its hash, wrapping.
type consistentHash struct {
	base
	mu      sync.Mutex
	members []string
	ring    []ringEntry
}

// ringFor rebuilds the ring if the candidate URL list (healthy or not, in
// order) differs from the last one.
func (p *consistentHash) ringFor(ws []Worker) []ringEntry {
	urls := make([]string, len(ws))
	for i, w := range ws {
		if w != nil {
			urls[i] = w.URL()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members != nil && slices.Equal(p.members, urls) {
		return p.ring
	}
	// BTreeMap semantics: an equal hash from a later entry overwrites.
	byHash := make(map[uint64]string, len(urls)*p.cfg.VirtualNodes)
	for _, u := range urls {
		for i := 0; i < p.cfg.VirtualNodes; i++ {
			byHash[fbiHash(u+":"+strconv.Itoa(i))] = u
		}
	}
	ring := make([]ringEntry, 0, len(byHash))
	for h, u := range byHash {
		ring = append(ring, ringEntry{h, u})
	}
	sort.Slice(ring, func(i, j int) bool { return ring[i].hash < ring[j].hash })
	p.members, p.ring = urls, ring
	p.info("src/policies/consistent_hash.rs", 282, fmt.Sprintf(
		"Updated consistent hash ring with %d workers and %d virtual nodes", len(urls), len(urls)*p.cfg.VirtualNodes))
	return ring
}

func lookupRing(ring []ringEntry, key string) (string, bool) {
	if len(ring) == 0 {
		return "", false
	}
	h := fbiHash(key)
	i := sort.Search(len(ring), func(i int) bool { return ring[i].hash >= h })
	if i == len(ring) {
		i = 0
	}
	return ring[i].url, true
}

// dpInfo is extract_dp_info: "<base>@<rank>" for DP-aware workers.
func dpInfo(url string) (string, bool) {
	parts := strings.Split(url, "@")
	if len(parts) == 2 {
		rank := strings.TrimPrefix(parts[1], "+") // Rust's usize parse takes a leading '+'
		if _, err := strconv.ParseUint(rank, 10, 64); err == nil && rank != "" {
			return parts[0], true
		}
	}
	return url, false
}

func (p *consistentHash) Select(ws []Worker, req Request) Decision {
	const file = "src/policies/consistent_hash.rs"
	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		return None()
	}
	ring := p.ringFor(ws)
	key := extractHashKey(req.Text, req.Headers)
	p.info(file, 359, "CONSISTENT_HASH_DEBUG: Extracted hash key: "+key)
	target, ok := lookupRing(ring, key)
	if !ok {
		p.info(file, 374, "CONSISTENT_HASH_DEBUG: Hash ring empty, falling back to worker: "+ws[healthy[0]].URL())
		return picked(healthy[0])
	}
	p.info(file, 364, fmt.Sprintf("CONSISTENT_HASH_DEBUG: Hash key '%s' mapped to worker: %s", key, target))

	base, dp := dpInfo(target)
	idx := -1
	for i, w := range ws {
		if w == nil {
			continue
		}
		if dp && w.URL() == target {
			idx = i
			break
		}
		if wb, _ := dpInfo(w.URL()); !dp && wb == base {
			idx = i
			break
		}
	}
	if idx >= 0 && ws[idx].Healthy() {
		p.info(file, 413, fmt.Sprintf("Consistent hash routing: key='%s' -> worker='%s' (index=%d)", key, ws[idx].URL(), idx))
		return picked(idx)
	}
	// Target unhealthy or gone: the first healthy worker.
	return picked(healthy[0])
}

// rendezvousHash is VR rendezvous_hash.rs: the healthy worker with the
// highest fbi_hash("<key>:<url>"), the last one on ties (max_by_key).
type rendezvousHash struct{ base }

func (p *rendezvousHash) Select(ws []Worker, req Request) Decision {
	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		return None()
	}
	key := extractHashKey(req.Text, req.Headers)
	best, bestScore := -1, uint64(0)
	for _, i := range healthy {
		if s := fbiHash(key + ":" + ws[i].URL()); best < 0 || s >= bestScore {
			best, bestScore = i, s
		}
	}
	p.info("src/policies/rendezvous_hash.rs", 68, fmt.Sprintf(
		"Rendezvous hash routing: key='%s' -> worker='%s' (index=%d)", key, ws[best].URL(), best))
	return picked(best)
}
