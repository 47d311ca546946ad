// Package harness starts a real Kubernetes control plane in the test process:
// an embedded etcd, kube-apiserver (k8s.io/kubernetes cmd/kube-apiserver
// app/testing) and the kube-controller-manager controllers the tier needs
// (namespace deletion and garbage collection by default; deployment and
// replicaset for package stack; controllers.go), and writes a cluster-admin
// kubeconfig for clients in other processes. Stop ends all of it and removes
// what it wrote.
//
// It runs only inside the private network namespace of package netns, so the
// addresses the tier uses (the API server's loopback port, Pod addresses in
// netns.PodCIDR) exist for nothing else on the machine.
package harness

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"

	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

// DefaultAPIServerFlags are the kube-apiserver flags Start always passes:
// RBAC is evaluated as in a real cluster (the harness's own identity is in
// system:masters), and the ServiceAccount admission plugin is off because
// no token controller mounts service account tokens into Pods here.
var DefaultAPIServerFlags = []string{
	"--authorization-mode=RBAC",
	"--disable-admission-plugins=ServiceAccount",
}

// Options tune Start; the zero value is the tier's default control plane.
type Options struct {
	// Controllers are the kube-controller-manager controllers to run, by the
	// names --controllers takes (controllers.go lists those it knows); empty
	// means DefaultControllers.
	Controllers []string
	// APIServerFlags are added after DefaultAPIServerFlags.
	APIServerFlags []string
	// Restartable puts the API server behind a stable address with a
	// stable identity, so StopAPIServer and StartAPIServer can restart it
	// under its clients: a serving certificate from a test CA, a static
	// cluster-admin token, and a TCP front on a fixed loopback port that
	// Config and Kubeconfig name.
	Restartable bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Config is a cluster-admin client configuration for this process.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig holding the same identity, for
	// clients in other processes of the same network namespace.
	Kubeconfig string
	// Dirs are the directories the control plane writes (kubeconfig, etcd
	// data, the API server's certificates); Stop removes them.
	Dirs []string

	mu    sync.Mutex
	stops []func() // run in reverse order by Stop

	// Restartable clusters only: how to start the API server again, the
	// running one's teardown, and the front that clients dial.
	t        *testing.T
	flags    []string
	storage  *storagebackend.Config
	teardown func()
	front    *front
}

// Start brings up etcd, kube-apiserver and the controllers, or fails t. The
// control plane is stopped when t ends; call Stop to end it earlier.
func Start(t *testing.T, opts Options) *Cluster {
	t.Helper()
	netns.Require(t)
	c, err := start(t, opts)
	if err != nil {
		if c != nil {
			c.Stop()
		}
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

func start(t *testing.T, opts Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "rc-apiserver-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dirs: []string{dir}}
	c.onStop(func() { os.RemoveAll(dir) })

	etcd, err := startEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return c, err
	}
	c.onStop(etcd.Close)

	storage := storagebackend.NewDefaultConfig(path.Join("/", "registry"), nil)
	storage.Transport.ServerList = []string{etcd.URL}
	c.t, c.storage = t, storage
	c.flags = append(append([]string{}, DefaultAPIServerFlags...), opts.APIServerFlags...)
	var identity *rest.Config
	if opts.Restartable {
		if identity, err = c.stableIdentity(dir); err != nil {
			return c, err
		}
	}
	api, err := c.startAPIServer()
	if err != nil {
		return c, err
	}
	c.onStop(c.stopAPIServer)
	c.Config = rest.CopyConfig(api.ClientConfig)
	if opts.Restartable {
		c.Config = identity
	}

	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(c.Kubeconfig, c.Config); err != nil {
		return c, err
	}

	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	stopControllers, err := startControllers(c.Config, controllers)
	c.onStop(stopControllers)
	if err != nil {
		return c, err
	}
	return c, nil
}

// startAPIServer starts kube-apiserver on the cluster's etcd with its flags
// and points the front (if any) at it.
func (c *Cluster) startAPIServer() (kubeapiservertesting.TestServer, error) {
	api, err := kubeapiservertesting.StartTestServer(c.t, kubeapiservertesting.NewDefaultTestServerOptions(), c.flags, c.storage)
	if err != nil {
		return api, fmt.Errorf("kube-apiserver: %w", err)
	}
	c.mu.Lock()
	c.teardown = api.TearDownFn
	c.Dirs = append(c.Dirs, api.TmpDir)
	c.mu.Unlock()
	if c.front != nil {
		c.front.point(strings.TrimPrefix(api.ClientConfig.Host, "https://"))
	}
	return api, nil
}

// stopAPIServer tears the running API server down, if one runs.
func (c *Cluster) stopAPIServer() {
	c.mu.Lock()
	teardown := c.teardown
	c.teardown = nil
	c.mu.Unlock()
	if c.front != nil {
		c.front.point("")
	}
	if teardown != nil {
		teardown()
	}
}

// StopAPIServer stops the API server of a Restartable cluster: its clients
// find the address refusing connections until StartAPIServer.
func (c *Cluster) StopAPIServer() error {
	if c.front == nil {
		return errors.New("harness: StopAPIServer needs Options.Restartable")
	}
	c.stopAPIServer()
	return nil
}

// StartAPIServer starts the API server of a Restartable cluster again, on
// the same etcd and with the same identity, behind the same address.
func (c *Cluster) StartAPIServer() error {
	if c.front == nil {
		return errors.New("harness: StartAPIServer needs Options.Restartable")
	}
	_, err := c.startAPIServer()
	return err
}

// Stop ends the controllers, the API server and etcd, in that order, and
// removes the directories they wrote. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	stops := c.stops
	c.stops = nil
	c.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

func (c *Cluster) onStop(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops = append(c.stops, f)
}

// WriteKubeconfig writes cfg's server, CA, TLS server name and bearer token
// as a one-context kubeconfig.
func WriteKubeconfig(file string, cfg *rest.Config) error {
	if cfg.BearerToken == "" || len(cfg.TLSClientConfig.CAData) == 0 {
		return errors.New("the API server's loopback client config has no token or CA to write to a kubeconfig")
	}
	const name = "rc-apiserver"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", file, err)
	}
	return nil
}
