package clusters

import (
	"context"
	"errors"
)

// FaultInjector is implemented by a Deployment whose target can do to it
// what a user (or a chaos tool the user runs) could: the resilience claims
// ask for it and skip with the target's reason when it is missing or a
// method answers ErrFaultUnsupported.
type FaultInjector interface {
	// KillEnginePod kills a replica's Pod at once, as `kubectl delete pod
	// --grace-period=0 --force` or an OOM kill does: no drain, in-flight
	// exchanges cut. The operator then replaces it.
	KillEnginePod(ctx context.Context, r Replica) error
	// DeleteRouterPod deletes one router Pod as `kubectl delete pod` does
	// (graceful); its ReplicaSet replaces it.
	DeleteRouterPod(ctx context.Context, pod string) error
	// InjectHTTPFault makes one Pod's HTTP on f.Port answer as f says until
	// lift is called (lift is idempotent and must be called).
	InjectHTTPFault(ctx context.Context, pod string, f HTTPFault) (lift func(), err error)
}

// HTTPFault is an HTTP fault on one Pod's port, what Chaos Mesh's HTTPChaos
// does (abort with a status, or delay for ever).
type HTTPFault struct {
	// Port is the container port (an engine's serving port, a router's 8081
	// or 9090).
	Port int `json:"port"`
	// PathPrefix limits the fault to paths with this prefix ("" = all).
	PathPrefix string `json:"pathPrefix,omitempty"`
	// Status, when set, answers every matching request with it and Body.
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	// Hang accepts the request and never answers it.
	Hang bool `json:"hang,omitempty"`
}

// ErrFaultUnsupported is wrapped by a FaultInjector method the target
// cannot perform; the error says why (a skip reason).
var ErrFaultUnsupported = errors.New("fault not supported by this target")
