package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

// controllerWait bounds a wait for a controller to act: the namespace
// controller and the garbage collector act within seconds of a delete.
const controllerWait = time.Minute

// One control plane serves the subtests; the last ones stop it and check
// that nothing of it is left.
func TestHarness(t *testing.T) {
	c := Start(t, Options{})
	ctx := t.Context()

	// Clients in other processes use the kubeconfig; this one proves it works.
	fromFile, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", c.Kubeconfig, err)
	}
	kube := kubernetes.NewForConfigOrDie(fromFile)

	t.Run("the API server answers through the kubeconfig", func(t *testing.T) {
		v, err := kube.Discovery().ServerVersion()
		if err != nil {
			t.Fatalf("server version: %v", err)
		}
		if !strings.HasPrefix(v.GitVersion, "v") {
			t.Errorf("GitVersion %q", v.GitVersion)
		}
		body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			t.Errorf("/readyz = %q, %v", body, err)
		}
	})

	t.Run("a deleted namespace is finalized and removed with its objects", func(t *testing.T) {
		ns := createNamespace(t, kube, "rc-harness-ns")
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inside"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Without the namespace controller it would stay Terminating forever.
		waitGone(t, "namespace "+ns, func(ctx context.Context) error {
			_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		})
	})

	t.Run("an owned ConfigMap is collected when its owner is deleted", func(t *testing.T) {
		ns := createNamespace(t, kube, "rc-harness-gc")
		cms := kube.CoreV1().ConfigMaps(ns)
		owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
		dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{ref}}}
		if _, err := cms.Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}}
		if _, err := cms.Create(ctx, bystander, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "owned ConfigMap "+ns+"/dependent", func(ctx context.Context) error {
			_, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
			return err
		})
		if _, err := cms.Get(ctx, "bystander", metav1.GetOptions{}); err != nil {
			t.Errorf("the ConfigMap without an owner was touched: %v", err)
		}
	})

	t.Run("Stop ends every server and removes what it wrote", func(t *testing.T) {
		c.Stop()
		c.Stop() // a second Stop is a no-op
		if listening, err := netns.Listeners(); err != nil || len(listening) > 0 {
			t.Errorf("sockets still listening in the tier's network namespace after Stop: %v (%v)", listening, err)
		}
		for _, dir := range c.Dirs {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s still exists after Stop (%v)", dir, err)
			}
		}
		if kids := children(t); len(kids) > 0 {
			t.Errorf("child processes left after Stop: %v", kids)
		}
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := kube.CoreV1().Namespaces().List(short, metav1.ListOptions{}); err == nil {
			t.Error("the API server still answers after Stop")
		}
	})
}

func createNamespace(t *testing.T, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// waitGone polls get until it answers NotFound, failing t after controllerWait.
func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, controllerWait, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		t.Fatalf("%s not removed within %s (last read: %v)", what, controllerWait, last)
	}
}

// children lists the pids of this process's children, from every thread's
// /proc/self/task/<tid>/children.
func children(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}

// A Restartable cluster's API server stops and starts again under its
// clients: while it is down a request fails at once instead of hanging, and
// afterwards the same client config (and kubeconfig) reads what was stored
// before, from the same etcd.
func TestRestart(t *testing.T) {
	c := Start(t, Options{Restartable: true})
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(c.Config)
	ns := createNamespace(t, kube, "rc-harness-restart")

	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Get(down, ns, metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered while stopped")
	} else if down.Err() != nil {
		t.Fatalf("a request to the stopped API server hung until the deadline: %v", err)
	}

	if err := c.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, client := range map[string]kubernetes.Interface{"config": kube, "kubeconfig": kubernetes.NewForConfigOrDie(fromFile)} {
		if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Errorf("after the restart, through the %s: namespace %s: %v", name, ns, err)
		}
	}
	// The controllers reconnected too: a deletion is still finalized.
	if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "namespace "+ns+" after the restart", func(ctx context.Context) error {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})

	c.Stop()
	if listening, err := netns.Listeners(); err != nil || len(listening) > 0 {
		t.Errorf("sockets still listening after Stop of a restarted cluster: %v (%v)", listening, err)
	}
}

func TestRestartNeedsRestartable(t *testing.T) {
	c := &Cluster{}
	if err := c.StopAPIServer(); err == nil || !strings.Contains(err.Error(), "Options.Restartable") {
		t.Errorf("StopAPIServer on a plain cluster: %v", err)
	}
	if err := c.StartAPIServer(); err == nil || !strings.Contains(err.Error(), "Options.Restartable") {
		t.Errorf("StartAPIServer on a plain cluster: %v", err)
	}
}
