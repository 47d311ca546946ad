package promtext

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var scrapeBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// Serve answers a /metrics scrape: one Gather of g written in st's layout,
// with prometheus_client's content type. A Gather error is a 500.
func Serve(w http.ResponseWriter, g prometheus.Gatherer, st Style) {
	fams, err := g.Gather()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	bp := scrapeBufPool.Get().(*[]byte)
	b := Append((*bp)[:0], fams, st)
	w.Header().Set("Content-Type", ContentType)
	_, _ = w.Write(b)
	*bp = b
	scrapeBufPool.Put(bp)
}
