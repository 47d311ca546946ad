package routerbase

import (
	"context"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
)

// Discovery is how a router runs Kubernetes service discovery: both
// server.rs start it alike and both service_discovery.rs print the same
// lines, each at its own sites.
type Discovery struct {
	Log *tracing.Logger
	// Failed and Started are server.rs's lines; Start, StartPD, Adding and
	// Removing are service_discovery.rs's (VR logs both starts at one site).
	Failed, Started, Start, StartPD, Adding, Removing tracing.Site
	// Hooks are the router's; its Adding and Removing run after the
	// "Adding pod" and "Removing pod" lines.
	Hooks discovery.Hooks
}

// StartDiscovery is server.rs's start of service discovery over pods with
// cfg, run in g; without a Kubernetes API it logs the failure and returns.
func StartDiscovery(g *Group, pods proc.PodWatcher, cfg discovery.Config, d Discovery) {
	if pods == nil {
		d.Log.Error(d.Failed, "Failed to start service discovery: no Kubernetes API available")
		return
	}
	if cfg.PD {
		d.Log.Info(d.StartPD, "Starting K8s service discovery | PD mode | prefill: '%s' | decode: '%s'",
			discovery.JoinSelector(cfg.PrefillSelector), discovery.JoinSelector(cfg.DecodeSelector))
	} else {
		d.Log.Info(d.Start, "Starting K8s service discovery | selector: '%s'", discovery.JoinSelector(cfg.Selector))
	}
	hooks := discovery.Hooks{
		Adding: func(t discovery.Target) {
			d.Log.Info(d.Adding, "Adding pod: %s | type: %s | url: %s", t.Pod.Name, t.PodTypeDebug(), t.URL)
			if d.Hooks.Adding != nil {
				d.Hooks.Adding(t)
			}
		},
		Register: d.Hooks.Register,
		Removing: func(t discovery.Target) {
			d.Log.Info(d.Removing, "Removing pod: %s | type: %s | url: %s", t.Pod.Name, t.PodTypeDebug(), t.URL)
			if d.Hooks.Removing != nil {
				d.Hooks.Removing(t)
			}
		},
	}
	g.Go(func(ctx context.Context) { discovery.Run(ctx, pods, cfg, hooks) })
	d.Log.Info(d.Started, "Service discovery started")
}
