package report

import (
	"fmt"
	"strings"
)

// Entry names of the extended and resilience claims.
const (
	EntryDisruption = "disruption"  // Disruption
	EntryRouterPods = "router-pods" // RouterPods
)

// Disruption is what traffic saw over a fault or a live edit: requests
// sent, those that failed against the stated bound, and how long the
// deployment took to be whole again against the interval allowed.
type Disruption struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	// Action is what was done, e.g. "killed engine Pod md-server-x".
	Action   string `json:"action"`
	Requests int    `json:"requests"`
	Failed   int    `json:"failed"`
	// FailedBound is the bound's value for this run and Bound its terms.
	FailedBound int    `json:"failedBound"`
	Bound       string `json:"bound"`
	// RecoverySeconds is the measured time to whole again (0 when not
	// measured), RecoveryBoundSeconds the interval allowed.
	RecoverySeconds      float64 `json:"recoverySeconds"`
	RecoveryBoundSeconds float64 `json:"recoveryBoundSeconds"`
	// Errors are the first failures, one line each.
	Errors []string `json:"errors,omitempty"`
}

// EntryName implements Entry.
func (Disruption) EntryName() string { return EntryDisruption }

// Describe implements Describer.
func (d Disruption) Describe() string { return "disruption " + d.String() }

func (d Disruption) String() string {
	s := fmt.Sprintf("%s: %d of %d requests failed (bound %d = %s)", d.Action, d.Failed, d.Requests, d.FailedBound, d.Bound)
	if d.RecoveryBoundSeconds > 0 {
		s += fmt.Sprintf("; whole again after %.2fs (bound %.0fs)", d.RecoverySeconds, d.RecoveryBoundSeconds)
	}
	if len(d.Errors) > 0 {
		s += "; first: " + strings.Join(d.Errors, "; ")
	}
	return s
}

// RouterPods is how one batch of requests spread over the router Pods (by
// each Pod's own request counter) and over the engine replicas.
type RouterPods struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	Title string `json:"title"`
	// Pods are the requests each router Pod counted.
	Pods []ReplicaCount `json:"pods"`
	// Replicas are the requests each engine replica counted.
	Replicas []ReplicaCount `json:"replicas"`
}

// EntryName implements Entry.
func (RouterPods) EntryName() string { return EntryRouterPods }

// Describe implements Describer.
func (r RouterPods) Describe() string { return "router Pods " + r.String() }

func (r RouterPods) String() string {
	return fmt.Sprintf("%s: router Pods %s; engine replicas %s", r.Title, countList(r.Pods), countList(r.Replicas))
}

func countList(cs []ReplicaCount) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s=%s", c.Replica, formatNumber(c.Count))
	}
	return strings.Join(parts, ", ")
}
