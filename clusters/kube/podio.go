package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/metrics"
)

// maxLogBytes bounds one container log read; a router that logs a line per
// request over a long run stays far below it.
const maxLogBytes = 64 << 20

// proxyGet reads path from port of a Pod through the API server's Pod proxy
// (pods/<name>:<port>/proxy/<path>), so no probe Pod or Pod-network route is
// needed from where the suite runs.
func (c *Cluster) proxyGet(ctx context.Context, ns, pod, scheme string, port int, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.iv.Request)
	defer cancel()
	if scheme == "http" {
		scheme = "" // the proxy's default; an explicit "http:" prefix is also accepted
	}
	body, err := c.podIO.CoreV1().Pods(ns).ProxyGet(scheme, pod, strconv.Itoa(port), path, nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s from Pod %s/%s:%d through the API server proxy: %s", path, ns, pod, port, firstLine(err.Error()))
	}
	return body, nil
}

// scrape reads and parses one Pod's /metrics. The source name is the Pod's
// name, which Merge puts in metrics.SourceLabel: the suite keys per-Pod
// counts by clusters.RouterPod.Name, as the sim names its sources (the
// apiserver tier found routerreplicas reading 0 per router Pod when this
// was <ns>/<pod>:<port>).
func (c *Cluster) scrape(ctx context.Context, p *corev1.Pod, defPort int) (metrics.Snapshot, []byte, error) {
	port := promPort(p, defPort)
	path := p.Annotations[api.AnnotationPromPath]
	if path == "" {
		path = "/metrics"
	}
	scheme := p.Annotations[api.AnnotationPromScheme]
	body, err := c.proxyGet(ctx, p.Namespace, p.Name, scheme, port, path)
	if err != nil {
		return metrics.Snapshot{}, nil, err
	}
	snap, err := metrics.ParseText(p.Name, body)
	return snap, body, err
}

// promPort is the Pod's prometheus.io/port annotation, or def when it is
// missing or not a port number.
func promPort(p *corev1.Pod, def int) int {
	if v, err := strconv.Atoi(p.Annotations[api.AnnotationPromPort]); err == nil && v > 0 {
		return v
	}
	return def
}

// RouterMetrics scrapes :9090 (the Pod's prometheus.io/port) of every router
// Pod not being deleted and merges them; each sample names its Pod in
// metrics.SourceLabel.
func (d *Deployment) RouterMetrics(ctx context.Context) (metrics.Snapshot, error) {
	pods, err := d.routerPods(ctx)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	if len(pods) == 0 {
		return metrics.Snapshot{}, fmt.Errorf("router metrics of %s/%s: no router Pod (%s)", d.ns, d.name, routerSelector(d.name, d.router()))
	}
	var parts []metrics.Snapshot
	for i := range pods {
		snap, _, err := d.c.scrape(ctx, &pods[i], api.RouterMetricsPort)
		if err != nil {
			return metrics.Snapshot{}, err
		}
		parts = append(parts, snap)
	}
	return metrics.Merge(parts...)
}

// EngineMetrics scrapes one replica's engine /metrics (the Pod's
// prometheus.io/port: the engine listener, 8200 behind an llm-d routing proxy).
func (d *Deployment) EngineMetrics(ctx context.Context, r clusters.Replica) (metrics.Snapshot, error) {
	p, err := d.c.kube.CoreV1().Pods(d.ns).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("engine metrics of replica %s: %s", r.Name, firstLine(err.Error()))
	}
	def := r.MetricsPort
	if def == 0 {
		def = api.EngineDefaultPort
	}
	snap, _, err := d.c.scrape(ctx, p, def)
	return snap, err
}

// podLogs reads one container's log through pods/log.
func (c *Cluster) podLogs(ctx context.Context, ns, pod, container string, previous bool, since time.Time) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.iv.Request)
	defer cancel()
	opts := &corev1.PodLogOptions{Container: container, Previous: previous}
	if !since.IsZero() {
		t := metav1.NewTime(since)
		opts.SinceTime = &t
	}
	rc, err := c.podIO.CoreV1().Pods(ns).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		which := "current"
		if previous {
			which = "previous"
		}
		return "", fmt.Errorf("logs of %s/%s container %s (%s): %s", ns, pod, container, which, firstLine(err.Error()))
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxLogBytes))
	if err != nil {
		return string(b), fmt.Errorf("read logs of %s/%s container %s: %w", ns, pod, container, err)
	}
	return string(b), nil
}

// RouterLogs returns the router program's output from every router Pod not
// being deleted (container "router", or "epp" for llm-d, unless
// opts.Container names another, e.g. "envoy"). Previous reads the last
// terminated container: what a crash-looping router printed before exiting.
// With several router Pods (a rollout: the old one serving, the new one
// crash-looping) each Pod's part starts with "==> pod/<name> <==", a Pod
// whose log cannot be read is left out, and it is an error only when no
// Pod's log can be read, as on the sim.
func (d *Deployment) RouterLogs(ctx context.Context, opts clusters.LogOptions) (string, error) {
	pods, err := d.routerPods(ctx)
	if err != nil {
		return "", err
	}
	if len(pods) == 0 {
		return "", fmt.Errorf("router logs of %s/%s: no router Pod (%s)", d.ns, d.name, routerSelector(d.name, d.router()))
	}
	var b strings.Builder
	var errs []error
	for i := range pods {
		container := opts.Container
		if container == "" {
			container = routerContainer(&pods[i])
		}
		out, err := d.c.podLogs(ctx, d.ns, pods[i].Name, container, opts.Previous, opts.Since)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(pods) > 1 {
			fmt.Fprintf(&b, "==> pod/%s <==\n", pods[i].Name)
		}
		b.WriteString(out)
	}
	if len(errs) == len(pods) {
		return "", errors.Join(errs...)
	}
	return b.String(), nil
}
