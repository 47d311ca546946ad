package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
)

// CollectArtifacts writes what a human needs to diagnose a failed spec into
// dir, every byte passed through the redaction rules first:
//
//	modeldeployment.yaml            the live object with status
//	events.txt                      the namespace's events, oldest first
//	pods/<pod>.yaml                 each Pod of the deployment (spec + status)
//	logs/<pod>/<container>.log      current container logs
//	logs/<pod>/<container>.previous.log   the last terminated container, if any
//	metrics/<pod>.txt               a /metrics scrape of router and engine Pods
//
// It keeps going past failures and returns them joined; it never deletes.
func (d *Deployment) CollectArtifacts(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("artifacts dir %s: %w", dir, err)
	}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	if u, err := d.c.dyn.Resource(gvrModelDeployment).Namespace(d.ns).Get(ctx, d.name, metav1.GetOptions{}); err != nil {
		keep(fmt.Errorf("get ModelDeployment: %s", firstLine(err.Error())))
	} else {
		unstructuredClean(u.Object)
		keep(writeYAML(filepath.Join(dir, "modeldeployment.yaml"), u.Object))
	}

	keep(d.collectEvents(ctx, filepath.Join(dir, "events.txt")))

	pods, err := d.pods(ctx, instanceSelector(d.name))
	if err != nil {
		keep(err)
	}
	for i := range pods {
		p := &pods[i]
		keep(writeYAML(filepath.Join(dir, "pods", p.Name+".yaml"), podObject(p)))
		keep(d.collectLogs(ctx, dir, p))
		keep(d.collectMetrics(ctx, dir, p))
	}
	return errors.Join(errs...)
}

func (d *Deployment) collectEvents(ctx context.Context, path string) error {
	list, err := d.c.kube.CoreV1().Events(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list events in %s: %s", d.ns, firstLine(err.Error()))
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(&items[i]).Time.Before(eventTime(&items[j]).Time) })
	var b strings.Builder
	for i := range items {
		e := &items[i]
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s/%s\t%s (x%d)\n", eventTime(e).UTC().Format("2006-01-02T15:04:05Z"), e.Type, e.Reason,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, strings.ReplaceAll(e.Message, "\n", " "), max(e.Count, 1))
	}
	return writeText(path, b.String())
}

func eventTime(e *corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp
	}
	return e.CreationTimestamp
}

// collectLogs saves every container's current log and, when it restarted,
// the previous one (what a crashed router printed).
func (d *Deployment) collectLogs(ctx context.Context, dir string, p *corev1.Pod) error {
	var errs []error
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	restarted := map[string]bool{}
	for _, cs := range statuses {
		if cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil {
			restarted[cs.Name] = true
		}
	}
	var names []string
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, name := range names {
		out, err := d.c.podLogs(ctx, d.ns, p.Name, name, false, time.Time{})
		if err != nil {
			errs = append(errs, err)
		} else if werr := writeText(filepath.Join(dir, "logs", p.Name, name+".log"), out); werr != nil {
			errs = append(errs, werr)
		}
		if !restarted[name] {
			continue
		}
		prev, err := d.c.podLogs(ctx, d.ns, p.Name, name, true, time.Time{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if werr := writeText(filepath.Join(dir, "logs", p.Name, name+".previous.log"), prev); werr != nil {
			errs = append(errs, werr)
		}
	}
	return errors.Join(errs...)
}

// collectMetrics saves one raw /metrics scrape of a router or engine Pod
// that is running; Pods that publish no Prometheus port are skipped.
func (d *Deployment) collectMetrics(ctx context.Context, dir string, p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return nil
	}
	_, isRouter := p.Labels[api.LabelRouter]
	def := 0
	if isRouter {
		def = api.RouterMetricsPort
	}
	if p.Annotations[api.AnnotationPromPort] == "" && def == 0 {
		return nil
	}
	_, raw, err := d.c.scrape(ctx, p, def)
	if raw != nil {
		if werr := writeText(filepath.Join(dir, "metrics", p.Name+".txt"), string(raw)); werr != nil {
			return werr
		}
	}
	if err != nil {
		_ = writeText(filepath.Join(dir, "metrics", p.Name+".error.txt"), err.Error())
		return err
	}
	return nil
}

// podObject turns a Pod into a plain object with managedFields dropped and
// env/args redacted.
func podObject(p *corev1.Pod) any {
	b, err := json.Marshal(p)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": err.Error()}
	}
	unstructuredClean(m)
	m["apiVersion"], m["kind"] = "v1", "Pod"
	return m
}

func unstructuredClean(m map[string]any) {
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
}

// writeYAML redacts obj structurally, marshals it and redacts the text again.
func writeYAML(path string, obj any) error {
	obj = RedactObject(obj)
	b, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeText(path, string(b))
}

// writeText is the only way artifacts reach disk: through RedactText.
func writeText(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(RedactText(s)), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
