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
	mu sync.Mutex
	// first and second are the /16 the addresses come from: 127.<pid>
	// by default, or Options.PodCIDR's.
	first, second int
	// start is the first candidate: 10.244.0.0/24 is left to the node.
	start int
	next  int
	inUse map[string]bool
}

// addressesPerProcess is how many addresses one /16 offers (.1–.253 of 256
// third octets); wrapping around reuses released ones.
const addressesPerProcess = 256 * 253

var podIPs = newIPAllocator(os.Getpid())

func newIPAllocator(pid int) *ipAllocator {
	// 127.0.x.x is left alone: 127.0.0.1 and resolvers like 127.0.0.53 live there.
	return &ipAllocator{first: 127, second: 1 + pid%254, inUse: map[string]bool{}}
}

// newCIDRAllocator hands out addresses of an IPv4 /16 (Options.PodCIDR),
// from its .1.1 up: the first /24 is left for the node's own address.
func newCIDRAllocator(cidr string) (*ipAllocator, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("kubelet: PodCIDR %q: %w", cidr, err)
	}
	ones, bits := n.Mask.Size()
	ip4 := n.IP.To4()
	if ip4 == nil || bits != 32 || ones != 16 {
		return nil, fmt.Errorf("kubelet: PodCIDR %q must be an IPv4 /16 such as 10.244.0.0/16", cidr)
	}
	return &ipAllocator{first: int(ip4[0]), second: int(ip4[1]), start: 253, next: 253, inUse: map[string]bool{}}, nil
}

// allocate returns an unused address on which every port in ports can be
// bound right now. The probe sockets are closed again: a listener held open
// would accept TCP connections into its backlog before the program listens
// and make a TCP readiness probe pass too early.
func (a *ipAllocator) allocate(ports []int) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range addressesPerProcess - a.start {
		n := a.next
		if a.next++; a.next == addressesPerProcess {
			a.next = a.start
		}
		ip := fmt.Sprintf("%d.%d.%d.%d", a.first, a.second, n/253, n%253+1)
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
	return "", fmt.Errorf("allocate pod IP: all %d addresses of %d.%d.0.0/16 are in use", addressesPerProcess-a.start, a.first, a.second)
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
