package harness

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdStartTimeout bounds the wait for the embedded etcd to serve; it is
// ready in about a second on an idle machine.
const etcdStartTimeout = time.Minute

// etcdServer is an embedded single-member etcd.
type etcdServer struct {
	e *embed.Etcd
	// URL is the client URL the API server stores through.
	URL string
}

// startEtcd runs an embedded etcd with its data under dir, on free loopback
// ports, logging errors only. fsync is off: the data lives as long as the
// test and is never reopened.
func startEtcd(dir string) (*etcdServer, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[0]))}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd stopped while starting: %w", err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready within %s", etcdStartTimeout)
	}
	return &etcdServer{e: e, URL: client.String()}, nil
}

// Close stops etcd and waits for its listeners to close.
func (s *etcdServer) Close() { s.e.Close() }

// freePorts returns n loopback ports free right now. Inside the tier's
// private network namespace only this process binds ports, so a port stays
// free until it is used.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
