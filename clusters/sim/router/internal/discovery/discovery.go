// Package discovery is the routers' Kubernetes service discovery
// (vllm-router and sgl-model-gateway src/service_discovery.rs) over the sim's
// Pod watcher: Pods in the namespace whose labels equal every selector pair,
// eligible while Running && Ready && !Deleting, worker URL
// http://<podIP>:<--service-discovery-port>. Admission itself (the health
// gate, metadata, registry) is the router's: discovery only tells it which
// Pods to add and remove.
package discovery

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
)

// Config is the routers' ServiceDiscoveryConfig.
type Config struct {
	// Namespace is --service-discovery-namespace ("" = all namespaces).
	Namespace string
	// Selector is --selector (regular mode).
	Selector map[string]string
	// PD selects Pods by PrefillSelector/DecodeSelector instead.
	PD              bool
	PrefillSelector map[string]string
	DecodeSelector  map[string]string
	// Port is --service-discovery-port.
	Port int
	// BootstrapAnnotation is vllm.ai/bootstrap-port or
	// sglang.ai/bootstrap-port.
	BootstrapAnnotation string
}

// ParseSelector turns "k=v" items into a map, split on the first '='; items
// without '=' are ignored, later keys win (the routers' parse_selector).
func ParseSelector(items []string) map[string]string {
	m := map[string]string{}
	for _, it := range items {
		for i := 0; i < len(it); i++ {
			if it[i] == '=' {
				m[it[:i]] = it[i+1:]
				break
			}
		}
	}
	return m
}

// JoinSelector renders a selector as k=v joined by "," for the routers'
// "Starting K8s service discovery" lines. The source iterates a HashMap
// (random order); this port sorts.
func JoinSelector(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// Target is an eligible Pod turned into a worker candidate.
type Target struct {
	Pod  proc.Pod
	Role workers.Role
	URL  string
	Port int
	// BootstrapPort is read from the annotation for prefill Pods.
	BootstrapPort *int
}

// PodTypeDebug is the Rust Debug form of the Pod's PodType option, as the
// "Adding pod" line prints it: Some(Regular), Some(Prefill), Some(Decode).
func (t Target) PodTypeDebug() string {
	switch t.Role {
	case workers.Prefill:
		return "Some(Prefill)"
	case workers.Decode:
		return "Some(Decode)"
	default:
		return "Some(Regular)"
	}
}

// Hooks receive discovery events.
type Hooks struct {
	// Adding is called when an eligible Pod is first seen.
	Adding func(t Target)
	// Register runs in its own goroutine per tracked Pod and admits it (the
	// health gate); it must return promptly once ctx is done.
	Register func(ctx context.Context, t Target)
	// Removing is called when a tracked Pod is deleted, becomes unready or
	// disappears, after its Register has returned.
	Removing func(t Target)
}

type tracked struct {
	t      Target
	cancel context.CancelFunc
	done   chan struct{}
}

// Run watches Pods until ctx is done, then stops every Register and returns.
func Run(ctx context.Context, pods proc.PodWatcher, cfg Config, h Hooks) {
	ch, stop := pods.Watch()
	defer stop()
	live := map[string]*tracked{}
	defer func() {
		for _, tr := range live {
			tr.cancel()
		}
		for _, tr := range live {
			<-tr.done
		}
	}()
	for {
		resync(ctx, pods, cfg, h, live)
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				<-ctx.Done()
				return
			}
		}
	}
}

func resync(ctx context.Context, pods proc.PodWatcher, cfg Config, h Hooks, live map[string]*tracked) {
	want := map[string]Target{}
	var order []string
	add := func(list []proc.Pod, role workers.Role) {
		for _, p := range list {
			if p.Phase != "Running" || !p.Ready || p.Deleting || p.IP == "" {
				continue
			}
			key := p.UID
			if key == "" {
				key = p.Namespace + "/" + p.Name
			}
			if _, dup := want[key]; dup {
				continue
			}
			t := Target{Pod: p, Role: role, Port: cfg.Port, URL: fmt.Sprintf("http://%s:%d", hostForURL(p.IP), cfg.Port)}
			if role == workers.Prefill && cfg.BootstrapAnnotation != "" {
				if v, ok := p.Annotations[cfg.BootstrapAnnotation]; ok {
					if n, err := strconv.ParseUint(v, 10, 16); err == nil {
						bp := int(n)
						t.BootstrapPort = &bp
					}
				}
			}
			want[key] = t
			order = append(order, key)
		}
	}
	if cfg.PD {
		if len(cfg.PrefillSelector) > 0 {
			add(pods.List(cfg.Namespace, cfg.PrefillSelector), workers.Prefill)
		}
		if len(cfg.DecodeSelector) > 0 {
			add(pods.List(cfg.Namespace, cfg.DecodeSelector), workers.Decode)
		}
	} else if len(cfg.Selector) > 0 {
		add(pods.List(cfg.Namespace, cfg.Selector), workers.Regular)
	}

	// Removals first (deterministic order), so a Pod replaced at the same
	// address is dropped before its successor is added.
	var gone []string
	for key, tr := range live {
		if t, ok := want[key]; !ok || t.URL != tr.t.URL || t.Role != tr.t.Role {
			gone = append(gone, key)
		}
	}
	sort.Strings(gone)
	for _, key := range gone {
		tr := live[key]
		delete(live, key)
		tr.cancel()
		<-tr.done
		if h.Removing != nil {
			h.Removing(tr.t)
		}
	}
	for _, key := range order {
		if _, ok := live[key]; ok {
			continue
		}
		t := want[key]
		if h.Adding != nil {
			h.Adding(t)
		}
		rctx, cancel := context.WithCancel(ctx)
		tr := &tracked{t: t, cancel: cancel, done: make(chan struct{})}
		live[key] = tr
		go func() {
			defer close(tr.done)
			if h.Register != nil {
				h.Register(rctx, t)
			}
		}()
	}
}

// hostForURL brackets IPv6 addresses.
func hostForURL(ip string) string {
	for i := 0; i < len(ip); i++ {
		if ip[i] == ':' {
			return "[" + ip + "]"
		}
	}
	return ip
}
