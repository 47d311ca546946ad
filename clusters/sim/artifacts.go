package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
)

// CollectArtifacts writes, under dir:
//
//	modeldeployment.yaml            the object with its status
//	events.log                      the deployment's and its Pods' events
//	pods/<pod>.txt                  kubectl-describe style Pod descriptions
//	logs/<pod>/<container>.log      current container log
//	logs/<pod>/<container>.previous.log  the terminated one before it, if any
//	metrics/<pod>.txt               a /metrics scrape of every router and engine Pod
//
// It keeps going past failures and returns them joined.
func (d *deployment) CollectArtifacts(ctx context.Context, dir string) error {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	write := func(rel string, data []byte) {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			keep(err)
			return
		}
		keep(os.WriteFile(path, data, 0o644))
	}

	obj := d.ctrl.Object()
	if y, err := yaml.Marshal(obj); err != nil {
		keep(fmt.Errorf("marshal object: %w", err))
	} else {
		write("modeldeployment.yaml", y)
	}

	var ev strings.Builder
	for _, e := range d.Events() {
		object := "modeldeployment/" + d.Name()
		if e.Pod != "" {
			object = "pod/" + e.Pod
		}
		fmt.Fprintf(&ev, "%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339Nano), e.Type, e.Reason, object,
			e.Message)
	}
	write("events.log", []byte(ev.String()))

	for _, p := range d.kube.ListStatus(d.Namespace(), map[string]string{api.LabelInstance: d.Name()}) {
		if err := ctx.Err(); err != nil {
			keep(err)
			break
		}
		write(filepath.Join("pods", p.Name+".txt"), []byte(d.kube.Describe(p.Namespace, p.Name)))
		for _, cs := range p.Containers {
			if text, err := d.kube.Logs(p.Namespace, p.Name, cs.Name, false, time.Time{}); err == nil {
				write(filepath.Join("logs", p.Name, cs.Name+".log"), []byte(text))
			} else {
				keep(err)
			}
			if text, err := d.kube.Logs(p.Namespace, p.Name, cs.Name, true, time.Time{}); err == nil {
				write(filepath.Join("logs", p.Name, cs.Name+".previous.log"), []byte(text))
			}
		}
		port, err := strconv.Atoi(p.Annotations[api.AnnotationPromPort])
		if err != nil {
			continue
		}
		url := "http://" + net.JoinHostPort(p.IP, strconv.Itoa(port)) + "/metrics"
		body, err := d.get(ctx, url, 2*time.Second, 64<<20)
		if err != nil {
			write(filepath.Join("metrics", p.Name+"-error.txt"), []byte(err.Error()+"\n"))
			continue
		}
		write(filepath.Join("metrics", p.Name+".txt"), body)
	}
	return errors.Join(errs...)
}
