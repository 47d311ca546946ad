package traffic

import (
	"net"
	"syscall"
)

// h1Supported: idleConnAlive can tell a closed idle connection here.
const h1Supported = true

// connProbe peeks at an idle connection without blocking: an idle HTTP/1.1
// connection has nothing to read, so EOF (the server closed it), unexpected
// bytes or an error mean it must not carry another request. It is made once
// per connection, so that a probe allocates nothing.
type connProbe struct {
	rc    syscall.RawConn
	peek  func(fd uintptr) bool
	alive bool
}

func newConnProbe(nc net.Conn) *connProbe {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &connProbe{rc: rc}
	p.peek = func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // never wait for readiness
	}
	return p
}

// idleConnAlive reports whether the connection p was made for may carry
// another request; a nil probe says no.
func (p *connProbe) idleConnAlive() bool {
	if p == nil {
		return false
	}
	p.alive = false
	return p.rc.Read(p.peek) == nil && p.alive
}
