package proc

import (
	"net/http"
	"strings"
	"sync"
)

// HTTPFault is what a chaos tool does to one Pod's HTTP serving on one port,
// as Chaos Mesh's HTTPChaos does with a proxy in the Pod's network: the
// request never reaches the program, whose counters therefore do not move.
type HTTPFault struct {
	// Port is the container port whose HTTP is affected.
	Port int
	// PathPrefix limits the fault to request paths with this prefix ("" is
	// every path), e.g. /v1/ for inference only, /metrics for the scrape.
	PathPrefix string
	// Status, when not 0, answers every matching request with this status
	// and Body (an abort with a replaced code).
	Status int
	Body   string
	// Hang accepts the request and never answers it, until the client gives
	// up or the fault is lifted (then the program answers it late).
	Hang bool
}

func (f HTTPFault) matches(port int, path string) bool {
	return f.Port == port && strings.HasPrefix(path, f.PathPrefix)
}

// Faults is the switchboard of one Pod's HTTP faults. The kubelet owns one
// per Pod; a program's server reads it through Handler. The zero value has
// no fault, and a nil *Faults is valid (no fault ever).
type Faults struct {
	mu    sync.Mutex
	next  int
	rules map[int]faultRule
}

type faultRule struct {
	HTTPFault
	lifted chan struct{}
}

// Inject arms f until the returned lift is called (lifting twice is a no-op).
func (fs *Faults) Inject(f HTTPFault) (lift func()) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.rules == nil {
		fs.rules = map[int]faultRule{}
	}
	id := fs.next
	fs.next++
	r := faultRule{HTTPFault: f, lifted: make(chan struct{})}
	fs.rules[id] = r
	var once sync.Once
	return func() {
		once.Do(func() {
			fs.mu.Lock()
			delete(fs.rules, id)
			fs.mu.Unlock()
			close(r.lifted)
		})
	}
}

// match returns the first armed fault for port and path (oldest first).
func (fs *Faults) match(port int, path string) (faultRule, bool) {
	if fs == nil {
		return faultRule{}, false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	best, found := -1, faultRule{}
	for id, r := range fs.rules {
		if r.matches(port, path) && (best < 0 || id < best) {
			best, found = id, r
		}
	}
	return found, best >= 0
}

// Handler puts the Pod's faults for port in front of h. Programs wrap the
// handler of every HTTP port they serve with it.
func (fs *Faults) Handler(port int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := fs.match(port, r.URL.Path)
		switch {
		case !ok:
		case f.Hang:
			select {
			case <-r.Context().Done():
				return
			case <-f.lifted:
			}
		case f.Status != 0:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(f.Status)
			_, _ = w.Write([]byte(f.Body))
			return
		}
		h.ServeHTTP(w, r)
	})
}
