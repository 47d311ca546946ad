package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/clusters"
)

func TestRouterConfigReadsTheLiveConfigMap(t *testing.T) {
	e := newFakeEnv(t)
	d := &Deployment{c: e.cluster, name: "qwen", ns: "team-a"}
	if _, err := d.RouterConfig(context.Background()); !errors.Is(err, clusters.ErrNotFound) {
		t.Fatalf("without the ConfigMap: %v, want ErrNotFound", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "qwen-router", Namespace: "team-a"},
		Data: map[string]string{"epp.yaml": "kind: EndpointPickerConfig\n", "extra-args.json": "[]"}}
	if _, err := e.kube.CoreV1().ConfigMaps("team-a").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := d.RouterConfig(context.Background())
	if err != nil || got["epp.yaml"] != "kind: EndpointPickerConfig\n" || got["extra-args.json"] != "[]" {
		t.Fatalf("RouterConfig = %v, %v", got, err)
	}
	// A later edit is what the next read returns: nothing is cached.
	cm.Data["extra-args.json"] = `["--v=4"]`
	if _, err := e.kube.CoreV1().ConfigMaps("team-a").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.RouterConfig(context.Background()); got["extra-args.json"] != `["--v=4"]` {
		t.Fatalf("after the edit: %v", got)
	}
}
