package kubelet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// Pod IPs are loopback addresses: Linux routes all of 127/8 to lo, so every
// Pod gets its own address and keeps the ports a cluster would give it
// (engines 8000, routers 8081/9090).
//
// The second octet is derived from the process ID so that parallel test
// processes (ginkgo -p) draw from different /16s and rarely meet; a
// candidate whose ports are already taken (another process, a socket in
// TIME_WAIT) is skipped.
type ipAllocator struct {
	mu     sync.Mutex
	second int
	next   int
	inUse  map[string]bool
}

// addressesPerProcess is how many addresses one /16 offers (.1–.253 of 256
// third octets); wrapping around reuses released ones.
const addressesPerProcess = 256 * 253

var podIPs = newIPAllocator(os.Getpid())

func newIPAllocator(pid int) *ipAllocator {
	// 127.0.x.x is left alone: 127.0.0.1 and resolvers like 127.0.0.53 live there.
	return &ipAllocator{second: 1 + pid%254, inUse: map[string]bool{}}
}

// allocate returns an unused address on which every port in ports can be
// bound right now. The probe sockets are closed again: a listener held open
// would accept TCP connections into its backlog before the program listens
// and make a TCP readiness probe pass too early.
func (a *ipAllocator) allocate(ports []int) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range addressesPerProcess {
		n := a.next
		a.next = (a.next + 1) % addressesPerProcess
		ip := fmt.Sprintf("127.%d.%d.%d", a.second, n/253, n%253+1)
		if a.inUse[ip] {
			continue
		}
		if err := bindable(ip, ports); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			return "", fmt.Errorf("allocate pod IP: %w", err)
		}
		a.inUse[ip] = true
		return ip, nil
	}
	return "", fmt.Errorf("allocate pod IP: all %d addresses of 127.%d.0.0/16 are in use", addressesPerProcess, a.second)
}

func (a *ipAllocator) release(ip string) {
	if ip == "" {
		return
	}
	a.mu.Lock()
	delete(a.inUse, ip)
	a.mu.Unlock()
}

func bindable(ip string, ports []int) error {
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(p)))
		if err != nil {
			return err
		}
		_ = l.Close()
	}
	return nil
}
